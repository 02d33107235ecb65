// alps_bench_layer: every solver (and magnitude + PCG / exact refit) on synthetic layer problems, side by side in
// one process, so that time ratios are measured under the same machine load. Prints a markdown table on stdout and
// writes one JSON document (--json FILE). Usage:
//   alps_bench_layer [--shapes 768x768,3072x768,...] [--patterns 0.5,0.7,0.9,2:4] [--methods a,b,...]
//                    [--tokens 4096] [--seed 0] [--repeat 1] [--json FILE] [--log-level info|debug|trace]
//                    [--alps-options JSON]   e.g. '{"eigh_double": false}' (AlpsOptions fields)
// A shape is OUTxIN; a method is a solver name or "solver+refine" with refine pcg, pcg:ITERATIONS or exact. With
// --repeat R each timing is the minimum over R runs (the solvers are deterministic). After the runs, a second table
// gives the target ratios for every shape and pattern that has the runs they need (alps vs sparsegpt;
// each magnitude+pcg* vs magnitude+exact).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "alps/core/error.h"
#include "alps/prune/method.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "alps/prune/refit.h"
#include "alps/prune/solve.h"
#include "alps/prune/synthetic.h"

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

struct Args {
  std::vector<std::string> shapes{"768x768", "3072x768", "768x3072", "2048x2048"};
  std::vector<std::string> patterns{"0.5", "0.7", "0.9", "2:4"};
  std::vector<std::string> methods{"magnitude", "wanda", "sparsegpt", "dsnot", "alps", "magnitude+pcg",
                                   "magnitude+exact"};
  int64_t tokens = 4096;
  uint64_t seed = 0;
  int repeat = 1;
  std::string json_path, log_level = "warn";
  nlohmann::json alps_options = nlohmann::json::object();
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    ALPS_CHECK(i + 1 < argc, "alps_bench_layer: flag ", flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--shapes") a.shapes = split(value);
    else if (flag == "--patterns") a.patterns = split(value);
    else if (flag == "--methods") a.methods = split(value);
    else if (flag == "--tokens") a.tokens = std::stoll(value);
    else if (flag == "--seed") a.seed = std::stoull(value);
    else if (flag == "--repeat") a.repeat = std::max(1, std::stoi(value));
    else if (flag == "--json") a.json_path = value;
    else if (flag == "--log-level") a.log_level = value;
    else if (flag == "--alps-options") a.alps_options = nlohmann::json::parse(value);
    else ALPS_FAIL("alps_bench_layer: unknown flag '", flag, "'");
  }
  return a;
}

// "method", "method+refine" or "method+pcg:ITERATIONS": the solve is timed separately from the refit.
alps::prune::LayerResult run_one(const alps::prune::LayerProblem& problem, const alps::prune::Pattern& pattern,
                                 const std::string& label, const nlohmann::json& alps_options) {
  using namespace alps::prune;
  const auto plus = label.find('+');
  const std::string name = label.substr(0, plus);
  std::string refine_text = plus == std::string::npos ? "none" : label.substr(plus + 1);
  PcgOptions pcg;
  if (const auto colon = refine_text.find(':'); colon != std::string::npos) {
    pcg.iterations = std::stoll(refine_text.substr(colon + 1));
    refine_text = refine_text.substr(0, colon);
  }
  auto method = make_method(name, name == "alps" ? alps_options : nlohmann::json::object());
  return solve_layer(*method, problem, pattern, parse_refine(refine_text), pcg);
}

