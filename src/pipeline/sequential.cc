#include "alps/pipeline/sequential.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <map>
#include <memory>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/eval/datasets.h"
#include "alps/eval/evaluate.h"
#include "alps/io/safetensors.h"
#include "alps/io/staged_path.h"
#include "alps/io/text_files.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/calibration.h"
#include "alps/pipeline/layer_stats.h"
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

constexpr int kStateFormat = 1;

std::string strip_weight(const std::string& name) {
  const std::string suffix = ".weight";
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0
             ? name.substr(0, name.size() - suffix.size())
             : name;
}

fs::path state_dir(const PruneJob& job) { return job.out_dir / kStateDir; }
fs::path block_file(const PruneJob& job, int64_t b) {
  return state_dir(job) / fmt::format("block-{:05d}.safetensors", b);
}

// What must match between an interrupted run and its continuation for the result to be the same.
json resume_key(const PruneJob& job) {
  json r = recipe_to_json(job.recipe);
  r.erase("eval");  // evaluation happens after pruning and does not change the weights
  r.erase("eval_seqlen");
  return {{"format", kStateFormat}, {"model", fs::absolute(job.model_dir).lexically_normal().string()}, {"recipe", r}};
}

void write_text_staged(const fs::path& path, const std::string& text) {
  io::StagedPath staged(path);
  {
    std::ofstream out(staged.temp());
    out << text;
    ALPS_CHECK(out.good(), "write error on ", staged.temp().string());
  }
  staged.commit();
}

bool has_state(const PruneJob& job) { return fs::is_regular_file(state_dir(job) / "state.json"); }

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

// Host and device memory the run needs, printed before starting so a user can stop a run that cannot fit.
json memory_estimate(const model::CausalLM& m, const Recipe& r, c10::ScalarType dtype) {
  const auto& cfg = m.config();
  const int64_t act = element_bytes(dtype);
  const int64_t activations = 2 * r.nsamples * r.seqlen * cfg.hidden_size * act;  // inputs and outputs of a block
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
  const int64_t batch = r.batch_size * r.seqlen * std::max(cfg.hidden_size, cfg.intermediate_size) * act * 4;
  return {{"host_activations_gib", gib(activations)},
          {"device_block_weights_gib", gib(block_weights)},
          {"device_statistics_gib_at_most", gib(stats)},
          {"device_solver_gib", gib(solver)},
          {"device_batch_activations_gib", gib(batch)},
          {"formula",
           "host: 2 * nsamples * seqlen * hidden * bytes(dtype); device: one block's weights + one [in,in] G per "
           "distinct linear input + solver workspace (~4 [in,in] fp64) + batch activations"}};
}

struct LayerJob {
  std::string weight;  // checkpoint tensor name
  std::string name;    // without ".weight", what globs match
  LayerPlan plan;
};

