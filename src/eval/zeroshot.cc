#include "alps/eval/zeroshot.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/core/py_text.h"
#include "alps/eval/task_metrics.h"
#include "alps/io/staged_path.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::eval {

namespace fs = std::filesystem;

std::vector<TaskInput> resolve_tasks(const std::vector<std::string>& names, const fs::path& task_data_dir,
                                     const std::vector<std::string>& overrides) {
  std::vector<TaskInput> out;
  auto add = [&](const TaskSpec& spec) {
    for (const TaskInput& t : out)
      if (t.spec == &spec) return;
    out.push_back({&spec, task_data_dir / spec.file});
  };
  for (const std::string& name : names) {
    if (name == "all") {
      for (const TaskSpec& spec : task_registry()) add(spec);
      continue;
    }
    ALPS_USAGE_CHECK(task_name_problem(name).empty(), task_name_problem(name));
    add(*find_task(name));
  }
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    ALPS_USAGE_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < o.size(), "task file override '", o,
                     "': expected TASK=FILE");
    const std::string name = o.substr(0, eq);
    ALPS_USAGE_CHECK(find_task(name) != nullptr, "task file override '", o, "': unknown task '", name,
                     "' (known: ", task_names(), ")");
    bool found = false;
    for (TaskInput& t : out)
      if (t.spec->name == name) {
        t.file = o.substr(eq + 1);
        found = true;
      }
    ALPS_CHECK(found, "task file override '", o, "': task ", name, " is not among the tasks to evaluate");
  }
  for (const TaskInput& t : out) {
    ALPS_CHECK(!fs::is_directory(t.file), "task ", t.spec->name, ": ", t.file.string(),
               " is a directory, expected a file (--task-data DIR names the directory holding <task>/<file>)");
    ALPS_CHECK(fs::is_regular_file(t.file), "task ", t.spec->name, ": expected file ", t.file.string(),
               " does not exist (--task-data DIR names the directory holding <task>/<file>, or --task-file ",
               t.spec->name, "=FILE)");
  }
  return out;
}

namespace {

// np.argmax: the first index of the largest value.
int64_t argmax(const std::vector<double>& xs) {
  int64_t best = 0;
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i] > xs[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);
  return best;
}

MetricValue mean_metric(const std::string& name, const std::vector<double>& per_doc) {
  MetricValue m{name, py_mean(per_doc), std::nullopt, true};
  if (per_doc.size() > 1) m.stderr_value = mean_stderr(per_doc);
  return m;
}

}  // namespace

