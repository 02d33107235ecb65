#include "alps/pipeline/memory_estimate.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "alps/core/device_memory.h"
#include "alps/core/host_allocator.h"
#include "alps/model/causal_lm.h"

namespace alps::pipeline {

using json = nlohmann::json;

namespace {

int64_t element_bytes(c10::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 30); }

// What the estimate adds up, as the report states it.
constexpr const char* kFormula =
    "host: nsamples * seqlen * hidden * bytes(dtype) (page-locked for a GPU: the next power of two; twice that with "
    "--sparsity-profile owl, whose dense pass runs on a copy); device: one block's weights + one [in,in] G per "
    "distinct linear input + solver workspace per concurrent solve (--solve-streams; ~4 [in,in] fp64, and 2 fp32 "
    "[hidden,hidden] per shared factorization; without calibration data ~4 fp32 copies of the largest weight; or, "
    "where "
    "larger, a structured step's choice: 4 [in,in] + 3 [out,in] fp64 of its largest consumer) + 64 "
    "MiB of library workspaces on a GPU + batch activations (with one batched attention step's scores; none without "
    "calibration data)";

// A structured step chooses a block's units before its solves, on its consumer's statistics (docs/structured.md):
// OSSCAR holds H and its inverse, the Schur complements' products and a candidate set's factor (about 4 [in, in]),
// and the weight, its refit and the residual ([out, in]), all in fp64.
int64_t structured_workspace(const model::CausalLM& m, const RunPlan& plan) {
  int64_t most = 0;
  for (const UnitStep& step : plan.unit_steps)
    for (int64_t b = 0; b < m.num_blocks(); ++b)
      for (const model::UnitRule& rule : m.unit_rules(b, step.structure)) {
        if (!rule.refusal.empty()) continue;  // experts: chosen by their routed outputs' norms
        const auto w = m.tensor(m.weight_name(b, rule.consumer));
        most = std::max(most, (4 * w.size(1) * w.size(1) + 3 * w.size(0) * w.size(1)) * 8);
      }
  return most;
}

// The largest block's weights and statistics (a mixture's blocks hold every expert's linears and their statistics;
// a model may mix mixture and dense blocks), and the widest input and largest weight of any linear.
struct Largest {
  int64_t weights = 0, stats = 0, in = 0, weight_elements = 0;
};
Largest largest_block(const model::CausalLM& m, const RunPlan& plan) {
  Largest l;
  for (int64_t b = 0; b < m.num_blocks(); ++b) {
    int64_t weights_b = 0, stats_b = 0;
    for (const auto& linear : plan.linears(m, b)) {
      const auto w = m.tensor(m.weight_name(b, linear));
      weights_b += w.numel() * element_bytes(plan.dtype);
      if (plan.needs_calibration) stats_b += w.size(1) * w.size(1) * element_bytes(plan.stats_dtype);
      l.in = std::max(l.in, w.size(1));
      l.weight_elements = std::max(l.weight_elements, w.numel());
    }
    l.weights = std::max(l.weights, weights_b);
    l.stats = std::max(l.stats, stats_b);
  }
  return l;
}

// Peak resident set size of this process (VmHWM).
double peak_rss_gib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1 << 20);  // kB
  }
  return 0;
}

}  // namespace

