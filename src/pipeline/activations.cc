#include "alps/pipeline/activations.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "alps/core/device_streams.h"
#include "alps/core/host_allocator.h"
#include "alps/core/log.h"
#include "alps/pipeline/run_plan.h"
#include "alps/pipeline/run_state.h"

namespace alps::pipeline {

Activations::Activations(model::CausalLM& m, const RunPlan& plan, std::pair<int64_t, int64_t> windows,
                         int64_t batch, Phases& phases)
    : m_(m), plan_(plan), windows_(windows), batch_(batch), phases_(phases), x_(at::empty({0}, at::kFloat)) {}

void Activations::adopt(at::Tensor host) {
  x_ = std::move(host);
  // Page-locked for a GPU: a batch's upload is then one DMA that runs without the host waiting on it (stream order
  // keeps the block's kernels behind it), and a download queues behind the kernels.
  if (plan_.device.is_cuda() && x_.defined() && x_.numel() > 0) x_ = x_.pin_memory();
}

at::Tensor Activations::to_device(const at::Tensor& host) const {
  return host.to(plan_.device, /*non_blocking=*/true);
}

void Activations::embed(const at::Tensor& ids) {
  if (windows() == 0) return;
  x_ = at::empty({windows(), ids.size(1), m_.config().hidden_size},
                 at::TensorOptions().dtype(plan_.dtype).pinned_memory(plan_.device.is_cuda()));
  m_.load_non_block();  // once, not a copy (to the GPU, or to the compute dtype) of the embeddings per batch
  each_batch([&](int64_t i, int64_t n) {
    const int64_t w = windows_.first + i;
    x_.slice(0, i, i + n).copy_(m_.embed(ids.slice(0, w, w + n).to(plan_.device)));
  });
  m_.unload_non_block();
}

BlockStats Activations::observe(int64_t b) {
  BlockStats stats(plan_.stats_device, plan_.stats_dtype);
  if (windows() == 0) return stats;
  const auto phase = phases_.enter("statistics", fmt::format("collecting the statistics of block {}/{}", b + 1,
                                                             m_.num_blocks()));
  // The debug log splits the pass into the forward and the statistics' updates, waiting for the device around each
  // update to do so (only then: the waits cost the overlap of host and device).
  const bool timed = spdlog::should_log(spdlog::level::debug);
  double update_seconds = 0;
  const model::LinearObserver observer = [&](const std::string& linear, const at::Tensor& x) {
    if (!timed) return stats.observe(linear, x);
    synchronize(plan_.device);
    const auto u0 = std::chrono::steady_clock::now();
    stats.observe(linear, x);
    synchronize(plan_.device);
    update_seconds += seconds_since(u0);
  };
  each_batch([&](int64_t i, int64_t n) {
    m_.observe_block(b, to_device(x_.slice(0, i, i + n)), observer, plan_.expert_inputs, nullptr,
                     plan_.prunes_router(b));
    stats.end_forward();
  });
  // The forward showed every linear's input (an expert's that no token chose: empty).
  for (const auto& linear : plan_.linears(m_, b)) (void)stats.at(linear);
  release_host_buffer_cache();  // the solves allocate other sizes: the pass's activations go back now
  synchronize(plan_.device);    // on a GPU the phase ends when its queued work does
  spdlog::debug("statistics of block {}/{}: {:.3f} s, of which the statistics' updates {:.3f} s", b + 1,
                m_.num_blocks(), phase.seconds(), update_seconds);
  return stats;
}

void Activations::observe_experts(int64_t b, const model::ExpertObserver& outputs) {
  const model::LinearObserver none = [](const std::string&, const at::Tensor&) {};
  each_batch([&](int64_t i, int64_t n) {
    m_.observe_block(b, to_device(x_.slice(0, i, i + n)), none, model::ExpertInputs::routed, &outputs);
  });
  synchronize(plan_.device);
}

void Activations::through_block(int64_t b, const model::LinearObserver* observer) {
  // Each batch's outputs replace its inputs: nothing reads a block's inputs after its statistics pass (a killed run
  // resumes from the inputs saved on disk), so the activations of the calibration set are held once. On a GPU the
  // download into page-locked memory is queued behind the batch's kernels without the host waiting, and the next
  // batch's upload and kernels queue behind it; the caller's synchronisation ends the pass.
  each_batch([&](int64_t i, int64_t n) {
    at::Tensor x = x_.slice(0, i, i + n);
    x.copy_(m_.block_forward(b, to_device(x), observer), /*non_blocking=*/x.is_pinned());
  });
}

void Activations::forward(int64_t b) {
  if (windows() == 0) return;
  const auto phase = phases_.enter("pruned_forward", fmt::format("running the pruned block {}/{}", b + 1,
                                                                 m_.num_blocks()));
  through_block(b, nullptr);
  release_host_buffer_cache();
  synchronize(plan_.device);
}

void Activations::pass(int64_t b, const model::LinearObserver& observer) {
  through_block(b, &observer);
  synchronize(plan_.device);
}

Activations Activations::copy() const {
  Activations c(m_, plan_, windows_, batch_, phases_);
  c.x_ = x_.clone();
  return c;
}

}  // namespace alps::pipeline