std::vector<PreparedTask> prepare_tasks(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                        const std::vector<TaskInput>& tasks, const ZeroShotOptions& options) {
  const int64_t max_length = options.scoring.max_length > 0 ? options.scoring.max_length : model.config().max_positions;
  std::vector<PreparedTask> out;
  for (const TaskInput& task : tasks) {
    const auto start = std::chrono::steady_clock::now();
    PreparedTask t{task, load_task_docs(*task.spec, task.file, options.limit), {}, 0};
    for (const TaskDoc& d : t.docs)
      for (size_t k = 0; k < d.requests.size(); ++k) {
        t.encoded.push_back(encode_request(tokenizer, d.requests[k], options.scoring.add_bos));
        const EncodedRequest& e = t.encoded.back();
        auto where = [&] {
          return fmt::format("task {}: {} row {} request {}", task.spec->name, task.file.string(), d.row, k);
        };
        // lm-eval stops here too: a continuation is never truncated.
        ALPS_CHECK(static_cast<int64_t>(e.continuation.size()) <= max_length, where(), ": the continuation is ",
                   e.continuation.size(), " tokens, more than the model's maximum length ", max_length);
        ALPS_CHECK(!e.continuation.empty(), where(), ": the continuation encodes to no tokens");
        // A context of white space only leaves nothing once its trailing space moves to the continuation.
        ALPS_CHECK(!e.context.empty(), where(), ": the context encodes to no tokens");
      }
    t.seconds = seconds_since(start);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TaskResult> evaluate_tasks(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                       const std::vector<TaskInput>& tasks, const ZeroShotOptions& options) {
  return evaluate_tasks(model, prepare_tasks(model, tokenizer, tasks, options), options);
}

namespace {

// A log-likelihood task's metrics (lambada): perplexity over the requests (with a bootstrap stderr) and the share
// of requests whose continuation is the greedy one.
std::vector<MetricValue> loglikelihood_metrics(const TaskInput& task, const std::vector<TaskDoc>& docs,
                                               const std::vector<RequestScore>& scores,
                                               const ZeroShotOptions& options) {
  std::vector<double> lls, greedy;
  size_t pos = 0;
  for (const TaskDoc& d : docs)
    for (size_t k = 0; k < d.requests.size(); ++k, ++pos) {
      lls.push_back(scores[pos].loglikelihood);
      greedy.push_back(scores[pos].is_greedy ? 1.0 : 0.0);
    }
  std::vector<MetricValue> metrics;
  for (const std::string& m : task.spec->metrics) {
    if (m == "perplexity") {
      MetricValue v{m, perplexity_of(lls), std::nullopt, false};
      if (lls.size() > 1 && options.bootstrap_iters > 0)
        v.stderr_value = bootstrap_perplexity_stderr(lls, options.bootstrap_iters);
      metrics.push_back(v);
    } else if (m == "acc") {
      metrics.push_back(mean_metric(m, greedy));
    } else {
      ALPS_FAIL("task ", task.spec->name, ": metric ", m, " is not defined for log-likelihood tasks");
    }
  }
  return metrics;
}

// A multiple-choice task's metrics: the share of documents whose gold choice scores highest, by log-likelihood
// (acc) and by log-likelihood per character (acc_norm).
std::vector<MetricValue> choice_metrics(const TaskInput& task, const std::vector<TaskDoc>& docs,
                                        const std::vector<RequestScore>& scores) {
  std::vector<double> acc, acc_norm;
  size_t pos = 0;
  for (const TaskDoc& d : docs) {
    std::vector<double> lls, normed;
    for (size_t k = 0; k < d.requests.size(); ++k, ++pos) {
      lls.push_back(scores[pos].loglikelihood);
      // Divided by the choice's length in characters, as a float (a zero length gives -inf or nan like numpy).
      normed.push_back(scores[pos].loglikelihood / static_cast<double>(py_len(d.choices[k])));
    }
    acc.push_back(argmax(lls) == d.gold ? 1.0 : 0.0);
    acc_norm.push_back(argmax(normed) == d.gold ? 1.0 : 0.0);
  }
  std::vector<MetricValue> metrics;
  for (const std::string& m : task.spec->metrics) {
    ALPS_CHECK(m == "acc" || m == "acc_norm", "task ", task.spec->name, ": metric ", m,
               " is not defined for multiple-choice tasks");
    metrics.push_back(mean_metric(m, m == "acc" ? acc : acc_norm));
  }
  return metrics;
}

// The task's metrics from its requests' scores (in the order of its documents' requests).
std::vector<MetricValue> task_metrics(const TaskInput& task, const std::vector<TaskDoc>& docs,
                                      const std::vector<RequestScore>& scores, const ZeroShotOptions& options) {
  return task.spec->output == TaskOutput::kLoglikelihood ? loglikelihood_metrics(task, docs, scores, options)
                                                         : choice_metrics(task, docs, scores);
}

}  // namespace

std::vector<TaskResult> evaluate_tasks(const model::CausalLM& model, std::vector<PreparedTask> tasks,
                                       const ZeroShotOptions& options) {
  std::vector<TaskResult> results;
  for (size_t ti = 0; ti < tasks.size(); ++ti) {
    const TaskInput& task = tasks[ti].input;
    std::vector<TaskDoc>& docs = tasks[ti].docs;
    std::vector<EncodedRequest>& encoded = tasks[ti].encoded;
    const auto start = std::chrono::steady_clock::now();
    const std::string what = fmt::format("task {}/{} {}: requests", ti + 1, tasks.size(), task.spec->name);
    spdlog::info("task {}/{} {}: {} documents, {} requests from {}", ti + 1, tasks.size(), task.spec->name, docs.size(),
                 encoded.size(), task.file.string());
    Progress progress(what, static_cast<int64_t>(encoded.size()), /*min_interval=*/5.0);
    ScoringStats cost;
    const std::vector<RequestScore> scores = score_requests(
        model, encoded, options.scoring, [&](int64_t done) { progress.step(done, ""); }, &cost);

    TaskResult r;
    r.input = task;
    r.docs = static_cast<int64_t>(docs.size());
    r.requests = static_cast<int64_t>(encoded.size());
    r.metrics = task_metrics(task, docs, scores, options);
    r.seconds = tasks[ti].seconds + seconds_since(start);
    std::string summary;
    for (const MetricValue& m : r.metrics) summary += fmt::format(" {} {:.4f}", m.name, m.value);
    const double share =
        static_cast<double>(cost.positions) / static_cast<double>(std::max<int64_t>(1, cost.whole_positions));
    spdlog::info(
        "task {}/{} {}:{} ({} documents, {:.1f}s, {} token positions: {:.0f}% of scoring each request "
        "whole)",
        ti + 1, tasks.size(), task.spec->name, summary, r.docs, r.seconds, cost.positions, 100 * share);
    if (options.keep_samples) {
      r.samples = std::move(docs);
      r.encoded = std::move(encoded);
      r.scores = scores;
    }
    results.push_back(std::move(r));
  }
  return results;
}

nlohmann::json to_json(const TaskResult& r) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const MetricValue& m : r.metrics) {
    metrics[m.name] = m.value;
    metrics[m.name + "_stderr"] = m.stderr_value ? nlohmann::json(*m.stderr_value) : nlohmann::json("N/A");
  }
  return {{"task", r.input.spec->name},
          {"file", r.input.file.string()},
          {"version", r.input.spec->version},
          {"docs", r.docs},
          {"requests", r.requests},
          {"seconds", r.seconds},
          {"metrics", metrics}};
}

