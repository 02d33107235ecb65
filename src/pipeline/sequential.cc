#include "alps/pipeline/sequential.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "alps/core/build_info.h"
#include "alps/core/device.h"
#include "alps/core/device_memory.h"
#include "alps/core/error.h"
#include "alps/core/interrupt.h"
#include "alps/core/log.h"
#include "alps/core/strings.h"
#include "alps/dist/group.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/activations.h"
#include "alps/pipeline/calibration.h"
#include "alps/pipeline/exchange.h"
#include "alps/pipeline/expert_removal.h"
#include "alps/pipeline/linear_solve.h"
#include "alps/pipeline/memory_estimate.h"
#include "alps/pipeline/output_dir.h"
#include "alps/pipeline/resume_state.h"
#include "alps/pipeline/run_plan.h"
#include "alps/pipeline/run_state.h"
#include "alps/pipeline/schedule.h"
#include "alps/pipeline/sparsity_profile.h"
#include "alps/pipeline/state_writer.h"
#include "alps/pipeline/unit_removal.h"
#include "alps/tokenizer/tokenizer.h"
#include "job_checks.h"
#include "run_end.h"

namespace alps::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A block's state file holds each reordered linear's Outcome::input_order under its weight's name and this suffix.
constexpr std::string_view kOrderSuffix = ".input_order";
bool is_order_entry(const std::string& name) { return ends_with(name, kOrderSuffix); }

// One rank's run: the model, its calibration windows and the run's state as blocks are pruned one after another.
class PruneRun {
 public:
  /// `job.recipe` is the resolved one (resolved_recipe).
  PruneRun(const PruneJob& job, model::CausalLM& m, const tokenizer::Tokenizer& tok, const RunPlan& plan,
           Exchange& exchange, StateDir& dir, RunState& state)
      : job_(job), r_(job.recipe), m_(m), tok_(tok), plan_(plan), exchange_(exchange), dir_(dir), state_(state),
        writer_(dir),
        activations_(m, plan, exchange.windows(plan.needs_calibration ? r_.nsamples : 0), r_.batch_size,
                     state_.phases),
        profile_(plan, m, r_.pattern ? &*r_.pattern : nullptr),
        settings_{plan.device, m.num_blocks(), r_.refine_iterations, job.dump_problems, job.resume},
        world_(exchange.world(static_cast<int>(plan.solve_streams), plan.split_rule)) {
    m_.set_compute(plan_.device, plan_.dtype);
    state_.blocks_total = m_.num_blocks();
  }

  RunState& state() { return state_; }
  const RunState& state() const { return state_; }
  const SparsityProfile& profile() const { return profile_; }
  int64_t windows() const { return activations_.windows(); }
  double seconds_writing() const { return writer_.seconds_writing(); }

  // A fresh run: block 0's inputs, the sparsity profile, and a first resume state, from which --resume can continue
  // even before block 1 ends. `begin_state` makes the state directory fresh once the inputs are ready.
  template <typename BeginState>
  void start(BeginState&& begin_state) {
    const fs::path source = calibration_source(job_, plan_);
    state_.key = resume_key(r_, job_.model_dir, source, plan_.pruned_routers);
    if (plan_.needs_calibration) {
      capture(source);
    } else {
      state_.calibration = {{"windows", 0}, {"why", "no method of this run reads calibration data"}};
      spdlog::info("calibration: none (no method of this run reads calibration data)");
    }
    if (plan_.owl) profile_.measure(m_, activations_, r_.nsamples, exchange_, state_.phases);
    begin_state();
    save({});
  }

  // Where an interrupted run stopped: its finished blocks' weights, state and the next block's inputs.
  void restore(const ResumeState& s) {
    state_.key = s.key;
    state_.next_block = s.next_block;
    for (const auto& l : s.layers) state_.layers.push_back(report::layer_from_json(l));
    state_.phases.restore(s.phase_seconds);
    state_.calibration = s.calibration;
    state_.units = s.units;
    state_.legs = s.legs;
    profile_.restore(s.sparsity_profile);
    replay_expert_removal(m_, state_.units);  // the saved blocks hold the kept experts under their new names
    if (exchange_.writes_output())  // the others never read finished blocks (Exchange::retire)
      for (int64_t b = 0; b < s.next_block; ++b)
        for (const auto& [name, w] : dir_.load_block(b)) {
          if (is_order_entry(name))
            state_.input_orders[name.substr(0, name.size() - kOrderSuffix.size())] = w;
          else if (plan_.unit_steps.empty())
            m_.set_tensor(name, w);
          else  // structured steps left these blocks smaller
            m_.reshape_tensor(name, w);
        }
    activations_.restore([&](int64_t first, int64_t end) { return dir_.load_inputs(s, first, end); });
    if (!state_.finished())
      spdlog::info("resuming at {}", state_.block_name(s.next_block));
    else
      spdlog::info("resuming after the last block ({}/{} pruned): evaluation and output left", s.next_block,
                   state_.blocks_total);
  }

