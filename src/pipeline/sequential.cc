#include "alps/pipeline/sequential.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "alps/core/device.h"
#include "alps/core/device_memory.h"
#include "alps/core/error.h"
#include "alps/core/host_allocator.h"
#include "alps/core/log.h"
#include "alps/eval/datasets.h"
#include "alps/eval/evaluate.h"
#include "alps/io/fingerprint.h"
#include "alps/io/staged_path.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/calibration.h"
#include "alps/pipeline/layer_stats.h"
#include "alps/pipeline/output_dir.h"
#include "alps/pipeline/resume_state.h"
#include "alps/prune/method.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "alps/prune/refit.h"
#include "alps/prune/solve.h"
#include "alps/report/report.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string strip_weight(const std::string& name) {
  const std::string suffix = ".weight";
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0
             ? name.substr(0, name.size() - suffix.size())
             : name;
}


int64_t element_bytes(c10::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 30); }

// Peak resident set size of this process (VmHWM), for reports and benchmarks.
double peak_rss_gib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1 << 20);  // kB
  }
  return 0;
}

// Measured peaks next to the estimate printed at the start, so that the estimate can be checked (and trusted).
void record_peak_memory(report::RunReport& rep, const c10::Device& device) {
  rep.extra["peak_rss_gib"] = peak_rss_gib();
  const auto peak = device_peak_bytes(device);
  if (!peak) return;
  auto& est = rep.extra["memory_estimate"];
  est["device_peak_gib_measured"] = gib(*peak);
  spdlog::info("{} memory: peak {:.2f} GiB allocated by tensors (estimated at most {:.2f} GiB)", device.str(),
               gib(*peak), est["device_total_gib_at_most"].get<double>());
}

// How `--eval` scores zero-shot tasks: lm-eval's defaults, the recipe's document limit.
eval::ZeroShotOptions zeroshot_options(const Recipe& r) {
  eval::ZeroShotOptions z;
  z.limit = r.eval_limit;
  return z;
}

// Host and device memory the run needs, printed before starting so a user can stop a run that cannot fit.
json memory_estimate(const model::CausalLM& m, const Recipe& r, c10::ScalarType dtype) {
  const auto& cfg = m.config();
  const int64_t act = element_bytes(dtype);
  // A block's outputs overwrite its inputs batch by batch: one set of activations.
  int64_t activations = r.nsamples * r.seqlen * cfg.hidden_size * act;
  // For a GPU they are page-locked, and libtorch's pinned allocator hands out blocks rounded up to a power of two
  // (5 GiB for a 5120-wide model at 128 x 2048 in fp32 takes 8).
  if (resolve_device(r.device).is_cuda()) {
    int64_t block = 1;
    while (block < activations) block *= 2;
    activations = block;
  }
  int64_t block_weights = 0;
  int64_t stats = 0;
  int64_t max_in = 0;
  for (const auto& linear : m.linear_names()) {
    const auto w = m.tensor(m.weight_name(0, linear));
    block_weights += w.numel() * act;
    stats += w.size(1) * w.size(1) * element_bytes(parse_dtype(r.stats_dtype));
    max_in = std::max(max_in, w.size(1));
  }
  // The ALPS solve holds a few [in, in] matrices in fp64 (eigenvectors, the inverse) next to the [in, out] iterates.
  const int64_t solver = 4 * max_in * max_in * 8;
  // One batch's activations, and on a GPU the scores of one batched attention step beside them.
  const int64_t batch = r.batch_size * r.seqlen * std::max(cfg.hidden_size, cfg.intermediate_size) * act * 4 +
                        (resolve_device(r.device).is_cuda() ? m.attention_scores_bytes(r.batch_size, r.seqlen, dtype)
                                                            : 0);
  const int64_t device_stats = r.stats_device == "cpu" ? 0 : stats;
  // On the CPU the buffers a batch frees wait in the host buffer cache (core/host_allocator.h) for the next batch:
  // at most about one more batch of activations, until the pass ends.
  const int64_t reuse = resolve_device(r.device).is_cpu() ? std::min(batch, host_buffer_cache_stats().limit_bytes) : 0;
  return {{"host_activations_gib", gib(activations)},
          {"host_buffer_reuse_gib_at_most", gib(reuse)},
          {"device_total_gib_at_most", gib(block_weights + device_stats + solver + batch)},
          {"device_block_weights_gib", gib(block_weights)},
          {"device_statistics_gib_at_most", gib(device_stats)},
          {"host_statistics_gib_at_most", gib(stats - device_stats)},
          {"device_solver_gib", gib(solver)},
          {"device_batch_activations_gib", gib(batch)},
          {"formula",
           "host: nsamples * seqlen * hidden * bytes(dtype) (page-locked for a GPU: the next power of two); "
           "device: one block's weights + one [in,in] G per distinct linear input + solver workspace (~4 [in,in] "
           "fp64) + batch activations (with one batched attention step's scores)"}};
}

