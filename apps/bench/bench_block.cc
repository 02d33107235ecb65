// alps_bench_block: where one transformer block's time goes in the two passes `alps prune` makes over the
// calibration set: the statistics pass (the block up to its last linear's input, every Gram update) and the plain
// forward. Times each pass over one batch of [batch, seqlen] random hidden states, its share per top-level ATen
// operator and per operator inside alps's own profiling scopes (alps::causal_attention, alps::layer_stats), recorded
// through ATen's RecordFunction hooks, and the pass's FLOP bound at the sgemm rate measured in the same process.
// Then the attention step alone under each of its schedules (model/architecture.h).
// Usage: alps_bench_block --model DIR [--block 0] [--batch 8] [--seqlen 2048] [--repeat 3] [--threads N]
//        [--host-cache on|off]   (off: libtorch's own CPU allocator, as before core/host_allocator.h)
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "alps/core/error.h"
#include "alps/core/host_allocator.h"
#include "alps/core/threads.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/layer_stats.h"
#include "model/architecture.h"
#include "best_seconds.h"

namespace {

using Clock = std::chrono::steady_clock;

// Inclusive time of the outermost ATen operators called on this thread, by name, and of the operators directly
// inside alps's own scopes ("alps::causal_attention / aten::softmax").
std::map<std::string, std::pair<double, int64_t>> g_ops;
thread_local std::vector<std::string> t_stack;

struct OpStart : at::ObserverContext {
  Clock::time_point t0;
  std::string key;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  std::unique_ptr<OpStart> ctx;
  if (t_stack.empty() || (t_stack.size() == 1 && t_stack[0].rfind("alps::", 0) == 0)) {
    ctx = std::make_unique<OpStart>();
    ctx->key = t_stack.empty() ? fn.name() : "  " + t_stack[0] + " / " + fn.name();
    ctx->t0 = Clock::now();
  }
  t_stack.push_back(fn.name());
  return ctx;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  t_stack.pop_back();
  if (ctx == nullptr) return;
  auto* op = static_cast<OpStart*>(ctx);
  auto& [seconds, calls] = g_ops[op->key];
  seconds += std::chrono::duration<double>(Clock::now() - op->t0).count();
  ++calls;
}

double sgemm_gflops(int64_t m, int64_t k, int64_t n) {
  at::Tensor a = at::randn({m, k}), b = at::randn({k, n});
  at::Tensor c = at::matmul(a, b);
  return 2.0 * m * k * n / best_seconds(3, [&] { c = at::matmul(a, b); }) / 1e9;
}

void report(const char* pass, double best, double flops, double rate, int repeat) {
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(g_ops.begin(), g_ops.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("\n### %s: best %.3f s, %.1f GFLOP -> %.1f GFLOP/s, FLOP bound at sgemm rate %.3f s (%.2fx of it)\n\n",
              pass, best, flops / 1e9, flops / best / 1e9, flops / rate, best / (flops / rate));
  std::printf("| operator | calls/pass | seconds/pass | share |\n|---|---|---|---|\n");
  double total = 0;
  for (const auto& r : rows)
    if (r.first[0] != ' ') total += r.second.first;
  auto print = [&](const std::string& name, double seconds, int64_t calls) {
    if (seconds / repeat >= 0.002)
      std::printf("| %s | %lld | %.3f | %.1f%% |\n", name.c_str(), static_cast<long long>(calls / repeat),
                  seconds / repeat, 100 * seconds / total);
  };
  for (const auto& [name, v] : rows) {
    if (name[0] == ' ') continue;
    print(name, v.first, v.second);
    for (const auto& [inner, w] : rows)  // the operators inside an alps scope, below it
      if (inner.rfind("  " + name + " / ", 0) == 0) print("&nbsp;&nbsp;" + inner.substr(2), w.first, w.second);
  }
  std::printf("| (all ATen operators) | | %.3f | |\n", total / repeat);
  g_ops.clear();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string model_dir;
    int64_t block = 0, batch = 8, seqlen = 2048;
    int repeat = 3, threads = 0;
    bool no_cache = false;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--model") model_dir = value;
      else if (flag == "--block") block = std::stoll(value);
      else if (flag == "--batch") batch = std::stoll(value);
      else if (flag == "--seqlen") seqlen = std::stoll(value);
      else if (flag == "--repeat") repeat = std::max(1, std::stoi(value));
      else if (flag == "--threads") threads = std::stoi(value);
      else if (flag == "--host-cache") no_cache = value == "off";
      else ALPS_FAIL("alps_bench_block: unknown flag '", flag, "'");
    }
    ALPS_CHECK(!model_dir.empty(), "alps_bench_block: --model DIR is required");
    const alps::ThreadSettings ts = alps::configure_threads(threads);
    if (!no_cache) alps::install_host_buffer_cache();
    auto m = alps::model::CausalLM::load(model_dir);
    const auto& c = m.config();
    m.load_block(block);
    at::manual_seed(0);
    const at::Tensor x = at::randn({batch, seqlen, c.hidden_size});
    const double tokens = static_cast<double>(batch * seqlen);

    // FLOPs: every linear (2 * tokens * in * out), attention's two products over the keys each query sees
    // (causal: (seqlen + 1) / 2 on average), and per distinct linear input a syrk (tokens * in^2).
    double linear = 0;
    double last_linear = 0;  // the statistics pass skips the last linear's product (CausalLM::observe_block)
    for (const auto& name : m.linear_names(block)) {
      last_linear = 2.0 * tokens * static_cast<double>(m.tensor(m.weight_name(block, name)).numel());
      linear += last_linear;
    }
    const double attention = 2.0 * 2.0 * tokens * (seqlen + 1) / 2.0 * c.num_heads * c.head_dim;
    double gram = 0;
    {
      alps::pipeline::BlockStats probe(c10::kCPU, at::kFloat);
      alps::model::LinearObserver count = [&](const std::string& name, const at::Tensor& in) {
        probe.observe(name, in.narrow(1, 0, 1));
      };
      m.block_forward(block, x.narrow(1, 0, 1), &count);
      probe.end_forward();
      // Linears that share an input share one accumulator: one syrk each.
      std::map<const alps::pipeline::LayerStats*, int64_t> distinct;
      for (const auto& name : m.linear_names(block)) distinct[&probe.at(name)] = probe.at(name).gram().size(0);
      for (const auto& [stats, in] : distinct) gram += tokens * static_cast<double>(in) * in;
    }

    const double rate = std::max({sgemm_gflops(seqlen, c.hidden_size, c.intermediate_size),
                                  sgemm_gflops(seqlen, c.intermediate_size, c.hidden_size)}) * 1e9;
    std::printf("## alps_bench_block: %s block %lld, [%lld, %lld] hidden states, threads: %s\n\n"
                "sgemm rate (best of the block's fc shapes): %.1f GFLOP/s\n",
                model_dir.c_str(), static_cast<long long>(block), static_cast<long long>(batch),
                static_cast<long long>(seqlen), alps::thread_settings_text(ts).c_str(), rate / 1e9);

    auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(on_start, on_end).scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
    for (const bool stats : {true, false}) {
      m.block_forward(block, x);  // warm-up: allocator, BLAS buffers
      g_ops.clear();
      // One accumulator set for all runs, as the pipeline keeps one per block across its batches.
      alps::pipeline::BlockStats bs(c10::kCPU, at::kFloat);
      alps::model::LinearObserver observe = [&](const std::string& name, const at::Tensor& in) {
        bs.observe(name, in);
      };
      const double best = best_seconds(repeat, [&] {
        if (stats)
          m.observe_block(block, x, observe);
        else
          m.block_forward(block, x);
        bs.end_forward();
      });
      report(stats ? "statistics (forward to the last linear's input, Gram updates)" : "forward", best,
             linear + attention + (stats ? gram - last_linear : 0), rate, repeat);
    }
    at::removeCallback(handle);

    // The attention step alone, each schedule on the same queries, keys and values.
    std::printf("\n### attention alone ([%lld, %lld] queries, %lld heads, %lld KV heads, head_dim %lld)\n\n"
                "| schedule | seconds | GFLOP/s | of sgemm rate |\n|---|---|---|---|\n",
                static_cast<long long>(batch), static_cast<long long>(seqlen), static_cast<long long>(c.num_heads),
                static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim));
    const at::Tensor q = at::randn({batch, c.num_heads, seqlen, c.head_dim}),
                     k = at::randn({batch, c.num_kv_heads, seqlen, c.head_dim}), v = at::randn_like(k);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    for (const auto& [name, schedule] : {std::pair{"batched", alps::model::AttentionSchedule::batched},
                                         std::pair{"tiled", alps::model::AttentionSchedule::tiled}}) {
      alps::model::AttentionOptions options;
      options.scale = scale;
      options.schedule = schedule;
      (void)alps::model::causal_attention(q, k, v, options);
      const double best = best_seconds(repeat, [&] { (void)alps::model::causal_attention(q, k, v, options); });
      std::printf("| %s | %.3f | %.1f | %.2f |\n", name, best, attention / best / 1e9, attention / best / rate);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "alps_bench_block: %s\n", e.what());
    return 1;
  }
}