// The solver targets from the runs of one shape and pattern, as ratios taken in this process.
void print_targets(const nlohmann::json& runs) {
  std::printf("\n| shape | pattern | comparison | time ratio | error ratio |\n|---|---|---|---|---|\n");
  auto find = [&](const nlohmann::json& like, const std::string& method) -> const nlohmann::json* {
    for (const auto& r : runs)
      if (r["shape"] == like["shape"] && r["pattern"] == like["pattern"] && r["method"] == method) return &r;
    return nullptr;
  };
  for (const auto& r : runs) {
    const std::string method = r["method"], shape = r["shape"], pattern = r["pattern"];
    const double err = r["rel_error"];
    if (method == "alps") {
      if (const auto* sg = find(r, "sparsegpt")) {
        std::printf("| %s | %s | alps / sparsegpt (target: time <= 5x; at 70%% error >= 25%% lower) | %.2fx | %.3f "
                    "(%.0f%% lower) |\n", shape.c_str(), pattern.c_str(), r["seconds"].get<double>() /
                    (*sg)["seconds"].get<double>(), err / (*sg)["rel_error"].get<double>(),
                    100.0 * (1.0 - err / (*sg)["rel_error"].get<double>()));
      }
    } else if (method.rfind("magnitude+pcg", 0) == 0) {
      if (const auto* ex = find(r, "magnitude+exact")) {
        std::printf("| %s | %s | exact / %s refit (target: PCG >= 20x faster, error <= 1.02x) | %.1fx | %.4f |\n",
                    shape.c_str(), pattern.c_str(), method.substr(10).c_str(),
                    (*ex)["refine_seconds"].get<double>() / r["refine_seconds"].get<double>(),
                    err / (*ex)["rel_error"].get<double>());
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse_args(argc, argv);
    spdlog::set_level(spdlog::level::from_str(a.log_level));
    nlohmann::json doc = {{"threads", at::get_num_threads()},
                          {"tokens", a.tokens},
                          {"seed", a.seed},
                          {"repeat", a.repeat},
                          {"alps_options", a.alps_options},
                          {"config", at::show_config()},
                          {"runs", nlohmann::json::array()}};
    std::printf("| shape (out x in) | pattern | method | rel_error | seconds | refine seconds | method's stats |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (const auto& shape : a.shapes) {
      const auto x = shape.find('x');
      ALPS_CHECK(x != std::string::npos, "alps_bench_layer: shape must be OUTxIN, got '", shape, "'");
      alps::prune::SyntheticOptions o;
      o.out = std::stoll(shape.substr(0, x));
      o.in = std::stoll(shape.substr(x + 1));
      o.tokens = a.tokens;
      o.seed = a.seed;
      alps::prune::LayerProblem problem = alps::prune::make_synthetic_problem(o);
      problem.name = "model.layers.0.self_attn.k_proj";  // DSnoT refines attention projections by default
      for (const auto& text : a.patterns) {
        const alps::prune::Pattern pattern = alps::prune::Pattern::parse(text);
        for (const auto& label : a.methods) {
          alps::prune::LayerResult best;
          for (int rep = 0; rep < a.repeat; ++rep) {
            alps::prune::LayerResult r = run_one(problem, pattern, label, a.alps_options);
            if (rep == 0 || r.seconds + r.refine_seconds < best.seconds + best.refine_seconds) best = r;
          }
          const double rel_error = best.rel_error_refined.value_or(*best.rel_error);  // of the final weights
          std::printf("| %s | %s | %s | %.4e | %.3f | %.3f | %s |\n", shape.c_str(), pattern.str().c_str(),
                      label.c_str(), rel_error, best.seconds, best.refine_seconds,
                      alps::prune::stats_text(best.solution.stats).c_str());
          std::fflush(stdout);
          nlohmann::json run = {{"shape", shape},          {"rows", o.out},
                                {"cols", o.in},            {"pattern", pattern.str()},
                                {"method", label},         {"rel_error", rel_error},
                                {"seconds", best.seconds}, {"refine_seconds", best.refine_seconds}};
          run.update(best.solution.stats);
          doc["runs"].push_back(run);
        }
      }
    }
    print_targets(doc["runs"]);
    if (!a.json_path.empty()) {
      std::ofstream f(a.json_path);
      ALPS_CHECK(f.good(), "alps_bench_layer: cannot write ", a.json_path);
      f << doc.dump(2) << "\n";
    }
    return 0;
  } catch (const alps::Error& e) {
    spdlog::error("{} ({})", e.what(), e.where());
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