// What happens to one linear, typed: the recipe's strings parsed and its method built once for the whole run.
struct LayerJob {
  std::string weight;  // checkpoint tensor name
  std::string name;    // without ".weight", what globs match
  bool skip = false;
  std::string method;                      // its name, for the report
  const prune::Method* solver = nullptr;   // owned by the RunPlan
  std::optional<prune::Pattern> pattern;   // set unless skipped
  prune::Refine refine = prune::Refine::kNone;
};

// Every linear's job, built from the recipe before any work: building the plan is the validation, so a bad pattern
// or option for one layer stops the run at once, naming the layer, instead of hours in.
class RunPlan {
 public:
  RunPlan(const model::CausalLM& m, const Recipe& r) {
    for (int64_t b = 0; b < m.num_blocks(); ++b) {
      std::vector<LayerJob> jobs;
      for (const auto& linear : m.linear_names()) jobs.push_back(make_job(m, r, m.weight_name(b, linear)));
      blocks_.push_back(std::move(jobs));
    }
  }
  const std::vector<LayerJob>& block(int64_t b) const { return blocks_.at(static_cast<size_t>(b)); }

 private:
  LayerJob make_job(const model::CausalLM& m, const Recipe& r, const std::string& weight) {
    LayerJob j;
    j.weight = weight;
    j.name = strip_weight(weight);
    const LayerPlan plan = plan_for(r, j.name);
    j.skip = plan.skip;
    if (j.skip) return j;
    try {
      ALPS_USAGE_CHECK(!plan.pattern.empty(), "no sparsity or pattern given (use --sparsity S or --pattern N:M)");
      j.pattern = prune::Pattern::parse(plan.pattern);
      const auto& w = m.tensor(weight);
      j.pattern->check_shape(w.size(0), w.size(1));
      j.method = plan.method;
      j.solver = &method(plan.method, plan.options);
      j.refine = prune::parse_refine(plan.refine);
    } catch (const UsageError& e) {
      ALPS_USAGE_FAIL(j.name, ": ", e.what());
    } catch (const Error& e) {
      ALPS_FAIL(j.name, ": ", e.what());
    }
    return j;
  }

  // Methods are built once per (name, options): ALPS and DSnoT carry configuration only, no per-layer state.
  const prune::Method& method(const std::string& name, const json& options) {
    const std::string key = name + options.dump();
    auto it = methods_.find(key);
    if (it == methods_.end()) it = methods_.emplace(key, prune::make_method(name, options)).first;
    return *it->second;
  }

  std::map<std::string, std::unique_ptr<prune::Method>> methods_;
  std::vector<std::vector<LayerJob>> blocks_;
};

// Globs that match no linear are almost always typos ("mlp.down" for "mlp.down_proj"): the user meant to keep
// something dense or to treat it differently, and the run would silently do neither.
void warn_unmatched_globs(const model::CausalLM& m, const Recipe& r) {
  std::vector<std::string> names;
  for (int64_t b = 0; b < m.num_blocks(); ++b)
    for (const auto& linear : m.linear_names()) names.push_back(strip_weight(m.weight_name(b, linear)));
  auto unmatched = [&names](const std::string& glob) {
    return std::none_of(names.begin(), names.end(), [&glob](const std::string& n) { return glob_match(glob, n); });
  };
  for (const auto& g : r.skip)
    if (unmatched(g))
      spdlog::warn("skip glob '{}' matches no linear layer of this model (they are named like '{}'): nothing is left "
                   "dense because of it", g, names.front());
  for (const auto& rule : r.overrides)
    if (unmatched(rule.match))
      spdlog::warn("override match '{}' matches no linear layer of this model (they are named like '{}'): it changes "
                   "nothing", rule.match, names.front());
}


