#include "alps/pipeline/sequential.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "alps/core/device.h"
#include "alps/core/device_memory.h"
#include "alps/core/device_streams.h"
#include "alps/core/error.h"
#include "alps/core/host_allocator.h"
#include "alps/core/interrupt.h"
#include "alps/core/log.h"
#include "alps/dist/group.h"
#include "alps/dist/launch.h"
#include "alps/eval/datasets.h"
#include "alps/eval/evaluate.h"
#include "alps/io/fingerprint.h"
#include "alps/io/staged_path.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/calibration.h"
#include "alps/pipeline/dense_evaluation.h"
#include "alps/pipeline/layer_stats.h"
#include "alps/pipeline/memory_estimate.h"
#include "alps/pipeline/model_card.h"
#include "alps/pipeline/output_dir.h"
#include "alps/pipeline/rank_plan.h"
#include "alps/pipeline/resume_state.h"
#include "alps/pipeline/run_plan.h"
#include "alps/pipeline/solve_streams.h"
#include "alps/pipeline/state_writer.h"
#include "alps/prune/method.h"
#include "alps/prune/methods/wanda.h"
#include "alps/prune/owl.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "alps/prune/refit.h"
#include "alps/prune/row_split.h"
#include "alps/prune/solve.h"
#include "alps/report/report.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// f() with `m` held.
template <typename F>
auto locked(std::mutex& m, F&& f) {
  const std::lock_guard<std::mutex> lock(m);
  return f();
}

// How `--eval` scores zero-shot tasks: lm-eval's defaults, the recipe's document limit.
eval::ZeroShotOptions zeroshot_options(const Recipe& r) {
  eval::ZeroShotOptions z;
  z.limit = r.eval_limit;
  return z;
}

OutputRequest output_request(const PruneJob& job) {
  return {job.out_dir, job.model_dir, job.dump_problems, job.overwrite, job.resume};
}

// Everything about the job that can be checked before any work, given the loaded (memory-mapped) model and its
// tokenizer (loading checked both); returns the plan it built. `first`: rank 0 of a distributed run (or the one
// process), which alone checks (and tidies) the output path and evaluates.
std::unique_ptr<RunPlan> validate_with(const PruneJob& job, const model::CausalLM& m, const tokenizer::Tokenizer& tok,
                                       bool first) {
  const Recipe& r = job.recipe;
  ALPS_CHECK(job.stop_after >= -1, "--stop-after must be >= 0, got ", job.stop_after);
  ALPS_USAGE_CHECK(!job.eval_dense || !r.eval.empty(), "--eval-dense evaluates the input model on the datasets and "
                   "tasks of --eval: give --eval too");
  auto plan = std::make_unique<RunPlan>(m, r);
  if (first) check_output_request(output_request(job));
  warn_unmatched_globs(m, r);
  // A resumed run finds the problem files its interrupted run wrote (and writes those of a block it redoes again).
  if (!job.dump_problems.empty()) {
    ALPS_USAGE_CHECK(plan->needs_calibration, "--dump-problems writes layer problems (G, mean, tokens), which need "
                     "calibration data; no method of this run reads any");
    if (fs::exists(job.dump_problems) && !job.resume) {
      // Problem files are written as blocks finish: a clash found hours in would either stop the run or lose a file.
      for (int64_t b = 0; b < m.num_blocks(); ++b)
        for (const auto& j : plan->block(b))
          ALPS_CHECK(j.skip || !fs::exists(job.dump_problems / (j.name + ".safetensors")), "--dump-problems ",
                     job.dump_problems.string(), " already holds ", j.name,
                     ".safetensors; choose an empty directory");
    }
  }
  if (!job.resume && plan->needs_calibration) resolve_calibration_source(r.calib, job.data_dir);
  if (!plan->needs_calibration && r.calib != Recipe{}.calib)
    spdlog::warn("--calib {} is not read: no method of this run reads calibration data", r.calib);
  // A text too short for one evaluation window, or a bad row of a task file, would stop the run after its pruning.
  // Read and tokenised again then (seconds, against the pruning's minutes to hours).
  if (first)
    (void)eval::prepare_evaluation(m, tok, eval::plan_evaluation(r.eval, job.data_dir), plan->eval_seqlen,
                                   zeroshot_options(r));
  return plan;
}

// The model, its inputs and the report as blocks are pruned one after another.
class PruneRun {
 public:
  /// `job.recipe` is the resolved one (resolved_recipe).
  PruneRun(const PruneJob& job, model::CausalLM& m, const tokenizer::Tokenizer& tok, const RunPlan& plan,
           StateWriter& writer, dist::Group& group)
      : job_(job), r_(job.recipe), m_(m), tok_(tok), plan_(plan), writer_(writer), group_(group),
        share_(dist::share_of(r_.nsamples, group.rank(), group.size())) {
    m_.set_compute(plan_.device, plan_.dtype);
    rep_.recipe = recipe_to_json(r_);
    rep_.model = job.model_dir.string();
    rep_.output = normalize_output_path(job.out_dir).string();
    rep_.blocks_total = m_.num_blocks();
    Recipe this_rank = r_;  // a rank holds the activations of its share of the windows only
    this_rank.nsamples = windows();
    rep_.extra["memory_estimate"] = memory_estimate(m_, this_rank, plan_);
    log_memory_estimate(rep_.extra["memory_estimate"], plan_.device);
  }