std::vector<LayerJob> plan_block(const model::CausalLM& m, const Recipe& r, int64_t b) {
  std::vector<LayerJob> jobs;
  for (const auto& linear : m.linear_names()) {
    LayerJob j;
    j.weight = m.weight_name(b, linear);
    j.name = strip_weight(j.weight);
    j.plan = plan_for(r, j.name);
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// Methods are built once per (name, options): ALPS and DSnoT carry configuration only, no per-layer state.
class MethodCache {
 public:
  const prune::Method& get(const std::string& name, const json& options) {
    const std::string key = name + options.dump();
    auto it = methods_.find(key);
    if (it == methods_.end()) it = methods_.emplace(key, prune::make_method(name, options)).first;
    return *it->second;
  }

 private:
  std::map<std::string, std::unique_ptr<prune::Method>> methods_;
};

void check_output_dir(const PruneJob& job) {
  if (job.resume) {
    ALPS_CHECK(has_state(job), "--resume: ", job.out_dir.string(), " holds no interrupted run (no ",
               (state_dir(job) / "state.json").string(), ")");
    const json saved = io::read_json_file(state_dir(job) / "state.json");
    const json key = resume_key(job);
    ALPS_CHECK(saved.value("key", json()) == key, "--resume: the run saved in ", job.out_dir.string(),
               " used a different model or recipe; saved: ", saved.value("key", json()).dump(), " now: ", key.dump());
    return;
  }
  if (fs::exists(job.out_dir)) {
    ALPS_CHECK(job.overwrite, "output directory ", job.out_dir.string(), " already exists (pass --overwrite to replace it",
               has_state(job) ? ", or --resume to continue the interrupted run in it)" : ")");
    ALPS_CHECK(fs::is_directory(job.out_dir), "output path ", job.out_dir.string(), " exists and is not a directory");
  }
  const fs::path parent = fs::absolute(job.out_dir).parent_path();
  ALPS_CHECK(fs::is_directory(parent), "cannot create ", job.out_dir.string(), ": ", parent.string(), " does not exist");
}

void validate_plans(const model::CausalLM& m, const Recipe& r) {
  MethodCache methods;
  for (int64_t b = 0; b < m.num_blocks(); ++b) {
    for (const auto& j : plan_block(m, r, b)) {
      if (j.plan.skip) continue;
      try {
        ALPS_CHECK(!j.plan.pattern.empty(), "no sparsity or pattern given (use --sparsity S or --pattern N:M)");
        const auto pattern = prune::Pattern::parse(j.plan.pattern);
        const auto& entry = m.tensor(j.weight);
        pattern.check_shape(entry.size(0), entry.size(1));
        methods.get(j.plan.method, j.plan.options);
        prune::parse_refine(j.plan.refine);
      } catch (const Error& e) {
        ALPS_FAIL(j.name, ": ", e.what());
      }
    }
  }
}

}  // namespace

namespace {

// Everything about the job that can be checked before any work, given the loaded (memory-mapped) model. The caller
// also loads the tokenizer, which checks it, and keeps it for calibration and evaluation.
void validate_with(const PruneJob& job, const model::CausalLM& m) {
  const Recipe& r = job.recipe;
  ALPS_CHECK(r.nsamples > 0, "nsamples must be positive, got ", r.nsamples);
  ALPS_CHECK(r.seqlen > 1, "seqlen must be at least 2, got ", r.seqlen);
  ALPS_CHECK(r.batch_size > 0, "batch size must be positive, got ", r.batch_size);
  ALPS_CHECK(r.pcg_iterations >= 0, "pcg iterations must be >= 0, got ", r.pcg_iterations);
  const auto dtype = parse_dtype(r.dtype);
  const auto device = resolve_device(r.device);
  ALPS_CHECK(device.is_cuda() || dtype == c10::kFloat || dtype == c10::kDouble, "compute dtype ", r.dtype,
             " needs a CUDA device; use fp32 on the CPU");
  parse_dtype(r.stats_dtype);
  check_output_dir(job);
  ALPS_CHECK(r.seqlen <= m.config().max_positions, "seqlen ", r.seqlen, " exceeds the model's ",
             m.config().max_positions, " positions");
  validate_plans(m, r);
  if (!job.resume) resolve_calibration_source(r.calib, job.data_dir);
  for (const auto& spec : r.eval) eval::resolve_dataset(spec, job.data_dir);
  ALPS_CHECK(r.eval_seqlen <= m.config().max_positions, "evaluation seqlen ", r.eval_seqlen, " exceeds the model's ",
             m.config().max_positions, " positions");
}

}  // namespace

void validate_job(const PruneJob& job) {
  validate_with(job, model::CausalLM::load(job.model_dir));
  tokenizer::load_tokenizer(job.model_dir);
}

report::RunReport run_prune(const PruneJob& job) {
  auto m = model::CausalLM::load(job.model_dir);
  validate_with(job, m);
  const auto tok = tokenizer::load_tokenizer(job.model_dir);
  const Recipe& r = job.recipe;
  const auto device = resolve_device(r.device);
  const auto dtype = parse_dtype(r.dtype);
  const auto stats_dtype = parse_dtype(r.stats_dtype);
  m.set_compute(device, dtype);
  const int64_t n_blocks = m.num_blocks();

  report::RunReport rep;
  rep.recipe = recipe_to_json(r);
  rep.model = job.model_dir.string();
  rep.output = job.out_dir.string();
  rep.blocks_total = n_blocks;
  rep.extra["memory_estimate"] = memory_estimate(m, r, dtype);
  const auto& est = rep.extra["memory_estimate"];
  spdlog::info("memory estimate: host activations {:.2f} GiB; device: block weights {:.2f} GiB + statistics <= {:.2f} "
               "GiB + solver {:.2f} GiB + batch {:.2f} GiB",
               est["host_activations_gib"].get<double>(), est["device_block_weights_gib"].get<double>(),
               est["device_statistics_gib_at_most"].get<double>(), est["device_solver_gib"].get<double>(),
               est["device_batch_activations_gib"].get<double>());

  int64_t start_block = 0;
  at::Tensor inputs;  // [nsamples, seqlen, hidden] on the host, compute dtype: the current block's inputs
  auto phase = [&](const char* name, double seconds) { rep.phase_seconds[name] += seconds; };

  if (job.resume) {
    const json state = io::read_json_file(state_dir(job) / "state.json");
    start_block = state.at("next_block");
    for (const auto& l : state.at("layers")) rep.layers.push_back(report::layer_from_json(l));
    for (const auto& [k, v] : state.at("phase_seconds").items()) rep.phase_seconds[k] = v;
    rep.extra["calibration"] = state.at("calibration");
    for (int64_t b = 0; b < start_block; ++b) {
      io::SafetensorsFile f(block_file(job, b));
      for (const auto& e : f.entries()) m.set_tensor(e.name, f.tensor(e.name));
    }
    inputs = io::SafetensorsFile(state_dir(job) / "inputs.safetensors").tensor("inputs").clone();
    spdlog::info("resuming at block {}/{} from {}", start_block + 1, n_blocks, state_dir(job).string());
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    const auto source = resolve_calibration_source(r.calib, job.data_dir);
    CalibrationOptions copt{r.calib, r.nsamples, r.seqlen, r.seed};
    const at::Tensor ids = sample_windows(read_documents(source), *tok, copt);
    rep.extra["calibration"] = {{"file", source.string()}, {"windows", r.nsamples}, {"seqlen", r.seqlen}, {"seed", r.seed}};
    spdlog::info("calibration: {} windows of {} tokens from {}", r.nsamples, r.seqlen, source.string());
    inputs = at::empty({r.nsamples, r.seqlen, m.config().hidden_size}, at::TensorOptions().dtype(dtype));
    for (int64_t i = 0; i < r.nsamples; i += r.batch_size) {
      const int64_t n = std::min(r.batch_size, r.nsamples - i);
      inputs.slice(0, i, i + n).copy_(m.embed(ids.slice(0, i, i + n).to(device)));
    }
    phase("calibration", seconds_since(t0));
    std::error_code ec;
    fs::remove_all(state_dir(job), ec);  // a previous, abandoned run's state (with --overwrite)
    fs::create_directories(state_dir(job));
  }

  MethodCache methods;
  Progress progress("block", n_blocks);
  at::Tensor outputs = at::empty_like(inputs);
  int64_t done_this_run = 0;
  for (int64_t b = start_block; b < n_blocks; ++b) {
    if (job.stop_after >= 0 && done_this_run >= job.stop_after) break;
    m.load_block(b);

    // Statistics pass on the block as it is (SPEC §5): every linear of the block sees dense-block inputs.
    auto t0 = std::chrono::steady_clock::now();
    BlockStats stats(device, stats_dtype);
    model::LinearObserver observer = [&stats](const std::string& linear, const at::Tensor& x) { stats.observe(linear, x); };
    for (int64_t i = 0; i < r.nsamples; i += r.batch_size) {
      const int64_t n = std::min(r.batch_size, r.nsamples - i);
      m.block_forward(b, inputs.slice(0, i, i + n).to(device), &observer);
      stats.end_forward();
    }
    phase("statistics", seconds_since(t0));

    t0 = std::chrono::steady_clock::now();
    std::vector<std::pair<std::string, at::Tensor>> pruned;
    const auto linears = m.linear_names();
    const auto jobs = plan_block(m, r, b);
    for (size_t li = 0; li < jobs.size(); ++li) {
      const LayerJob& lj = jobs[li];
      report::LayerReport lr;
      lr.block = b;
      lr.name = lj.name;
      const at::Tensor W0 = m.tensor(lj.weight);
      lr.shape = W0.sizes().vec();
      if (lj.plan.skip) {
        lr.skipped = true;
        rep.layers.push_back(lr);
        spdlog::info("block {}/{} {}: skipped (left dense)", b + 1, n_blocks, linears[li]);
        continue;
      }
      const LayerStats& s = stats.at(linears[li]);
      prune::LayerProblem problem;
      problem.W0 = W0.to(device, at::kFloat);
      problem.G = s.gram().to(at::kFloat);
      problem.mean = s.mean();
      problem.tokens = s.tokens();
      problem.name = lj.name;
      if (!job.dump_problems.empty()) prune::save_problem(job.dump_problems / (lj.name + ".safetensors"), problem);

      const auto pattern = prune::Pattern::parse(lj.plan.pattern);
      const auto refine = prune::parse_refine(lj.plan.refine);
      try {
        prune::PcgOptions pcg;
        pcg.iterations = r.pcg_iterations;
        const prune::LayerResult res =
            prune::solve_layer(methods.get(lj.plan.method, lj.plan.options), problem, pattern, refine, pcg);
        lr.seconds = res.seconds;
        lr.rel_error = res.rel_error;
        lr.refine_seconds = res.refine_seconds;
        lr.rel_error_refined = res.rel_error_refined;
        lr.sparsity = res.sparsity;
        if (lj.plan.method == "alps") {
          lr.iterations = res.solution.iterations;
          lr.rho = res.solution.rho;
        }
        m.set_tensor(lj.weight, res.W);
      } catch (const Error& e) {
        ALPS_FAIL("block ", b, " ", lj.name, ": ", e.what());
      }
      lr.method = lj.plan.method;
      lr.pattern = pattern.str();
      lr.refine = lj.plan.refine;
      pruned.emplace_back(lj.weight, m.tensor(lj.weight));
      spdlog::info("block {}/{} {}: {} {} sparsity {:.3f} err {:.4e}{} ({:.2f}s{})", b + 1, n_blocks, linears[li],
                   lr.method, lr.pattern, lr.sparsity, lr.rel_error,
                   lr.rel_error_refined ? fmt::format(" -> {:.4e} after {}", *lr.rel_error_refined, lr.refine) : "",
                   lr.seconds, lr.iterations ? fmt::format(", {} iterations, rho {:.3g}", *lr.iterations, *lr.rho) : "");
      rep.layers.push_back(lr);
    }
    stats.clear();
    phase("solve", seconds_since(t0));

    // The next block sees what the *pruned* block produces, so errors do not compound unnoticed (SPEC §5).
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < r.nsamples; i += r.batch_size) {
      const int64_t n = std::min(r.batch_size, r.nsamples - i);
      outputs.slice(0, i, i + n).copy_(m.block_forward(b, inputs.slice(0, i, i + n).to(device)));
    }
    std::swap(inputs, outputs);
    m.unload_block(b);
    phase("pruned_forward", seconds_since(t0));

    // Resume state: this block's weights, the next inputs, then state.json last (it is what --resume trusts).
    t0 = std::chrono::steady_clock::now();
    io::save_safetensors(block_file(job, b), pruned);
    io::save_safetensors(state_dir(job) / "inputs.safetensors", {{"inputs", inputs}});
    json layers = json::array();
    for (const auto& l : rep.layers) layers.push_back(report::to_json(l));
    rep.blocks_done = b + 1;
    write_text_staged(state_dir(job) / "state.json", json{{"key", resume_key(job)},
                                                           {"next_block", b + 1},
                                                           {"layers", layers},
                                                           {"phase_seconds", rep.phase_seconds},
                                                           {"calibration", rep.extra["calibration"]}}
                                                         .dump(1));
    phase("save_state", seconds_since(t0));
    ++done_this_run;
    progress.step(b + 1, fmt::format("({} linears)", jobs.size()));
  }

  rep.blocks_done = start_block + done_this_run;
  rep.extra["peak_rss_gib"] = peak_rss_gib();
  if (rep.blocks_done < n_blocks) {
    spdlog::warn("stopped after block {}/{}; run the same command with --resume to continue", rep.blocks_done, n_blocks);
    return rep;
  }

  if (!r.eval.empty()) {
    // The pruned model as it is in memory, evaluated before the checkpoint is written so the report holds the result.
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<eval::Dataset> datasets;
    for (const auto& spec : r.eval) datasets.push_back(eval::resolve_dataset(spec, job.data_dir));
    eval::PerplexityOptions popt;
    popt.seqlen = std::min<int64_t>(r.eval_seqlen > 0 ? r.eval_seqlen : 2048, m.config().max_positions);
    popt.batch_size = 1;
    m.load_all();
    for (const auto& res : eval::evaluate(m, *tok, datasets, popt))
      rep.eval.push_back(eval::to_json(res));
    phase("eval", seconds_since(t0));
  }

  rep.complete = true;
  const auto t0 = std::chrono::steady_clock::now();
  model::SaveOptions save;
  // The report travels inside the staged checkpoint, so the directory appears complete, report included, at once.
  save.extra_files["alps-report.json"] = report::to_json(rep).dump(2);
  m.save(job.out_dir, save);
  rep.phase_seconds["save"] = seconds_since(t0);
  spdlog::info("wrote {} in {}", job.out_dir.string(), format_duration(rep.phase_seconds["save"]));
  return rep;
}

}  // namespace alps::pipeline