// The window of the evaluation after pruning: --eval-seqlen, else min(2048, the model's positions).
int64_t evaluation_seqlen(const Recipe& r, const model::CausalLM& m) {
  return r.eval_seqlen > 0 ? r.eval_seqlen : std::min<int64_t>(2048, m.config().max_positions);
}

OutputRequest output_request(const PruneJob& job) {
  return {job.out_dir, job.model_dir, job.dump_problems, job.overwrite, job.resume};
}

// Everything about the job that can be checked before any work, given the loaded (memory-mapped) model and its
// tokenizer (loading checked both); returns the plan it built.
std::unique_ptr<RunPlan> validate_with(const PruneJob& job, const model::CausalLM& m,
                                       const tokenizer::Tokenizer& tok) {
  const Recipe& r = job.recipe;
  check_recipe(r, "recipe");
  ALPS_CHECK(job.stop_after >= -1, "--stop-after must be >= 0, got ", job.stop_after);
  const auto dtype = parse_dtype(r.dtype);
  const auto device = resolve_device(r.device);
  ALPS_CHECK(device.is_cuda() || dtype == c10::kFloat || dtype == c10::kDouble, "compute dtype ", r.dtype,
             " needs a CUDA device; use fp32 on the CPU");
  check_output_request(output_request(job));
  ALPS_CHECK(r.seqlen <= m.config().max_sequence_length(), "seqlen ", r.seqlen, " exceeds the model's ",
             m.config().max_positions, " positions");
  auto plan = std::make_unique<RunPlan>(m, r);
  warn_unmatched_globs(m, r);
  // A resumed run finds the problem files its interrupted run wrote (and writes those of a block it redoes again).
  if (!job.dump_problems.empty() && fs::exists(job.dump_problems) && !job.resume) {
    // Problem files are written as blocks finish: a clash found hours in would either stop the run or lose a file.
    for (int64_t b = 0; b < m.num_blocks(); ++b)
      for (const auto& j : plan->block(b))
        ALPS_CHECK(j.skip || !fs::exists(job.dump_problems / (j.name + ".safetensors")), "--dump-problems ",
                   job.dump_problems.string(), " already holds ", j.name, ".safetensors; choose an empty directory");
  }
  if (!job.resume) resolve_calibration_source(r.calib, job.data_dir);
  ALPS_CHECK(r.eval_seqlen <= m.config().max_sequence_length(), "evaluation seqlen ", r.eval_seqlen,
             " exceeds the model's ", m.config().max_positions, " positions");
  // A text too short for one evaluation window, or a bad row of a task file, would stop the run after its pruning.
  // Read and tokenised again then (seconds, against the pruning's minutes to hours).
  (void)eval::prepare_evaluation(m, tok, eval::plan_evaluation(r.eval, job.data_dir), evaluation_seqlen(r, m),
                                 zeroshot_options(r));
  return plan;
}

// What must be the same for a continuation to equal an uninterrupted run: the recipe (evaluation aside, which
// happens after pruning), the model files and the calibration text. `calibration` is the resolved source, or
// empty when it cannot be found any more (a resume then trusts the saved inputs).
json resume_key(const PruneJob& job, const fs::path& calibration) {
  json r = recipe_to_json(job.recipe);
  // Where and in what batches the passes run changes rounding, not the problem: a run stopped on one GPU (or out of
  // its memory) continues on another device or with smaller batches.
  for (const char* k : {"device", "batch_size", "stats_device"}) r.erase(k);
  r.erase("eval");
  r.erase("eval_seqlen");
  r.erase("eval_max_windows");
  r.erase("eval_limit");
  json calib = {{"source", calibration.string()}};
  if (!calibration.empty()) calib["file"] = io::fingerprint_file(calibration);
  return {{"recipe", r}, {"model", io::fingerprint_checkpoint_dir(job.model_dir)}, {"calibration", calib}};
}