  report::RunReport& report() { return rep_; }
  /// What the run is doing now, for an error that interrupts it.
  std::string step() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return step_;
  }
  const c10::Device& device() const { return plan_.device; }
  /// The number of calibration windows this rank holds (all of them in a run of one process).
  int64_t windows() const { return share_.second - share_.first; }
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
    if (group_.size() > 1)
      spdlog::info("{} ranks hold {} to {} windows each", group_.size(), r_.nsamples / group_.size(),
                   (r_.nsamples + group_.size() - 1) / group_.size());
    set_step("embedding the calibration windows");
    // Every rank draws all windows (the same draw whatever the world size) and embeds its share.
    inputs_ = at::empty({windows(), r_.seqlen, m_.config().hidden_size}, host_options());
    m_.load_non_block();  // once, not a copy (to the GPU, or to the compute dtype) of the embeddings per batch
    for_each_batch([&](int64_t i, int64_t n) {
      const int64_t w = share_.first + i;
      inputs_.slice(0, i, i + n).copy_(m_.embed(ids.slice(0, w, w + n).to(plan_.device)));
    });
    m_.unload_non_block();
    rep_.phase_seconds["calibration"] += seconds_since(t0);
  }

  // --sparsity-profile owl: every block's outlier fraction, measured as OWL measures it, on the dense model (each
  // block run on the dense blocks' outputs, one pass over the windows before any block is pruned), and the blocks'
  // sparsities from them. Block 0's inputs are kept for the pruning; the pass runs on a copy.
  void allocate_owl() {
    const auto t0 = std::chrono::steady_clock::now();
    const prune::OwlOptions& o = *plan_.owl;
    at::Tensor x = inputs_.clone();
    std::vector<double> fractions;
    for (int64_t b = 0; b < m_.num_blocks(); ++b) {
      set_step(fmt::format("measuring the outliers of dense block {}/{} (--sparsity-profile owl)", b + 1,
                           rep_.blocks_total));
      m_.load_block(b);
      std::map<std::string, at::Tensor> sum_sq;  // per linear: the sums of squares of its input's columns
      const model::LinearObserver observer = [&](const std::string& linear, const at::Tensor& in) {
        const at::Tensor s = in.reshape({-1, in.size(-1)}).to(at::kFloat).pow(2).sum(0);
        auto [it, fresh] = sum_sq.emplace(linear, s);
        if (!fresh) it->second.add_(s);
      };
      for_each_batch([&](int64_t i, int64_t n) {
        at::Tensor xb = x.slice(0, i, i + n);
        xb.copy_(m_.block_forward(b, to_device(xb), &observer), /*non_blocking=*/xb.is_pinned());
      });
      synchronize(plan_.device);
      for (const auto& linear : m_.linear_names())  // over every rank's windows, the same sums on all
        group_.all_reduce_sum(sum_sq.at(linear), fmt::format("measuring the outliers of dense block {}/{}", b + 1,
                                                             rep_.blocks_total));
      std::vector<at::Tensor> scores;
      for (const auto& linear : m_.linear_names())
        scores.push_back(prune::wanda_score(m_.tensor(m_.weight_name(b, linear)).to(plan_.device),
                                            sum_sq.at(linear), static_cast<double>(r_.nsamples)));
      fractions.push_back(prune::outlier_fraction(scores, o.m));
      m_.unload_block(b);
    }
    release_host_buffer_cache();
    const double target = r_.pattern->sparsity();
    json profile = {{"profile", "owl"}, {"m", o.m}, {"lambda", o.lambda}, {"sparsity", target},
                    {"outlier_fraction", fractions}};
    if (r_.pattern->is_n_m()) {  // OWL's mixed N:M variant: a kept count per block
      block_kept_ = prune::owl_block_kept(fractions, r_.pattern->n(), o.lambda);
      block_sparsity_.clear();
      for (int64_t k : block_kept_)
        block_sparsity_.push_back(1.0 - static_cast<double>(k) / static_cast<double>(r_.pattern->m()));
      profile["pattern"] = r_.pattern->str();
      profile["block_kept"] = block_kept_;
      profile["block_sparsity"] = block_sparsity_;
    } else {
      block_sparsity_ = prune::owl_block_sparsities(fractions, target, o.lambda);
      profile["block_sparsity"] = block_sparsity_;
      const auto [zeros, weights] = apportion_profile();
      profile["zeros"] = zeros;
      profile["weights"] = weights;
    }
    rep_.extra["sparsity_profile"] = profile;
    const auto [lo, hi] = std::minmax_element(block_sparsity_.begin(), block_sparsity_.end());
    spdlog::info("sparsity profile owl (M {}, lambda {}): block sparsities {:.4f} .. {:.4f}, mean {:.4f}", o.m,
                 o.lambda, *lo, *hi, target);
    rep_.phase_seconds["sparsity_profile"] += seconds_since(t0);
  }

  // The zeros of every linear that follows the profile, from the blocks' sparsities, so that they total
  // round(S N) over those linears' N weights (prune::apportion_zeros); returns that total and N.
  std::pair<int64_t, int64_t> apportion_profile() {
    std::vector<std::string> weights;
    std::vector<double> sparsity;
    std::vector<int64_t> numel;
    for (int64_t b = 0; b < plan_.num_blocks(); ++b)
      for (const LayerJob& j : plan_.block(b)) {
        if (j.skip || !j.follows_profile) continue;
        weights.push_back(j.weight);
        sparsity.push_back(block_sparsity_.at(static_cast<size_t>(b)));
        numel.push_back(m_.tensor(j.weight).numel());
      }
    const auto zeros = prune::apportion_zeros(sparsity, numel, r_.pattern->sparsity());
    profile_zeros_.clear();
    for (size_t i = 0; i < weights.size(); ++i) profile_zeros_[weights[i]] = zeros[i];
    return {std::accumulate(zeros.begin(), zeros.end(), int64_t{0}),
            std::accumulate(numel.begin(), numel.end(), int64_t{0})};
  }

  // A run whose methods read only the weights: no calibration text, no activations.
  void without_inputs(const json& key) {
    key_ = key;
    rep_.extra["calibration"] = {{"windows", 0}, {"why", "no method of this run reads calibration data"}};
    spdlog::info("calibration: none (no method of this run reads calibration data)");
    inputs_ = at::empty({0}, at::kFloat);
  }

  // Where an interrupted run stopped: its finished blocks' weights, report and the next block's inputs.
  void restore(const StateDir& dir, const ResumeState& s) {
    key_ = s.key;
    next_block_ = s.next_block;
    for (const auto& l : s.layers) rep_.layers.push_back(report::layer_from_json(l));
    for (const auto& [k, v] : s.phase_seconds.items()) rep_.phase_seconds[k] = v;
    rep_.extra["calibration"] = s.calibration;
    if (!s.sparsity_profile.is_null()) {
      rep_.extra["sparsity_profile"] = s.sparsity_profile;
      block_sparsity_ = s.sparsity_profile.at("block_sparsity").get<std::vector<double>>();
      if (s.sparsity_profile.contains("block_kept"))
        block_kept_ = s.sparsity_profile.at("block_kept").get<std::vector<int64_t>>();
      else
        apportion_profile();
    }
    if (group_.rank() == 0)  // the others never read finished blocks (see prune_next_block)
      for (int64_t b = 0; b < next_block_; ++b)
        for (const auto& [name, w] : dir.load_block(b)) m_.set_tensor(name, w);
    inputs_ = dir.load_inputs(s, share_.first, share_.second);
    if (plan_.device.is_cuda() && inputs_.defined() && inputs_.numel() > 0) inputs_ = inputs_.pin_memory();
    rep_.blocks_done = next_block_;
    if (next_block_ < rep_.blocks_total)
      spdlog::info("resuming at block {}/{}", next_block_ + 1, rep_.blocks_total);
    else
      spdlog::info("resuming after the last block ({}/{} pruned): evaluation and output left", next_block_,
                   rep_.blocks_total);
  }

  // Saves the state reached so far on the writer's thread: the next block's statistics and solves run meanwhile,
  // and its pruned forward pass, which overwrites the inputs being written, waits for the save first.
  void save_state(std::vector<std::pair<std::string, at::Tensor>> pruned) {
    finish_saving();
    // After the last block nothing reads its outputs (the evaluation runs the whole model on its own windows): the
    // state keeps none, a block's activations less to write and to wait for.
    writer_.start(state(), std::move(pruned), next_block_ < rep_.blocks_total ? inputs_ : at::Tensor());
  }

  // Bytes this rank moved among the ranks that solve linears in parts: their statistics and the parts' sums.
  int64_t part_bytes() const {
    int64_t n = 0;
    for (const auto& [key, g] : part_groups_) n += g->bytes_reduced() + g->bytes_broadcast();
    return n;
  }

  // Waits for the save in flight (the end of the run, or before the inputs change).
  void finish_saving() { rep_.phase_seconds["save_state"] += writer_.wait(); }

  ResumeState state() const {
    ResumeState s;
    s.key = key_;
    s.next_block = next_block_;
    for (const auto& l : rep_.layers) s.layers.push_back(report::to_json(l));
    s.phase_seconds = rep_.phase_seconds;
    s.calibration = rep_.extra["calibration"];
    s.sparsity_profile = rep_.extra.value("sparsity_profile", json());
    if (group_.size() > 1)
      for (int r = 0; r < group_.size(); ++r) s.input_shards.push_back(dist::share_of(r_.nsamples, r, group_.size()));
    return s;
  }

  // Statistics, solves and the pruned forward pass of the next block; returns its pruned weights.
  std::vector<std::pair<std::string, at::Tensor>> prune_next_block() {
    const int64_t b = next_block_;
    m_.load_block(b);
    BlockStats stats(plan_.stats_device, plan_.stats_dtype);
    if (plan_.needs_calibration) collect_statistics(b, stats);
    const auto linears = m_.linear_names();
    std::vector<LayerJob> jobs = plan_.block(b);
    const SolveCosts costs = solve_costs(jobs, linears, stats);
    // Each linear (with those sharing its input) is solved by one rank, or in parts of its rows by several
    // (rank_plan.h), the ranks chosen by cost.
    std::vector<std::vector<int>> ranks(jobs.size(), std::vector<int>{0});
    if (group_.size() > 1) {
      ranks = plan_ranks(solve_work(jobs, costs), group_.size(), split_rule());
      open_part_groups(costs, ranks);
      if (plan_.needs_calibration) reduce_statistics(b, jobs, linears, costs, ranks, stats);
    }

    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::pair<std::string, at::Tensor>> pruned;
    if (!block_sparsity_.empty())  // a sparsity profile's share of the model's zeros, where no override set another
      for (LayerJob& j : jobs)
        if (!j.skip && j.follows_profile) {
          const auto w = m_.tensor(j.weight);
          j.pattern = block_kept_.empty()
                          ? prune::Pattern::unstructured_count(profile_zeros_.at(j.weight), w.size(0), w.size(1))
                          : prune::Pattern::n_m(block_kept_.at(static_cast<size_t>(b)), r_.pattern->m());
        }
    // Several solves at once on a GPU (--solve-streams), each list of linears on a stream of its own; the reports
    // keep block order. After a failure the other lists start no further linear.
    const auto lists = solve_lists(costs, ranks);
    std::vector<report::LayerReport> reports(jobs.size());
    std::atomic<bool> failed{false};
    run_on_streams(plan_.device, static_cast<int>(lists.size()), [&](int l) {
      for (size_t li : lists[static_cast<size_t>(l)]) {
        if (failed) return;
        try {
          reports[li] = prune_layer(b, jobs[li], linears[li], stats, part_of(costs, ranks, li));
        } catch (...) {
          failed = true;
          throw;
        }
      }
    });
    stats.clear();
    checked_grams_.clear();
    synchronize(plan_.device);
    rep_.phase_seconds["solve"] += seconds_since(t0);
    if (group_.size() > 1) share_solutions(b, jobs, linears, ranks, reports);
    for (size_t li = 0; li < jobs.size(); ++li) {
      if (!reports[li].skipped) pruned.emplace_back(jobs[li].weight, m_.tensor(jobs[li].weight));
      rep_.layers.push_back(std::move(reports[li]));
    }

    if (plan_.needs_calibration) run_pruned_block(b);
    m_.unload_block(b);
    rep_.blocks_done = ++next_block_;
    // Ranks other than 0 never read a finished block's weights again (rank 0 writes the checkpoint): they go back to
    // the mapped checkpoint's pages, and a rank holds one block's weights, not the pruned model.
    if (group_.rank() != 0)
      for (const auto& [name, w] : pruned) m_.release_tensor(name);
    return pruned;
  }

  // The pruned model as it is in memory, evaluated before the checkpoint is written so the report holds the result.
  void evaluate() {
    if (r_.eval.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    set_step("evaluating the pruned model");
    m_.load_all();
    for (const auto& res :
         eval::run_evaluation(m_, tok_, eval::plan_evaluation(r_.eval, job_.data_dir), perplexity_options(),
                              zeroshot_options(r_)))
      rep_.eval.push_back(res);
    rep_.phase_seconds["eval"] += seconds_since(t0);
  }

  // The same evaluation of the input model, while no block is pruned yet (or from the cache).
  void evaluate_dense() {
    const auto t0 = std::chrono::steady_clock::now();
    set_step("evaluating the dense model");
    const DenseEvaluation dense =
        pipeline::evaluate_dense(job_.model_dir, m_, tok_, eval::plan_evaluation(r_.eval, job_.data_dir),
                                 perplexity_options(), zeroshot_options(r_));
    rep_.eval_dense = dense.results;
    rep_.extra["dense_eval"] = {{"cache_file", dense.cache_file.string()}, {"from_cache", dense.from_cache}};
    if (!dense.from_cache) rep_.phase_seconds["dense_eval"] += seconds_since(t0);
  }

 private:
  // Every linear of the block sees the inputs of the block as it was before any of its linears was pruned.
  void collect_statistics(int64_t b, BlockStats& stats) {
    const auto t0 = std::chrono::steady_clock::now();
    set_step(fmt::format("collecting the statistics of block {}/{}", b + 1, rep_.blocks_total));
    // The debug log splits the pass into the forward and the statistics' updates, waiting for the device around
    // each update to do so (only then: the waits cost the overlap of host and device).
    const bool timed = spdlog::should_log(spdlog::level::debug);
    double update_seconds = 0;
    model::LinearObserver observer = [&](const std::string& linear, const at::Tensor& x) {
      if (!timed) return stats.observe(linear, x);
      synchronize(plan_.device);
      const auto u0 = std::chrono::steady_clock::now();
      stats.observe(linear, x);
      synchronize(plan_.device);
      update_seconds += seconds_since(u0);
    };
    for_each_batch([&](int64_t i, int64_t n) {
      m_.observe_block(b, to_device(inputs_.slice(0, i, i + n)), observer);
      stats.end_forward();
    });
    release_host_buffer_cache();  // the solves allocate other sizes: the pass's activations go back now
    synchronize(plan_.device);    // on a GPU the phase ends when its queued work does
    rep_.phase_seconds["statistics"] += seconds_since(t0);
    spdlog::debug("statistics of block {}/{}: {:.3f} s, of which the statistics' updates {:.3f} s", b + 1,
                  rep_.blocks_total, seconds_since(t0), update_seconds);
  }

  // The next block sees what the *pruned* block produces, so errors do not compound unnoticed.
  void run_pruned_block(int64_t b) {
    finish_saving();
    const auto t0 = std::chrono::steady_clock::now();
    set_step(fmt::format("running the pruned block {}/{}", b + 1, rep_.blocks_total));
    // Each batch's outputs replace its inputs: nothing reads a block's inputs after its statistics pass (a killed
    // run resumes from the inputs saved on disk), so the activations of the calibration set are held once. On a
    // GPU the download into page-locked memory is queued behind the batch's kernels without the host waiting, and
    // the next batch's upload and kernels queue behind it; the synchronisation below ends the phase.
    for_each_batch([&](int64_t i, int64_t n) {
      at::Tensor x = inputs_.slice(0, i, i + n);
      x.copy_(m_.block_forward(b, to_device(x)), /*non_blocking=*/x.is_pinned());
    });
    release_host_buffer_cache();
    synchronize(plan_.device);
    rep_.phase_seconds["pruned_forward"] += seconds_since(t0);
  }

  eval::PerplexityOptions perplexity_options() const {
    eval::PerplexityOptions popt;
    popt.seqlen = plan_.eval_seqlen;
    popt.batch_size = 1;
    popt.max_windows = r_.eval_max_windows;
    return popt;
  }

  // Activations stay on the host between blocks; for a GPU they are page-locked, so that a batch's upload is one DMA
  // that runs without the host waiting on it (stream order keeps the block's kernels behind it).
  at::TensorOptions host_options() const {
    return at::TensorOptions().dtype(plan_.dtype).pinned_memory(plan_.device.is_cuda());
  }
  at::Tensor to_device(const at::Tensor& host) const { return host.to(plan_.device, /*non_blocking=*/true); }

  // f(i, n) for the batches of this rank's windows (i counts from its first).
  template <typename F>
  void for_each_batch(F&& f) {
    for (int64_t i = 0; i < windows(); i += r_.batch_size) f(i, std::min(r_.batch_size, windows() - i));
  }

  // A block's linears, each with its solve's cost and its group: linears that read one input share their statistics
  // object, and with it the factorizations made from it, so they are solved together.
  struct SolveCosts {
    std::vector<double> cost;
    std::vector<int> group;
  };
  SolveCosts solve_costs(const std::vector<LayerJob>& jobs, const std::vector<std::string>& linears,
                         const BlockStats& stats) const {
    SolveCosts c{std::vector<double>(jobs.size(), 0.0), std::vector<int>(jobs.size())};
    std::map<const LayerStats*, int> group_of;
    for (size_t li = 0; li < jobs.size(); ++li) {
      c.group[li] = static_cast<int>(li);
      if (jobs[li].skip) continue;
      const at::Tensor W = m_.tensor(jobs[li].weight);
      c.cost[li] = static_cast<double>(W.size(1)) * static_cast<double>(W.size(1)) * static_cast<double>(W.size(0));
      if (plan_.needs_calibration)
        c.group[li] = group_of.emplace(&stats.at(linears[li]), static_cast<int>(li)).first->second;
    }
    return c;
  }

  // auto splits on GPUs only: its cost model comes from an H100's phases, where a part's meeting with the others
  // (tens of microseconds) is nothing beside a large linear's iteration. On a CPU the parts run the unfused iterates
  // and meet through Gloo on the cores that solve: splitting every linear over two processes took 1.6x as long
  // (docs/distributed.md); --dist-split all still splits there.
  SplitRule split_rule() const {
    return job_.dist_split == SplitRule::kAuto && !plan_.device.is_cuda() ? SplitRule::kOff : job_.dist_split;
  }

  // The plan's view of the block (rank_plan.h).
  SolveWork solve_work(const std::vector<LayerJob>& jobs, const SolveCosts& c) const {
    SolveWork w;
    w.group = c.group;
    for (const LayerJob& j : jobs) {
      const at::Tensor W = m_.tensor(j.weight);
      w.in.push_back(W.size(1));
      w.out.push_back(j.skip ? 0 : W.size(0));
      w.splits.push_back(!j.skip && plan_.needs_calibration && j.solver->splits_rows());
    }
    return w;
  }

  // The groups of ranks that solve one group of linears in parts, opened once for the run (the plan is the same for
  // blocks of the same shapes), one per group of linears so that concurrent solves on one rank never share one; in
  // the order of the linears on every rank.
  void open_part_groups(const SolveCosts& c, const std::vector<std::vector<int>>& ranks) {
    for (size_t li = 0; li < ranks.size(); ++li) {
      const std::vector<int>& rs = ranks[li];
      if (rs.size() < 2 || c.group[li] != static_cast<int>(li)) continue;  // whole, or not the group's first linear
      if (std::find(rs.begin(), rs.end(), group_.rank()) == rs.end()) continue;
      const auto key = part_group_key(c, ranks, li);
      auto& g = part_groups_[key];
      if (g == nullptr) g = group_.subgroup(key.second, key.first);
    }
  }

  // The name and the members (in rank order) of the group of ranks that solve linear li in parts.
  std::pair<std::string, std::vector<int>> part_group_key(const SolveCosts& c,
                                                          const std::vector<std::vector<int>>& ranks,
                                                          size_t li) const {
    std::vector<int> members = ranks[li];
    std::sort(members.begin(), members.end());
    return {"linear" + std::to_string(c.group[li]), std::move(members)};
  }

  // This rank's part of linear li when several ranks solve it (nullopt: solved whole, or by other ranks only).
  struct Part {
    int index = 0, parts = 1;
    dist::Group* members = nullptr;  // the ranks that solve the parts, in rank order
  };
  std::optional<Part> part_of(const SolveCosts& c, const std::vector<std::vector<int>>& ranks, size_t li) const {
    const std::vector<int>& rs = ranks[li];
    if (rs.size() < 2) return std::nullopt;
    const auto it = std::find(rs.begin(), rs.end(), group_.rank());
    if (it == rs.end()) return std::nullopt;
    return Part{static_cast<int>(it - rs.begin()), static_cast<int>(rs.size()),
                part_groups_.at(part_group_key(c, ranks, li)).get()};
  }

  // This rank's linears (or parts of them) split among plan_.solve_streams concurrent lists
  // (pipeline/solve_streams.h). Parts come first in each list, in block order: a part waits for the other ranks'
  // parts at every iteration, and every rank then reaches the parts of linears in one order.
  std::vector<std::vector<size_t>> solve_lists(const SolveCosts& c, const std::vector<std::vector<int>>& ranks) const {
    std::vector<size_t> mine;
    for (size_t li = 0; li < ranks.size(); ++li)
      if (std::find(ranks[li].begin(), ranks[li].end(), group_.rank()) != ranks[li].end()) mine.push_back(li);
    std::vector<double> cost;
    std::vector<int> group;
    for (size_t li : mine) {
      cost.push_back(c.cost[li] / static_cast<double>(ranks[li].size()));
      group.push_back(c.group[li]);
    }
    if (mine.empty()) return {};
    auto lists = split_among_streams(cost, group, static_cast<int>(plan_.solve_streams));
    for (auto& l : lists) {
      for (size_t& i : l) i = mine[i];
      std::stable_partition(l.begin(), l.end(), [&](size_t li) { return ranks[li].size() > 1; });
    }
    return lists;
  }

  // Every rank's statistics of the block's windows summed into the lowest rank that solves each group of linears, in
  // block order, and from it to the others that solve parts of them.
  void reduce_statistics(int64_t b, const std::vector<LayerJob>& jobs, const std::vector<std::string>& linears,
                         const SolveCosts& c, const std::vector<std::vector<int>>& ranks, BlockStats& stats) {
    const auto t0 = std::chrono::steady_clock::now();
    set_step(fmt::format("reducing the statistics of block {}/{}", b + 1, rep_.blocks_total));
    std::set<const LayerStats*> done;
    for (size_t li = 0; li < jobs.size(); ++li) {
      if (jobs[li].skip) continue;
      LayerStats& s = stats.at(linears[li]);
      if (!done.insert(&s).second) continue;
      s.reduce_to(group_, *std::min_element(ranks[li].begin(), ranks[li].end()), step());
      if (const auto part = part_of(c, ranks, li)) s.share_among(*part->members, step());
    }
    synchronize(plan_.device);
    rep_.phase_seconds["reduce_statistics"] += seconds_since(t0);
  }

  // The pruned weights to every rank (the next block's inputs need them all): each whole from its rank, each part
  // from the rank that solved it; and the reports, each linear's from the first rank that solved it.
  void share_solutions(int64_t b, const std::vector<LayerJob>& jobs, const std::vector<std::string>& linears,
                       const std::vector<std::vector<int>>& ranks, std::vector<report::LayerReport>& reports) {
    const auto t0 = std::chrono::steady_clock::now();
    set_step(fmt::format("sharing the pruned weights of block {}/{}", b + 1, rep_.blocks_total));
    const int me = group_.rank();
    for (size_t li = 0; li < jobs.size(); ++li) {
      if (jobs[li].skip) continue;
      const at::Tensor held = m_.tensor(jobs[li].weight);
      const std::vector<int>& rs = ranks[li];
      if (rs.size() == 1) {
        at::Tensor w = rs[0] == me ? held.contiguous() : at::empty_like(held);
        group_.broadcast(w, rs[0], step());
        if (rs[0] != me) m_.set_tensor(jobs[li].weight, w);
        continue;
      }
      at::Tensor w = at::empty(held.sizes(), held.options().device(at::kCPU));
      for (size_t j = 0; j < rs.size(); ++j) {
        const auto [first, end] = dist::share_of(held.size(0), static_cast<int>(j), static_cast<int>(rs.size()));
        at::Tensor rows = w.slice(0, first, end);  // contiguous: whole rows
        if (rs[j] == me) rows.copy_(part_rows_.at(jobs[li].weight));
        group_.broadcast(rows, rs[j], step());
      }
      m_.set_tensor(jobs[li].weight, w);
    }
    part_rows_.clear();
    json mine = json::object();
    for (size_t li = 0; li < jobs.size(); ++li)
      if (ranks[li][0] == me) mine[std::to_string(li)] = report::to_json(reports[li]);
    for (const auto& theirs : group_.all_gather(mine.dump(), step())) {
      const json owned = json::parse(theirs);
      for (const auto& [key, lr] : owned.items()) {
        const auto li = static_cast<size_t>(std::stoll(key));
        reports[li] = report::layer_from_json(lr);
        if (ranks[li][0] != me) log_layer(linears[li], reports[li]);  // rank 0's log lists every linear
      }
    }
    rep_.phase_seconds["broadcast_weights"] += seconds_since(t0);
  }

  void set_step(std::string what) {
    const std::lock_guard<std::mutex> lock(mutex_);
    step_ = std::move(what);
  }

  // The layer problem of one linear: its weight, and its statistics when the run collected them.
  prune::LayerProblem problem_for(const LayerJob& lj, const at::Tensor& W0, const LayerStats* s) const {
    prune::LayerProblem problem;
    // Uploaded in the checkpoint's dtype and converted where it lands: a conversion on the way converts on the host
    // and moves twice the bytes of an fp16 weight.
    problem.W0 = W0.to(plan_.device).to(at::kFloat);
    problem.name = lj.name;
    if (s == nullptr) return problem;
    problem.G = s->gram().to(plan_.device, at::kFloat);
    problem.mean = s->mean().to(plan_.device);
    problem.tokens = s->tokens();
    problem.sequences = r_.nsamples;
    problem.sequence_mean_sq = s->sequence_mean_sq().to(plan_.device);
    problem.gram_checked = locked(mutex_, [&] { return checked_grams_.count(s) > 0; });
    problem.shared = s->shared_factors();
    return problem;
  }

  report::LayerReport prune_layer(int64_t b, const LayerJob& lj, const std::string& linear, const BlockStats& stats,
                                  const std::optional<Part>& part) {
    report::LayerReport lr;
    lr.block = b;
    lr.name = lj.name;
    const at::Tensor W0 = locked(mutex_, [&] { return m_.tensor(lj.weight); });
    lr.shape = W0.sizes().vec();
    if (lj.skip) {
      lr.skipped = true;
      log_layer(linear, lr);
      return lr;
    }
    const LayerStats* s = plan_.needs_calibration ? &stats.at(linear) : nullptr;
    const auto p0 = std::chrono::steady_clock::now();
    if (!job_.dump_problems.empty() && (!part || part->index == 0))  // the whole layer's problem, once
      prune::save_problem(job_.dump_problems / (lj.name + ".safetensors"), problem_for(lj, W0, s),
                          job_.resume ? io::ExistingFile::kReplace : io::ExistingFile::kKeep);
    const auto [first, end] = part ? dist::share_of(W0.size(0), part->index, part->parts)
                                   : std::pair<int64_t, int64_t>{0, W0.size(0)};
    prune::LayerProblem problem = problem_for(lj, W0.slice(0, first, end), s);
    if (part) {
      // This rank's rows; the whole layer's sums through the ranks that solve the others.
      auto split = std::make_shared<prune::RowSplit>();
      split->part = part->index;
      split->parts = part->parts;
      split->total_rows = W0.size(0);
      const std::string what = fmt::format("solving block {}/{} {} in {} parts", b + 1, rep_.blocks_total, linear,
                                           part->parts);
      split->sum = [members = part->members, what](at::Tensor& t) { members->all_reduce_sum(t, what); };
      problem.split = std::move(split);
    }
    const double problem_seconds = seconds_since(p0);

    const prune::Pattern& pattern = *lj.pattern;
    set_step(fmt::format("solving block {}/{} {} ({}x{})", b + 1, rep_.blocks_total, linear, W0.size(0), W0.size(1)));
    try {
      prune::PcgOptions pcg;
      pcg.iterations = r_.refine_iterations;
      const auto s0 = std::chrono::steady_clock::now();
      const prune::LayerResult res =
          s != nullptr ? prune::solve_layer(*lj.solver, problem, pattern, lj.refine, pcg)
                       : prune::solve_layer_without_statistics(*lj.solver, problem, pattern);
      const double solve_layer_seconds = seconds_since(s0);
      if (s != nullptr) locked(mutex_, [&] { checked_grams_.insert(s); });
      lr.seconds = res.seconds;
      lr.rel_error = res.rel_error;
      lr.refine_seconds = res.refine_seconds;
      lr.rel_error_refined = res.rel_error_refined;
      lr.sparsity = res.sparsity;
      lr.stats = res.solution.stats;
      if (part) lr.stats["parts"] = part->parts;
      const auto w0 = std::chrono::steady_clock::now();
      // A part's rows wait for share_solutions, which puts the parts together.
      locked(mutex_, [&] {
        if (part)
          part_rows_[lj.weight] = res.W;
        else
          m_.set_tensor(lj.weight, res.W);
      });
      spdlog::debug("{}: problem {:.3f} s, solve_layer {:.3f} s (method {:.3f} s), weight to the host {:.3f} s",
                    lj.name, problem_seconds, solve_layer_seconds, res.seconds, seconds_since(w0));
    } catch (const Error& e) {
      ALPS_FAIL("block ", b + 1, "/", rep_.blocks_total, " ", lj.name, ": ", e.what());
    }
    lr.method = lj.method;
    lr.pattern = pattern.str();
    lr.refine = prune::refine_name(lj.refine);
    if (!part || part->index == 0) log_layer(linear, lr);  // the first part speaks for the linear
    return lr;
  }

  void log_layer(const std::string& linear, const report::LayerReport& lr) const {
    if (lr.skipped) {
      spdlog::info("block {}/{} {}: skipped (left dense)", lr.block + 1, rep_.blocks_total, linear);
      return;
    }
    spdlog::info("block {}/{} {}: {} {} sparsity {:.3f}{}{} ({:.2f}s{})", lr.block + 1, rep_.blocks_total, linear,
                 lr.method, lr.pattern, lr.sparsity, lr.rel_error ? fmt::format(" err {:.4e}", *lr.rel_error) : "",
                 lr.rel_error_refined ? fmt::format(" -> {:.4e} after {}", *lr.rel_error_refined, lr.refine) : "",
                 lr.seconds, lr.stats.empty() ? "" : ", " + prune::stats_text(lr.stats));
  }

  const PruneJob& job_;
  const Recipe& r_;
  model::CausalLM& m_;
  const tokenizer::Tokenizer& tok_;
  const RunPlan& plan_;
  StateWriter& writer_;
  dist::Group& group_;
  std::pair<int64_t, int64_t> share_;  // the windows [first, second) this rank holds
  std::set<const LayerStats*> checked_grams_;  // this block's statistics whose G passed check_gram
  // The groups of ranks that solve a group of linears in parts, by (name, members); open for the whole run.
  std::map<std::pair<std::string, std::vector<int>>, std::unique_ptr<dist::Group>> part_groups_;
  std::map<std::string, at::Tensor> part_rows_;  // this block's parts solved here, by weight, until shared
  report::RunReport rep_;
  json key_;
  at::Tensor inputs_;  // [nsamples, seqlen, hidden] on the host, compute dtype: the next block's inputs
  std::vector<double> block_sparsity_;  // per block, from a sparsity profile (empty: the recipe's patterns)
  std::vector<int64_t> block_kept_;  // per block, OWL's mixed N:M variant: entries kept of every M
  std::map<std::string, int64_t> profile_zeros_;  // per weight following the profile: its zeros
  std::string step_;
  // Concurrent solves (--solve-streams) share step_, checked_grams_ and the model's tensor table.
  mutable std::mutex mutex_;
  int64_t next_block_ = 0;
};