std::string format_task_table(const std::vector<TaskResult>& results) {
  // Columns as wide as their longest cell, values with 4 decimals, like lm-eval's markdown table.
  size_t name_w = 5, value_w = 6, err_w = 6;
  for (const TaskResult& r : results) {
    name_w = std::max(name_w, r.input.spec->name.size());
    for (const MetricValue& m : r.metrics) {
      value_w = std::max(value_w, fmt::format("{:.4f}", m.value).size());
      if (m.stderr_value) err_w = std::max(err_w, fmt::format("{:.4f}", *m.stderr_value).size());
    }
  }
  std::string out = fmt::format("|{:<{}}|Version|Filter|n-shot|  Metric  |   |{:<{}}|   |{:<{}}|\n", "Tasks", name_w,
                                "Value", value_w, "Stderr", err_w);
  out += fmt::format("|{:-<{}}|------:|------|-----:|----------|---|{:->{}}:|---|{:->{}}:|\n", "", name_w, "",
                     value_w - 1, "", err_w - 1);
  for (const TaskResult& r : results) {
    bool first = true;
    for (const MetricValue& m : r.metrics) {
      const std::string err = m.stderr_value ? fmt::format("{:.4f}", *m.stderr_value) : "N/A";
      out +=
          fmt::format("|{:<{}}|{:>7}|{:<6}|{:>6}|{:<10}|{:<3}|{:>{}.4f}|±  |{:>{}}|\n", first ? r.input.spec->name : "",
                      name_w, first ? std::to_string(r.input.spec->version) : "", first ? "none" : "", first ? "0" : "",
                      m.name, m.higher_is_better ? "↑" : "↓", m.value, value_w, err, err_w);
      first = false;
    }
  }
  return out;
}

void write_log_samples(const fs::path& path, const std::vector<TaskResult>& results, io::ExistingFile existing) {
  io::StagedPath staged(path);  // complete or absent: a killed run never leaves half a log
  std::ofstream out(staged.temp(), std::ios::binary | std::ios::trunc);
  ALPS_CHECK(out.good(), "--log-samples: cannot write ", path.string());
  for (const TaskResult& r : results) {
    ALPS_CHECK(r.scores.size() == static_cast<size_t>(r.requests), "task ", r.input.spec->name,
               ": samples were not kept");
    size_t pos = 0;
    for (const TaskDoc& d : r.samples) {
      for (size_t k = 0; k < d.requests.size(); ++k, ++pos) {
        nlohmann::json line = {{"task", r.input.spec->name},
                               {"doc", d.row},
                               {"request", k},
                               {"context", d.requests[k].context},
                               {"continuation", d.requests[k].continuation},
                               {"context_tokens", r.encoded[pos].context.size()},
                               {"continuation_tokens", r.encoded[pos].continuation.size()},
                               {"loglikelihood", r.scores[pos].loglikelihood},
                               {"is_greedy", r.scores[pos].is_greedy}};
        if (d.gold >= 0) line["gold"] = d.gold;
        out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
      }
    }
  }
  out.close();
  ALPS_CHECK(out.good(), "--log-samples: writing ", path.string(), " failed");
  staged.commit(existing);
}

}  // namespace alps::eval