// The model, its inputs and the report as blocks are pruned one after another.
class PruneRun {
 public:
  PruneRun(const PruneJob& job, model::CausalLM& m, const tokenizer::Tokenizer& tok, const RunPlan& plan)
      : job_(job),
        r_(job.recipe),
        m_(m),
        tok_(tok),
        plan_(plan),
        device_(resolve_device(r_.device)),
        dtype_(parse_dtype(r_.dtype)) {
    m_.set_compute(device_, dtype_);
    rep_.recipe = recipe_to_json(r_);
    rep_.model = job.model_dir.string();
    rep_.output = normalize_output_path(job.out_dir).string();
    rep_.blocks_total = m_.num_blocks();
    rep_.extra["memory_estimate"] = memory_estimate(m_, r_, dtype_);
    const auto& est = rep_.extra["memory_estimate"];
    spdlog::info("memory estimate: host activations {:.2f} GiB (+ reused buffers <= {:.2f} GiB); {} at most {:.2f} "
                 "GiB: block weights {:.2f} GiB + statistics {:.2f} GiB + solver {:.2f} GiB + batch {:.2f} GiB",
                 est["host_activations_gib"].get<double>(), est["host_buffer_reuse_gib_at_most"].get<double>(),
                 device_.str(), est["device_total_gib_at_most"].get<double>(),
                 est["device_block_weights_gib"].get<double>(),
                 est["device_statistics_gib_at_most"].get<double>(), est["device_solver_gib"].get<double>(),
                 est["device_batch_activations_gib"].get<double>());
  }

  report::RunReport& report() { return rep_; }
  /// What the run is doing now, for an error that interrupts it.
  const std::string& step() const { return step_; }
  const c10::Device& device() const { return device_; }
  const at::Tensor& inputs() const { return inputs_; }
  int64_t next_block() const { return next_block_; }

  // Block 0's inputs: the embedded calibration windows.
  void capture_inputs(const fs::path& source, const json& key) {
    key_ = key;
    const auto t0 = std::chrono::steady_clock::now();
    const at::Tensor ids =
        sample_windows(read_documents(source), tok_, {source.string(), r_.nsamples, r_.seqlen, r_.seed});
    rep_.extra["calibration"] = {{"file", source.string()},
                                 {"windows", r_.nsamples},
                                 {"seqlen", r_.seqlen},
                                 {"seed", r_.seed},
                                 {"fingerprint", key.at("calibration").value("file", json())}};
    spdlog::info("calibration: {} windows of {} tokens from {}", r_.nsamples, r_.seqlen, source.string());
    step_ = "embedding the calibration windows";
    inputs_ = at::empty({r_.nsamples, r_.seqlen, m_.config().hidden_size}, host_options());
    m_.load_non_block();  // once, not a copy (to the GPU, or to the compute dtype) of the embeddings per batch
    for_each_batch([&](int64_t i, int64_t n) {
      inputs_.slice(0, i, i + n).copy_(m_.embed(ids.slice(0, i, i + n).to(device_)));
    });
    m_.unload_non_block();
    rep_.phase_seconds["calibration"] += seconds_since(t0);
  }

  // Where an interrupted run stopped: its finished blocks' weights, report and the next block's inputs.
  void restore(const StateDir& dir, const ResumeState& s) {
    key_ = s.key;
    next_block_ = s.next_block;
    for (const auto& l : s.layers) rep_.layers.push_back(report::layer_from_json(l));
    for (const auto& [k, v] : s.phase_seconds.items()) rep_.phase_seconds[k] = v;
    rep_.extra["calibration"] = s.calibration;
    for (int64_t b = 0; b < next_block_; ++b)
      for (const auto& [name, w] : dir.load_block(b)) m_.set_tensor(name, w);
    inputs_ = dir.load_inputs(s);
    if (device_.is_cuda()) inputs_ = inputs_.pin_memory();
    rep_.blocks_done = next_block_;
    if (next_block_ < rep_.blocks_total)
      spdlog::info("resuming at block {}/{}", next_block_ + 1, rep_.blocks_total);
    else
      spdlog::info("resuming after the last block ({}/{} pruned): evaluation and output left", next_block_,
                   rep_.blocks_total);
  }