  // The paper's sequential procedure from the next block on: each block's statistics over the windows as the
  // pruned blocks before it left them, every linear solved on them, and the windows through the pruned block.
  void prune_blocks() {
    // This process's leg of the run, beside those before it when it resumes one.
    state_.legs.push_back({{"first_block", state_.next_block},
                           {"end_block", state_.next_block},
                           {"world_size", world_.size},
                           {"device", plan_.device.str()},
                           {"alps", build_info().alps_version},
                           {"source_revision", build_info().source_revision}});
    Progress progress("block", state_.blocks_total, 0, state_.next_block);
    for (int64_t done = 0; !state_.finished() && (job_.stop_after < 0 || done < job_.stop_after); ++done) {
      const int64_t b = state_.next_block;
      const std::string block = state_.block_name(b);
      m_.load_block(b);
      // Experts go first, so that the statistics are those of the kept experts under the router that remains.
      const model::KeptExperts experts =
          remove_experts(b, plan_, m_, activations_, exchange_, state_.phases, state_.units);
      const std::vector<LayerJob> jobs = renamed_jobs(profile_.jobs(b), experts.renamed);
      // A run that removes experts and nothing else reads no statistics.
      const bool read = !plan_.expert_score ||
                        std::any_of(plan_.unit_steps.begin(), plan_.unit_steps.end(),
                                    [](const UnitStep& u) { return u.structure != model::Structure::experts; }) ||
                        std::any_of(jobs.begin(), jobs.end(), [](const LayerJob& j) { return j.needs_statistics(); });
      BlockStats stats = read ? activations_.observe(b) : BlockStats(plan_.stats_device, plan_.stats_dtype);
      std::vector<std::string> reshaped = remove_units(b, plan_, m_, stats, exchange_, state_.phases, state_.units);
      if (!experts.router.empty()) reshaped.push_back(experts.router);  // with the kept experts' rows
      const std::vector<std::string> linears = plan_.linears(m_, b);
      const std::vector<LayerStats*> inputs = stats.inputs(linears);
      const Schedule schedule = schedule_block(block_work(jobs, m_, inputs), world_);
      exchange_.reduce(schedule, inputs, block);
      std::vector<Outcome> outcomes = solve_block(
          b, schedule, jobs, linears, inputs, m_,
          [&](size_t li, int64_t rows, const std::string& what) { return exchange_.split(schedule, li, rows, what); },
          settings_, state_.phases);
      stats.clear();
      exchange_.share(schedule, outcomes, m_, block);
      writer_wait();  // the pruned pass overwrites the inputs being saved
      activations_.forward(b);
      m_.unload_block(b);
      save(finish_block(b, outcomes, reshaped));
      progress.step(state_.next_block, fmt::format("({} linears)", jobs.size()));
    }
  }

  // Waits for the save in flight (before the inputs change, and at the end of the run).
  void writer_wait() { state_.phases.add("save_state", writer_.wait()); }

 private:
  // Block 0's inputs: the embedded calibration windows, every rank drawing all of them (the same draw whatever the
  // world size) and embedding its share.
  void capture(const fs::path& source) {
    const auto phase = state_.phases.enter("calibration", "drawing the calibration windows");
    const at::Tensor ids =
        sample_windows(read_documents(source), tok_, {source.string(), r_.nsamples, r_.seqlen, r_.seed});
    state_.calibration = {{"file", source.string()},
                          {"windows", r_.nsamples},
                          {"seqlen", r_.seqlen},
                          {"seed", r_.seed},
                          {"fingerprint", state_.key.at("calibration").value("file", json())}};
    spdlog::info("calibration: {} windows of {} tokens from {}", r_.nsamples, r_.seqlen, source.string());
    state_.phases.set_step("embedding the calibration windows");
    activations_.embed(ids);
  }