// A rank of a distributed run computes on its own GPU: --device auto or cuda means cuda:LOCAL_RANK there.
std::string rank_device(const std::string& device, const dist::Launch& launch) {
  if (!launch.launched()) return device;
  if (device == "cuda" || (device == "auto" && resolve_device("auto").is_cuda()))
    return "cuda:" + std::to_string(launch.local_rank);
  return device;
}

// Where the calibration text is, when the run reads one; empty otherwise.
fs::path calibration_source(const PruneJob& job, const RunPlan& plan) {
  return plan.needs_calibration ? resolve_calibration_source(job.recipe.calib, job.data_dir) : fs::path();
}

// Resuming trusts the saved state only for the same recipe, model files and calibration text.
ResumeState load_resume_state(const PruneJob& job, const RunPlan& plan, const StateDir& dir, bool tidy) {
  ResumeState s = dir.load(tidy);
  fs::path calibration;
  try {
    calibration = calibration_source(job, plan);
  } catch (const Error&) {
    spdlog::warn("calibration source '{}' cannot be found any more; resuming from the saved block inputs",
                 job.recipe.calib);
  }
  json now = resume_key(job.recipe, job.model_dir, calibration);
  if (calibration.empty() && plan.needs_calibration) now["calibration"] = s.key.value("calibration", json());
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
  std::vector<std::string> written = m.write_files(staging);
  note_pruning_in_model_card(staging, rep);
  if (std::find(written.begin(), written.end(), kModelCardFile) == written.end()) written.push_back(kModelCardFile);
  for (const auto& name : written)
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
[[noreturn]] void fail_out_of_memory(const c10::Error& e, const PruneJob& job, const RunPlan& plan,
                                     const std::string& step, int64_t blocks_done) {
  std::string what = e.what();
  what = what.substr(0, what.find('\n'));
  const auto& r = job.recipe;
  ALPS_FAIL("out of memory on device ", r.device, " while ", step, ": ", what, "\nto fit, lower --batch-size (now ",
            r.batch_size, ")", plan.solve_streams > 1 ? ", solve one linear at a time (--solve-streams 1)" : "",
            plan.stats_on_host ? "" : ", add --stats-device cpu",
            plan.dtype == c10::kFloat ? ", or use --dtype bf16" : "", ", or choose another --device; ",
            blocks_done > 0 ? "the " + std::to_string(blocks_done) +
                                  " finished block(s) are saved: rerun with --resume (any device, any batch size)"
                            : "nothing was pruned yet");
}

// What Ctrl-C or SIGTERM leaves behind at this point of the run, said when it arrives.
void say_on_interrupt(int64_t blocks_saved, int64_t blocks_total) {
  set_interrupt_notice(
      blocks_saved == 0
          ? fmt::format("alps: interrupted before block 1/{} was pruned; the same command with --resume starts it "
                        "again", blocks_total)
      : blocks_saved < blocks_total
          ? fmt::format("alps: interrupted after block {}/{}; the same command with --resume continues", blocks_saved,
                        blocks_total)
          : fmt::format("alps: interrupted after the last block ({}/{}), before the checkpoint was written; the same "
                        "command with --resume evaluates and writes it", blocks_saved, blocks_total));
}

// f() on every rank; when it failed on some rank, every rank stops: the failed ones with their own error, the others
// with one naming the first that failed.
template <typename F>
auto on_every_rank(dist::Group& group, const std::string& what, F&& f) -> decltype(f()) {
  std::string failed;
  std::exception_ptr error;
  using R = decltype(f());
  std::optional<std::conditional_t<std::is_void_v<R>, bool, R>> result;
  try {
    if constexpr (std::is_void_v<R>) {
      f();
      result = true;
    } else {
      result.emplace(f());
    }
  } catch (const std::exception& e) {
    failed = e.what();
    error = std::current_exception();
  }
  if (group.size() > 1) group.agree(failed, what);
  if (error) std::rethrow_exception(error);
  if constexpr (!std::is_void_v<R>) return std::move(*result);
}

report::RunReport run_prune_on(const PruneJob& job, const dist::Launch& launch, dist::Group& group) {
  const bool first = group.rank() == 0;  // rank 0 alone writes the checkpoint, the report and the state's files
  auto m = model::CausalLM::load(job.model_dir);
  const auto tok = tokenizer::load_tokenizer(job.model_dir);
  std::unique_ptr<RunPlan> plan;
  on_every_rank(group, "checking the job", [&] {
    plan = validate_with(job, m, *tok, first);
    ALPS_USAGE_CHECK(!plan->needs_calibration || job.recipe.nsamples >= group.size(), "--nsamples ",
                     job.recipe.nsamples, " calibration windows cannot be shared among ", group.size(),
                     " ranks (WORLD_SIZE): give at least one window per rank");
  });
  PruneJob resolved = job;
  resolved.recipe = resolved_recipe(job.recipe, *plan);
  if (job.recipe.seqlen == 0 && plan->needs_calibration && plan->seqlen < model::ModelConfig::kProtocolWindow)
    spdlog::info("calibration windows of {} tokens, the model's {} positions (--seqlen sets another length)",
                 plan->seqlen, m.config().max_positions);
  std::unique_ptr<OutputDir> out;
  bool resume = false;
  on_every_rank(group, "opening the output directory", [&] {
    if (first) {
      out = std::make_unique<OutputDir>(output_request(resolved));
      resume = out->resume();
      if (!resolved.dump_problems.empty()) fs::create_directories(resolved.dump_problems);
    }
  });
  // Rank 0's decision; the others write their shards of the state into the directory it made.
  resume = group.all_gather(resume ? "resume" : "fresh", "opening the output directory").front() == "resume";
  const fs::path out_path = normalize_output_path(resolved.out_dir);
  on_every_rank(group, "finding the output directory", [&] {
    ALPS_CHECK(fs::is_directory(out_path), "the output directory ", out_path.string(), " that rank 0 made is not "
               "there on rank ", group.rank(), "'s host: a distributed run needs --out on a file system every rank "
               "sees");
  });
  StateDir state(out_path / kStateDir);
  if (group.size() > 1) {
    StateSharing sharing;
    sharing.rank = group.rank();
    sharing.shard = static_cast<size_t>(group.rank());
    auto key = [](int64_t next_block, int r) { return fmt::format("inputs/{}/{}", next_block, r); };
    sharing.shard_written = [&group, key](int64_t next_block) { group.publish(key(next_block, group.rank())); };
    sharing.await_shards = [&group, key](int64_t next_block) {
      std::vector<std::string> keys;
      for (int r = 1; r < group.size(); ++r) keys.push_back(key(next_block, r));
      group.wait_for(keys, fmt::format("waiting for the ranks' shards of the inputs of block {}", next_block + 1));
    };
    state.share(std::move(sharing));
  }
  StateWriter writer(state);  // outlives the run: a save in flight finishes before the run's error propagates
  PruneRun run(resolved, m, *tok, *plan, writer, group);
  report::RunReport& rep = run.report();
  if (launch.launched())
    rep.extra["distributed"] = {{"world_size", group.size()},
                                {"backend", group.backend()},
                                {"launcher", launch.launcher},
                                {"ranks", group.places()}};
  reset_device_peak(run.device());
  if (first) {
    say_on_interrupt(0, rep.blocks_total);
    state.on_saved([total = rep.blocks_total](int64_t next_block) { say_on_interrupt(next_block, total); });
  }
  try {
    if (resolved.eval_dense && first) run.evaluate_dense();  // before a resumed run puts its pruned blocks in
    if (resume) {
      run.restore(state, on_every_rank(group, "reading the resume state",
                                       [&] { return load_resume_state(resolved, *plan, state, first); }));
      if (first) say_on_interrupt(run.next_block(), rep.blocks_total);  // what the resumed run restored
    } else {
      const fs::path source = calibration_source(resolved, *plan);
      const json key = resume_key(resolved.recipe, resolved.model_dir, source);
      if (plan->needs_calibration)
        run.capture_inputs(source, key);
      else
        run.without_inputs(key);
      if (plan->owl) run.allocate_owl();
      // The fresh state directory exists before any rank writes its shard into it.
      on_every_rank(group, "starting the resume state", [&] {
        if (first) out->begin_fresh_state();
      });
      run.save_state({});  // once written, --resume can continue even before block 1 ends
    }

    Progress progress("block", rep.blocks_total, 0, run.next_block());
    for (int64_t done = 0; run.next_block() < rep.blocks_total; ++done) {
      if (resolved.stop_after >= 0 && done >= resolved.stop_after) break;
      run.save_state(run.prune_next_block());
      progress.step(run.next_block(), fmt::format("({} linears)", m.linear_names().size()));
    }
    run.finish_saving();
    rep.extra["state_writes_seconds"] = writer.seconds_writing();  // on the writer's thread, beside the blocks
    if (group.size() > 1)
      rep.extra["distributed"]["bytes_per_block"] = {
          {"reduce", group.bytes_reduced() / std::max<int64_t>(1, rep.blocks_done)},
          {"broadcast", group.bytes_broadcast() / std::max<int64_t>(1, rep.blocks_done)},
          {"within_parts", run.part_bytes() / std::max<int64_t>(1, rep.blocks_done)}};
    record_peak_memory(rep.extra, run.device());
    if (rep.blocks_done < rep.blocks_total) {
      set_interrupt_notice("");
      spdlog::warn("stopped after block {}/{}; run the same command with --resume to continue", rep.blocks_done,
                   rep.blocks_total);
      return rep;
    }
    if (!first) return rep;  // the evaluation and the checkpoint are rank 0's
    try {
      run.evaluate();
    } catch (const Error& e) {
      ALPS_FAIL(e.what(), "\nevery block is pruned and saved: the same command with --resume continues from here (with "
                "another --eval, or none, to write the checkpoint)");
    }
  } catch (const c10::Error& e) {
    if (!is_device_out_of_memory(e)) throw;
    fail_out_of_memory(e, resolved, *plan, run.step(), rep.blocks_done);
  }
  write_output(*out, m, rep);
  set_interrupt_notice("");
  return rep;
}

}  // namespace

report::RunReport run_prune(const PruneJob& given) {
  const dist::Launch launch = dist::launch_from_environment(dist::process_environment());
  dist::log_as_rank(launch);
  PruneJob job = given;
  job.recipe.device = rank_device(given.recipe.device, launch);
  // The ranks meet before anything else, so that an error on one (a bad flag, a busy output) stops all of them.
  const std::unique_ptr<dist::Group> group =
      launch.launched() ? dist::join(launch, resolve_device(job.recipe.device), given.dist) : dist::single_process();
  try {
    return run_prune_on(job, launch, *group);
  } catch (const std::exception& e) {
    group->announce_failure(e.what());
    throw;
  }
}

}  // namespace alps::pipeline