  ResumeState state() const {
    ResumeState s;
    s.key = key_;
    s.next_block = next_block_;
    for (const auto& l : rep_.layers) s.layers.push_back(report::to_json(l));
    s.phase_seconds = rep_.phase_seconds;
    s.calibration = rep_.extra["calibration"];
    return s;
  }

  // Statistics, solves and the pruned forward pass of the next block; returns its pruned weights.
  std::vector<std::pair<std::string, at::Tensor>> prune_next_block() {
    const int64_t b = next_block_;
    m_.load_block(b);
    // Every linear of the block sees the inputs of the block as it was before any of its linears was pruned.
    auto t0 = std::chrono::steady_clock::now();
    step_ = fmt::format("collecting the statistics of block {}/{}", b + 1, rep_.blocks_total);
    BlockStats stats(r_.stats_device == "cpu" ? c10::Device(c10::kCPU) : device_, parse_dtype(r_.stats_dtype));
    model::LinearObserver observer = [&stats](const std::string& linear, const at::Tensor& x) {
      stats.observe(linear, x);
    };
    for_each_batch([&](int64_t i, int64_t n) {
      m_.observe_block(b, to_device(inputs_.slice(0, i, i + n)), observer);
      stats.end_forward();
    });
    release_host_buffer_cache();  // the solves allocate other sizes: the pass's activations go back now
    synchronize(device_);  // on a GPU the phase ends when its queued work does
    rep_.phase_seconds["statistics"] += seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    std::vector<std::pair<std::string, at::Tensor>> pruned;
    const auto linears = m_.linear_names();
    const auto& jobs = plan_.block(b);
    for (size_t li = 0; li < jobs.size(); ++li) {
      report::LayerReport lr = prune_layer(b, jobs[li], linears[li], stats);
      if (!lr.skipped) pruned.emplace_back(jobs[li].weight, m_.tensor(jobs[li].weight));
      rep_.layers.push_back(std::move(lr));
    }
    stats.clear();
    checked_grams_.clear();
    synchronize(device_);
    rep_.phase_seconds["solve"] += seconds_since(t0);

    // The next block sees what the *pruned* block produces, so errors do not compound unnoticed.
    t0 = std::chrono::steady_clock::now();
    step_ = fmt::format("running the pruned block {}/{}", b + 1, rep_.blocks_total);
    // Each batch's outputs replace its inputs: nothing reads a block's inputs after its statistics pass (a killed
    // run resumes from the inputs saved on disk), so the activations of the calibration set are held once.
    for_each_batch([&](int64_t i, int64_t n) {
      at::Tensor x = inputs_.slice(0, i, i + n);
      x.copy_(m_.block_forward(b, to_device(x)));
    });
    release_host_buffer_cache();
    m_.unload_block(b);
    synchronize(device_);
    rep_.phase_seconds["pruned_forward"] += seconds_since(t0);
    rep_.blocks_done = ++next_block_;
    return pruned;
  }