json memory_estimate(const model::CausalLM& m, const RunPlan& plan, int64_t windows, int64_t batch_size) {
  const auto& cfg = m.config();
  const int64_t act = element_bytes(plan.dtype);
  // A block's outputs overwrite its inputs batch by batch: one set of activations (none without calibration).
  int64_t activations = plan.needs_calibration ? windows * plan.seqlen * cfg.hidden_size * act : 0;
  // For a GPU they are page-locked, and libtorch's pinned allocator hands out blocks rounded up to a power of two
  // (5 GiB for a 5120-wide model at 128 x 2048 in fp32 takes 8).
  if (plan.device.is_cuda() && activations > 0) {
    int64_t block = 1;
    while (block < activations) block *= 2;
    activations = block;
  }
  const Largest largest = largest_block(m, plan);
  const int64_t block_weights = largest.weights, stats = largest.stats, max_in = largest.in;
  const int64_t max_weight = largest.weight_elements;
  // The ALPS solve holds a few [in, in] matrices in fp64 (eigenvectors, the inverse) next to the [in, out] iterates;
  // a method that reads only the weights, a few fp32 copies of the largest one (its magnitudes, its mask).
  // Solves run plan.solve_streams at a time on a GPU, each with its own workspace.
  // A structured step's choice runs before them, one unit rule at a time.
  const int64_t structured = structured_workspace(m, plan);
  const int64_t solver = std::max(
      plan.solve_streams * (plan.needs_calibration ? 4 * max_in * max_in * 8 : 4 * max_weight * 4), structured);
  // One batch's activations, and on a GPU the scores of one batched attention step beside them.
  const int64_t batch =
      plan.needs_calibration
          ? batch_size * plan.seqlen * std::max(cfg.hidden_size, cfg.intermediate_size) * act * 4 +
                (plan.device.is_cuda() ? m.attention_scores_bytes(batch_size, plan.seqlen, plan.dtype) : 0)
          : 0;
  const int64_t device_stats = plan.stats_on_host ? 0 : stats;
  // Linears that read the block's hidden states (q/k/v, gate/up; fc1) keep their shared factorization (Hn and its
  // eigenvectors, fp32) until the block ends: two such inputs per block.
  const int64_t shared = plan.needs_calibration ? 2 * 2 * cfg.hidden_size * cfg.hidden_size * 4 : 0;
  // On a GPU the math libraries allocate through libtorch's caching allocator as well: cuBLAS's workspace (8 x 4 MiB
  // per stream on Hopper in libtorch 2.x), cuBLASLt's, the warm-up's small problems. A fixed allowance; it is what
  // the tiny models measure above the rest (0.037 GiB against 0.0078); once per concurrent solve, whose thread and
  // stream get their own.
  const int64_t libraries = plan.device.is_cuda() ? plan.solve_streams * (int64_t{64} << 20) : 0;
  // On the CPU the buffers a batch frees wait in the host buffer cache (core/host_allocator.h) for the next batch:
  // at most about one more batch of activations, until the pass ends.
  const int64_t reuse = plan.device.is_cpu() ? std::min(batch, host_buffer_cache_stats().limit_bytes) : 0;
  // --sparsity-profile owl measures the dense blocks on a copy of block 0's inputs before pruning begins.
  if (plan.owl) activations *= 2;
  return {{"host_activations_gib", gib(activations)},
          {"host_buffer_reuse_gib_at_most", gib(reuse)},
          {"device_total_gib_at_most", gib(block_weights + device_stats + solver + shared + batch + libraries)},
          {"device_block_weights_gib", gib(block_weights)},
          {"device_statistics_gib_at_most", gib(device_stats)},
          {"host_statistics_gib_at_most", gib(stats - device_stats)},
          {"device_solver_gib", gib(solver + shared)},
          {"device_structured_choice_gib", gib(structured)},
          {"device_libraries_gib", gib(libraries)},
          {"device_batch_activations_gib", gib(batch)},
          {"formula", kFormula}};
}

void log_memory_estimate(const json& est, const c10::Device& device) {
  spdlog::info("memory estimate: host activations {:.2f} GiB (+ reused buffers <= {:.2f} GiB); {} at most {:.2f} "
               "GiB: block weights {:.2f} GiB + statistics {:.2f} GiB + solver {:.2f} GiB + batch {:.2f} GiB",
               est["host_activations_gib"].get<double>(), est["host_buffer_reuse_gib_at_most"].get<double>(),
               device.str(), est["device_total_gib_at_most"].get<double>(),
               est["device_block_weights_gib"].get<double>(), est["device_statistics_gib_at_most"].get<double>(),
               est["device_solver_gib"].get<double>(), est["device_batch_activations_gib"].get<double>());
}

void record_peak_memory(json& extra, const c10::Device& device) {
  extra["peak_rss_gib"] = peak_rss_gib();
  const auto peak = device_peak_bytes(device);
  if (!peak) return;
  auto& est = extra["memory_estimate"];
  est["device_peak_gib_measured"] = gib(*peak);
  spdlog::info("{} memory: peak {:.2f} GiB allocated by tensors (estimated at most {:.2f} GiB)", device.str(),
               gib(*peak), est["device_total_gib_at_most"].get<double>());
}

}  // namespace alps::pipeline