  // Block b is done: its reports join the run's, and ranks that write no output drop its weights; returns them (the
  // solved ones and those its structured steps `reshaped`).
  std::vector<std::pair<std::string, at::Tensor>> finish_block(int64_t b, std::vector<Outcome>& outcomes,
                                                               const std::vector<std::string>& reshaped) {
    std::vector<std::pair<std::string, at::Tensor>> pruned;
    std::set<std::string> names;
    std::vector<std::pair<std::string, at::Tensor>> orders;
    for (Outcome& o : outcomes) {
      if (!o.report.skipped && names.insert(o.weight).second) pruned.emplace_back(o.weight, m_.tensor(o.weight));
      if (o.input_order.defined()) {
        state_.input_orders[o.weight] = o.input_order;
        orders.emplace_back(o.weight + std::string(kOrderSuffix), o.input_order);
      }
      state_.layers.push_back(std::move(o.report));
    }
    for (const std::string& name : reshaped)
      if (names.insert(name).second) pruned.emplace_back(name, m_.tensor(name));
    state_.next_block = b + 1;
    exchange_.retire(m_, pruned);
    pruned.insert(pruned.end(), orders.begin(), orders.end());  // the block's file keeps them for a resumed run
    return pruned;
  }

  // Saves the state reached so far on the writer's thread: the next block's statistics and solves run meanwhile.
  void save(std::vector<std::pair<std::string, at::Tensor>> pruned) {
    writer_wait();
    ResumeState s;
    s.key = state_.key;
    s.next_block = state_.next_block;
    for (const auto& l : state_.layers) s.layers.push_back(report::to_json(l));
    s.phase_seconds = state_.phases.seconds();
    s.calibration = state_.calibration;
    s.units = state_.units;
    if (!state_.legs.empty()) state_.legs.back()["end_block"] = state_.next_block;
    s.legs = state_.legs;
    s.sparsity_profile = profile_.to_json();
    s.input_shards = exchange_.input_shards(r_.nsamples);
    // After the last block nothing reads its outputs (the evaluation runs the whole model on its own windows): the
    // state keeps none, a block's activations less to write and to wait for.
    writer_.start(std::move(s), std::move(pruned), state_.finished() ? at::Tensor() : activations_.host());
  }

  const PruneJob& job_;
  const Recipe& r_;
  model::CausalLM& m_;
  const tokenizer::Tokenizer& tok_;
  const RunPlan& plan_;
  Exchange& exchange_;
  StateDir& dir_;
  RunState& state_;
  StateWriter writer_;  // a save in flight finishes before the run's error propagates
  Activations activations_;
  SparsityProfile profile_;
  SolveSettings settings_;
  World world_;
};

// The run's report: what was asked, what each block's linears became, and where the time and memory went.
report::RunReport report_of(const PruneJob& job, const PruneRun& run, const json& memory,
                            const json& distributed) {
  report::RunReport rep;
  rep.recipe = recipe_to_json(job.recipe);
  rep.model = job.model_dir.string();
  rep.output = normalize_output_path(job.out_dir).string();
  run.state().write_into(rep);
  rep.extra["memory_estimate"] = memory;
  if (!run.profile().to_json().is_null()) rep.extra["sparsity_profile"] = run.profile().to_json();
  if (!distributed.is_null()) rep.extra["distributed"] = distributed;
  rep.extra["state_writes_seconds"] = run.seconds_writing();  // on the writer's thread, beside the blocks
  return rep;
}

// The output directory opened by rank 0, and whether the run resumes (rank 0's decision, on every rank); every rank
// must see the directory: the others write their shards of the state into it.
std::unique_ptr<OutputDir> open_output(const PruneJob& job, Exchange& exchange, bool& resume) {
  std::unique_ptr<OutputDir> out;
  exchange.on_every_rank("opening the output directory", [&] {
    if (!exchange.writes_output()) return;
    out = std::make_unique<OutputDir>(output_request(job));
    if (!job.dump_problems.empty()) fs::create_directories(job.dump_problems);
  });
  resume = exchange.rank0_says(out != nullptr && out->resume(), "opening the output directory");
  const fs::path out_path = normalize_output_path(job.out_dir);
  exchange.on_every_rank("finding the output directory", [&] {
    ALPS_CHECK(fs::is_directory(out_path), "the output directory ", out_path.string(), " that rank 0 made is not "
               "there on rank ", exchange.rank(), "'s host: a distributed run needs --out on "
               "a file system every rank sees");
  });
  return out;
}

// The run from its inputs to its last block (or --stop-after's), resumed or fresh.
void prune(PruneRun& run, const PruneJob& job, const RunPlan& plan, Exchange& exchange, StateDir& dir,
           OutputDir* out, bool resume) {
  RunState& state = run.state();
  if (resume) {
    run.restore(exchange.on_every_rank("reading the resume state", [&] {
      return load_resume_state(job, plan, dir, exchange.writes_output());
    }));
    if (out != nullptr) say_on_interrupt(state.next_block, state.blocks_total);  // what the resumed run restored
  } else {
    // The fresh state directory exists before any rank writes its shard into it.
    run.start([&] {
      exchange.on_every_rank("starting the resume state", [&] {
        if (out != nullptr) out->begin_fresh_state();
      });
    });
  }
  run.prune_blocks();
  run.writer_wait();
}