  // The pruned model as it is in memory, evaluated before the checkpoint is written so the report holds the result.
  void evaluate() {
    if (r_.eval.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    const eval::EvalPlan plan = eval::plan_evaluation(r_.eval, job_.data_dir);
    eval::PerplexityOptions popt;
    popt.seqlen = evaluation_seqlen(r_, m_);
    popt.batch_size = 1;
    popt.max_windows = r_.eval_max_windows;
    step_ = "evaluating the pruned model";
    m_.load_all();
    for (const auto& res : eval::run_evaluation(m_, tok_, plan, popt, zeroshot_options(r_))) rep_.eval.push_back(res);
    rep_.phase_seconds["eval"] += seconds_since(t0);
  }

 private:
  // Activations stay on the host between blocks; for a GPU they are page-locked, so that a batch's upload is one DMA
  // that runs without the host waiting on it (stream order keeps the block's kernels behind it).
  at::TensorOptions host_options() const {
    return at::TensorOptions().dtype(dtype_).pinned_memory(device_.is_cuda());
  }
  at::Tensor to_device(const at::Tensor& host) const { return host.to(device_, /*non_blocking=*/true); }

  template <typename F>
  void for_each_batch(F&& f) {
    for (int64_t i = 0; i < r_.nsamples; i += r_.batch_size) f(i, std::min(r_.batch_size, r_.nsamples - i));
  }

  report::LayerReport prune_layer(int64_t b, const LayerJob& lj, const std::string& linear, const BlockStats& stats) {
    report::LayerReport lr;
    lr.block = b;
    lr.name = lj.name;
    const at::Tensor W0 = m_.tensor(lj.weight);
    lr.shape = W0.sizes().vec();
    if (lj.skip) {
      lr.skipped = true;
      spdlog::info("block {}/{} {}: skipped (left dense)", b + 1, rep_.blocks_total, linear);
      return lr;
    }
    const LayerStats& s = stats.at(linear);
    prune::LayerProblem problem;
    problem.W0 = W0.to(device_, at::kFloat);
    problem.G = s.gram().to(device_, at::kFloat);
    problem.mean = s.mean().to(device_);
    problem.tokens = s.tokens();
    problem.sequences = r_.nsamples;
    problem.sequence_mean_sq = s.sequence_mean_sq().to(device_);
    problem.name = lj.name;
    problem.gram_checked = checked_grams_.count(&s) > 0;
    if (!job_.dump_problems.empty())
      prune::save_problem(job_.dump_problems / (lj.name + ".safetensors"), problem,
                          job_.resume ? io::ExistingFile::kReplace : io::ExistingFile::kKeep);

    const prune::Pattern& pattern = *lj.pattern;
    step_ = fmt::format("solving block {}/{} {} ({}x{})", b + 1, rep_.blocks_total, linear, W0.size(0), W0.size(1));
    try {
      prune::PcgOptions pcg;
      pcg.iterations = r_.refine_iterations;
      const prune::LayerResult res = prune::solve_layer(*lj.solver, problem, pattern, lj.refine, pcg);
      checked_grams_.insert(&s);
      lr.seconds = res.seconds;
      lr.rel_error = res.rel_error;
      lr.refine_seconds = res.refine_seconds;
      lr.rel_error_refined = res.rel_error_refined;
      lr.sparsity = res.sparsity;
      lr.stats = res.solution.stats;
      m_.set_tensor(lj.weight, res.W);
    } catch (const Error& e) {
      ALPS_FAIL("block ", b + 1, "/", rep_.blocks_total, " ", lj.name, ": ", e.what());
    }
    lr.method = lj.method;
    lr.pattern = pattern.str();
    lr.refine = prune::refine_name(lj.refine);
    spdlog::info("block {}/{} {}: {} {} sparsity {:.3f} err {:.4e}{} ({:.2f}s{})", b + 1, rep_.blocks_total, linear,
                 lr.method, lr.pattern, lr.sparsity, lr.rel_error,
                 lr.rel_error_refined ? fmt::format(" -> {:.4e} after {}", *lr.rel_error_refined, lr.refine) : "",
                 lr.seconds, lr.stats.empty() ? "" : ", " + prune::stats_text(lr.stats));
    return lr;
  }

  const PruneJob& job_;
  const Recipe& r_;
  model::CausalLM& m_;
  const tokenizer::Tokenizer& tok_;
  const RunPlan& plan_;
  c10::Device device_;
  c10::ScalarType dtype_;
  std::set<const LayerStats*> checked_grams_;  // this block's statistics whose G passed check_gram
  report::RunReport rep_;
  json key_;
  at::Tensor inputs_;  // [nsamples, seqlen, hidden] on the host, compute dtype: the next block's inputs
  std::string step_;
  int64_t next_block_ = 0;
};

// Resuming trusts the saved state only for the same recipe, model files and calibration text.
ResumeState load_resume_state(const PruneJob& job, const StateDir& dir) {
  ResumeState s = dir.load();
  fs::path calibration;
  try {
    calibration = resolve_calibration_source(job.recipe.calib, job.data_dir);
  } catch (const Error&) {
    spdlog::warn("calibration source '{}' cannot be found any more; resuming from the saved block inputs",
                 job.recipe.calib);
  }
  json now = resume_key(job, calibration);
  if (calibration.empty()) now["calibration"] = s.key.value("calibration", json());
  const auto diffs = resume_key_differences(s.key, now);
  if (!diffs.empty()) {
    std::string lines;
    for (const auto& d : diffs) lines += "\n  " + d;
    ALPS_FAIL("--resume: the interrupted run in ", job.out_dir.string(), " had other inputs:", lines,
              "\nrerun with the original inputs, or pass --overwrite instead of --resume to start over");
  }
  return s;
}

// The finished checkpoint and its report, written into a staging directory and swapped in at once.
void write_output(OutputDir& out, model::CausalLM& m, report::RunReport& rep) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path staging = out.begin_staging();
  for (const auto& name : m.write_files(staging))
    if (name != kReportFile)  // an input that is itself an alps output: its report is replaced below
      rep.files.push_back({{"name", name}, {"bytes", static_cast<int64_t>(fs::file_size(staging / name))}});
  rep.complete = true;
  rep.phase_seconds["save"] = seconds_since(t0);
  {
    std::ofstream f(staging / kReportFile);
    f << report::to_json(rep).dump(2) << "\n";
    ALPS_CHECK(f.good(), "write error on ", (staging / kReportFile).string());
  }
  out.commit();
  spdlog::info("wrote {} in {}", out.path().string(), format_duration(seconds_since(t0)));
}

// Running out of GPU memory is for the user to fix: say what did not fit, what to change, and that the blocks
// finished so far are kept.
[[noreturn]] void fail_out_of_memory(const c10::Error& e, const PruneJob& job, const std::string& step,
                                     int64_t blocks_done) {
  std::string what = e.what();
  what = what.substr(0, what.find('\n'));
  const auto& r = job.recipe;
  ALPS_FAIL("out of memory on device ", r.device, " while ", step, ": ", what, "\nto fit, lower --batch-size (now ",
            r.batch_size, ")", r.stats_device == "cpu" ? "" : ", add --stats-device cpu",
            r.dtype == "fp32" ? ", or use --dtype bf16" : "", ", or choose another --device; ",
            blocks_done > 0 ? "the " + std::to_string(blocks_done) +
                                  " finished block(s) are saved: rerun with --resume (any device, any batch size)"
                            : "nothing was pruned yet");
}

}  // namespace

report::RunReport run_prune(const PruneJob& job) {
  auto m = model::CausalLM::load(job.model_dir);
  const auto tok = tokenizer::load_tokenizer(job.model_dir);
  const auto plan = validate_with(job, m, *tok);
  OutputDir out(output_request(job));
  if (!job.dump_problems.empty()) fs::create_directories(job.dump_problems);
  StateDir state(out.state_dir());
  PruneRun run(job, m, *tok, *plan);
  report::RunReport& rep = run.report();
  reset_device_peak(run.device());
  try {
    if (out.resume()) {
      run.restore(state, load_resume_state(job, state));
    } else {
      const fs::path source = resolve_calibration_source(job.recipe.calib, job.data_dir);
      run.capture_inputs(source, resume_key(job, source));
      out.begin_fresh_state();
      state.save(run.state(), {}, run.inputs());  // from here on, --resume can continue even before block 1 ends
    }

    Progress progress("block", rep.blocks_total, 0, run.next_block());
    for (int64_t done = 0; run.next_block() < rep.blocks_total; ++done) {
      if (job.stop_after >= 0 && done >= job.stop_after) break;
      auto pruned = run.prune_next_block();
      const auto t0 = std::chrono::steady_clock::now();
      state.save(run.state(), pruned, run.inputs());
      rep.phase_seconds["save_state"] += seconds_since(t0);
      progress.step(run.next_block(), fmt::format("({} linears)", m.linear_names().size()));
    }
    record_peak_memory(rep, run.device());
    if (rep.blocks_done < rep.blocks_total) {
      spdlog::warn("stopped after block {}/{}; run the same command with --resume to continue", rep.blocks_done,
                   rep.blocks_total);
      return rep;
    }
    try {
      run.evaluate();
    } catch (const Error& e) {
      ALPS_FAIL(e.what(), "\nevery block is pruned and saved: the same command with --resume continues from here (with "
                "another --eval, or none, to write the checkpoint)");
    }
  } catch (const c10::Error& e) {
    if (!is_device_out_of_memory(e)) throw;
    fail_out_of_memory(e, job, run.step(), rep.blocks_done);
  }
  write_output(out, m, rep);
  return rep;
}

}  // namespace alps::pipeline