// Every rank's plan, checked before any work: an error on one stops them all.
std::unique_ptr<RunPlan> checked_plan(const PruneJob& job, const model::CausalLM& m, const tokenizer::Tokenizer& tok,
                                      dist::Group& group) {
  return on_every_rank(group, "checking the job", [&] {
    auto plan = validate_with(job, m, tok, /*first=*/group.rank() == 0);
    for (int64_t b = 0; b < plan->num_blocks() && group.size() > 1; ++b)
      for (const LayerJob& j : plan->block(b))
        ALPS_USAGE_CHECK(j.skip || !j.solver->reorders_inputs(), "--option permutation (", j.name, "): ", j.method,
                         "'s channel permutation runs in one process; drop --nproc (or start one rank)");
    ALPS_USAGE_CHECK(!plan->needs_calibration || job.recipe.nsamples >= group.size(), "--nsamples ",
                     job.recipe.nsamples, " calibration windows cannot be shared among ", group.size(),
                     " ranks (WORLD_SIZE): give at least one window per rank");
    return plan;
  });
}

// Running out of GPU memory is for the user to fix (fail_out_of_memory): f(), said so when it happens.
template <typename F>
void out_of_memory_said(const PruneJob& job, const RunPlan& plan, const RunState& state, F&& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    if (!is_device_out_of_memory(e)) throw;
    fail_out_of_memory(e, job, plan, state.phases.step(), state.next_block);
  }
}

report::RunReport run_prune_on(const PruneJob& given, const dist::Launch& launch, dist::Group& group) {
  auto m = model::CausalLM::load(given.model_dir);
  const auto tok = tokenizer::load_tokenizer(given.model_dir);
  const std::unique_ptr<RunPlan> plan = checked_plan(given, m, *tok, group);
  PruneJob job = given;
  job.recipe = resolved_recipe(given.recipe, *plan);
  RunState state;
  Exchange exchange(group, plan->device, state.phases);
  exchange.agree_on_job([&] { return job_key(job, *plan); });
  bool resume = false;
  const std::unique_ptr<OutputDir> out = open_output(job, exchange, resume);
  StateDir dir(normalize_output_path(job.out_dir) / kStateDir);
  exchange.share_state(dir);
  const int64_t parameters_before = m.num_parameters();
  PruneRun run(job, m, *tok, *plan, exchange, dir, state);
  const json memory = memory_estimate(m, *plan, run.windows(), job.recipe.batch_size);
  log_memory_estimate(memory, plan->device);
  reset_device_peak(plan->device);
  if (out != nullptr) {
    say_on_interrupt(0, state.blocks_total);
    dir.on_saved([total = state.blocks_total](int64_t next_block) { say_on_interrupt(next_block, total); });
  }
  std::optional<DenseEvaluation> dense;
  out_of_memory_said(job, *plan, state, [&] {
    if (job.eval_dense && out != nullptr)  // before a resumed run puts its pruned blocks in
      dense = evaluate_input_model(job, *plan, m, *tok, state.phases);
    prune(run, job, *plan, exchange, dir, out.get(), resume);
  });
  report::RunReport rep = report_of(job, run, memory, exchange.describe(launch, state.next_block));
  if (!plan->unit_steps.empty())
    describe_unit_steps(*plan, job.recipe.structured_options, parameters_before, m.num_parameters(),
                        m.weight_file_bytes(), rep.extra["structured"]);
  record_peak_memory(rep.extra, plan->device);
  add_dense_evaluation(rep, dense);
  if (!state.finished()) {
    set_interrupt_notice("");
    spdlog::warn("stopped after block {}/{}; run the same command with --resume to continue", state.next_block,
                 state.blocks_total);
    return rep;
  }
  if (out == nullptr) return rep;  // the evaluation and the checkpoint are rank 0's
  out_of_memory_said(job, *plan, state, [&] { evaluate_pruned(job, *plan, m, *tok, state.phases, rep); });
  write_output(*out, m, state.input_orders, rep);
  set_interrupt_notice("");
  return rep;
}

}  // namespace

report::RunReport run_prune(const PruneJob& given, const dist::Launch& launch) {
  PruneJob job = given;
  job.recipe.device = rank_device(given.recipe.device, launch);
  // The ranks meet before anything else, so that an error on one (a bad flag, a busy output) stops all of them.
  const std::unique_ptr<dist::Group> group =
      launch.launched() ? dist::join(launch, resolve_device(job.recipe.device), group_options(job.recipe))
                        : dist::single_process();
  try {
    return run_prune_on(job, launch, *group);
  } catch (const std::exception& e) {
    group->announce_failure(e.what());
    throw;
  }
}

}  // namespace alps::pipeline
