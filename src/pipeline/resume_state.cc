#include "alps/pipeline/resume_state.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "alps/core/error.h"
#include "alps/core/fault.h"
#include "alps/core/strings.h"
#include "alps/io/fingerprint.h"
#include "alps/io/safetensors.h"
#include "alps/io/staged_path.h"
#include "alps/io/text_files.h"
#include "alps/prune/method.h"

namespace alps::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// 3: state.json says whether it holds the next block's inputs ("inputs"); format 2 always did.
// 4: "input_shards", the window ranges of the inputs' files (a distributed run's ranks write one each).
constexpr int kStateFormat = 4;
constexpr const char* kStateFile = "state.json";


// "block-00003.safetensors" -> 3; -1 for any other name.
int64_t numbered(const std::string& name, const std::string& prefix) {
  const std::string suffix = ".safetensors";
  if (name.size() != prefix.size() + 5 + suffix.size() || name.rfind(prefix, 0) != 0 || !ends_with(name, suffix))
    return -1;
  int64_t v = 0;
  for (size_t i = prefix.size(); i < prefix.size() + 5; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

}  // namespace

fs::path StateDir::block_file(int64_t b) const { return dir_ / fmt::format("block-{:05d}.safetensors", b); }
// A shard's file: "inputs-00003.safetensors" when it holds every window, "inputs-00003.w4-8.safetensors" for
// windows [4, 8).
fs::path StateDir::inputs_file(int64_t b, const std::vector<std::pair<int64_t, int64_t>>& shards,
                               size_t shard) const {
  if (shards.empty()) return dir_ / fmt::format("inputs-{:05d}.safetensors", b);
  const auto [begin, end] = shards.at(shard);
  return dir_ / fmt::format("inputs-{:05d}.w{}-{}.safetensors", b, begin, end);
}

std::vector<fs::path> StateDir::inputs_files(int64_t next_block,
                                             const std::vector<std::pair<int64_t, int64_t>>& shards,
                                             bool has_inputs) const {
  std::vector<fs::path> files;
  if (has_inputs)
    for (size_t i = 0; i < std::max<size_t>(shards.size(), 1); ++i)
      files.push_back(inputs_file(next_block, shards, i));
  return files;
}

void StateDir::save(const ResumeState& s, const std::vector<std::pair<std::string, at::Tensor>>& block_weights,
                    const at::Tensor& next_inputs) {
  const bool shard_only = sharing_.rank != 0;
  if (!shard_only && s.next_block > 0)  // a resumed run may write a block's file again (it stopped before state.json)
    io::save_safetensors(block_file(s.next_block - 1), block_weights, {}, io::ExistingFile::kReplace);
  crash_point("state-block-saved");
  // Named by block, never overwritten in place: until state.json moves on, it still names the previous inputs.
  if (next_inputs.defined())
    io::save_safetensors(inputs_file(s.next_block, s.input_shards, sharing_.shard), {{"inputs", next_inputs}}, {},
                         io::ExistingFile::kReplace);
  crash_point("state-inputs-saved");
  if (shard_only) {
    if (next_inputs.defined() && sharing_.shard_written) sharing_.shard_written(s.next_block);
    return;
  }
  if (next_inputs.defined() && sharing_.await_shards) sharing_.await_shards(s.next_block);
  // The state is alps's own, rewritten after every block.
  io::write_text_staged(dir_ / kStateFile,
                        json{{"format", kStateFormat},
                             {"key", s.key},
                             {"next_block", s.next_block},
                             {"inputs", next_inputs.defined()},
                             {"input_shards", s.input_shards},
                             {"layers", s.layers},
                             {"phase_seconds", s.phase_seconds},
                             {"calibration", s.calibration},
                             {"sparsity_profile", s.sparsity_profile},
                             {"units", s.units},
                             {"legs", s.legs}}
                            .dump(1),
                        io::ExistingFile::kReplace);
  if (on_saved_) on_saved_(s.next_block);
  crash_point("state-json-saved");
  remove_unreferenced(s.next_block, inputs_files(s.next_block, s.input_shards, next_inputs.defined()),
                      /*alone=*/sharing_.await_shards == nullptr);
}

void StateDir::remove_unreferenced(int64_t next_block, const std::vector<fs::path>& inputs, bool alone) const {
  std::set<std::string> named;
  for (const auto& f : inputs) named.insert(f.filename().string());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    const int64_t block = numbered(name, "block-");
    // "inputs-NNNNN" and what follows: the block whose inputs the file holds.
    int64_t inputs = -1;
    if (name.rfind("inputs-", 0) == 0 && name.size() > 12 &&
        name.find_first_not_of("0123456789", 7) == 12)
      inputs = std::stoll(name.substr(7, 5));
    const bool stale = (block >= next_block) || (inputs >= 0 && inputs < next_block) ||
                       (inputs == next_block && named.count(name) == 0) || (inputs > next_block && alone) ||
                       (alone && name.size() > 1 && name[0] == '.' && name.find(".tmp-") != std::string::npos);
    if (stale) fs::remove(e.path(), ec);
  }
}

ResumeState StateDir::load(bool tidy) const {
  const fs::path file = dir_ / kStateFile;
  json doc;
  try {
    doc = io::read_json_file(file);
  } catch (const Error& e) {
    ALPS_FAIL("resume state ", file.string(), " is damaged (", e.what(), "): pass --overwrite to start over");
  }
  const int format = doc.value("format", 1);
  ALPS_CHECK(format >= 2 && format <= kStateFormat, file.string(), " was written by another version of alps (state "
             "format ", format, ", this alps reads 2 to ", kStateFormat, "): pass --overwrite to start over");
  ResumeState s;
  try {
    s.key = doc.at("key");
    s.next_block = doc.at("next_block").get<int64_t>();
    s.layers = doc.at("layers");
    s.phase_seconds = doc.at("phase_seconds");
    s.calibration = doc.at("calibration");
    s.has_inputs = doc.value("inputs", true);
    s.sparsity_profile = doc.value("sparsity_profile", json());
    s.units = doc.value("units", json::array());
    s.legs = doc.value("legs", json::array());
    s.input_shards = doc.value("input_shards", std::vector<std::pair<int64_t, int64_t>>{});
  } catch (const json::exception& e) {
    ALPS_FAIL(file.string(), " is damaged (", e.what(), "): pass --overwrite to start over");
  }
  ALPS_CHECK(s.next_block >= 0, file.string(), ": next_block must be >= 0, got ", s.next_block);
  const std::vector<fs::path> inputs = inputs_files(s.next_block, s.input_shards, s.has_inputs);
  std::vector<fs::path> named = inputs;
  for (int64_t b = 0; b < s.next_block; ++b) named.push_back(block_file(b));
  for (const auto& f : named)
    ALPS_CHECK(fs::is_regular_file(f), "resume state in ", dir_.string(), " is damaged: ", f.filename().string(),
               " is missing; pass --overwrite to start over");
  if (tidy) remove_unreferenced(s.next_block, inputs, /*alone=*/true);  // leftovers of the run that died while saving
  return s;
}

std::vector<std::pair<std::string, at::Tensor>> StateDir::load_block(int64_t b) const {
  io::SafetensorsFile f(block_file(b));
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& e : f.entries()) out.emplace_back(e.name, f.tensor(e.name).clone());
  return out;
}

at::Tensor StateDir::load_inputs(const ResumeState& s, int64_t begin, int64_t end) const {
  if (!s.has_inputs) return {};
  if (s.input_shards.empty()) {
    const at::Tensor all = io::SafetensorsFile(inputs_file(s.next_block, {}, 0)).tensor("inputs");
    return all.slice(0, begin, end < 0 ? all.size(0) : end).clone();
  }
  // The windows of this run's share, from the shards of the run that saved them (another world size, maybe).
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < s.input_shards.size(); ++i) {
    const auto [b, e] = s.input_shards[i];
    const int64_t lo = std::max(b, begin), hi = end < 0 ? e : std::min(e, end);
    if (lo >= hi) continue;
    const at::Tensor shard = io::SafetensorsFile(inputs_file(s.next_block, s.input_shards, i)).tensor("inputs");
    ALPS_CHECK(shard.size(0) == e - b, "resume state in ", dir_.string(), " is damaged: ",
               inputs_file(s.next_block, s.input_shards, i).filename().string(), " holds ", shard.size(0),
               " windows, not ", e - b, "; pass --overwrite to start over");
    parts.push_back(shard.slice(0, lo - b, hi - b).clone());
  }
  ALPS_CHECK(!parts.empty(), "resume state in ", dir_.string(), " holds none of the windows ", begin, " to ", end,
             "; pass --overwrite to start over");
  return parts.size() == 1 ? parts[0] : at::cat(parts);
}

namespace {

// How a user gives a recipe field: its flag (with the recipe key, which a --config file uses). "run." fields are the
// job's beside its recipe (job_key).
std::string given_as(const std::string& path) {
  if (path == "run.alps") return "the alps build (source revision)";
  if (path.rfind("run.", 0) == 0) {  // "run.stop_after" -> --stop-after
    std::string flag = "--" + path.substr(4);
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
  }
  std::string flag;
  for (const RecipeKnob& k : recipe_knobs())
    if (k.path() == path) flag = k.flag;
  if (path == "pattern") flag = "--sparsity/--pattern";
  if (path == "skip") flag = "--skip";
  if (path.rfind("options.", 0) == 0) flag = "--option " + path.substr(8);
  return flag.empty() ? fmt::format("recipe field \"{}\"", path) : fmt::format("{} (recipe \"{}\")", flag, path);
}

// Leaf by leaf, so that a nested recipe field is named in full ("calibration.seed").
void recipe_differences(const json& a, const json& b, const std::string& prefix, const std::string& a_says,
                        const std::string& b_says, std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const auto& k : keys)
      recipe_differences(a.contains(k) ? a[k] : json(), b.contains(k) ? b[k] : json(),
                         prefix.empty() ? k : prefix + "." + k, a_says, b_says, out);
  } else if (a != b) {
    out.push_back(fmt::format("{}: {} {}, {} {}", given_as(prefix), a_says, a.is_null() ? "none" : a.dump(), b_says,
                              b.is_null() ? "none" : b.dump()));
  }
}

// A method constant given with its default value is the run without it: `--option damp=0.01` resumes a run started
// without --option, and the other way round. (In overrides a default can undo the recipe's value: kept as written.)
json without_default_options(json recipe) {
  if (!recipe.is_object() || !recipe.contains("options") || !recipe["options"].is_object()) return recipe;
  for (const auto& entry : prune::method_catalog()) {
    if (entry["name"] != recipe.value("method", json())) continue;
    for (const auto& option : entry["options"]) {
      const std::string name = option["name"];
      if (recipe["options"].contains(name) && recipe["options"][name] == option["default"])
        recipe["options"].erase(name);
    }
  }
  return recipe;
}

}  // namespace

json resume_key(const Recipe& recipe, const fs::path& model_dir, const fs::path& calibration,
                const std::vector<std::string>& routers, io::Hashed safetensors) {
  json r = recipe_to_json(recipe);
  for (const RecipeKnob& k : recipe_knobs())
    if (!k.affects_result) (k.calibration ? r["calibration"] : r).erase(k.key);
  r.erase("eval");  // evaluated after pruning
  json calib = {{"source", calibration.string()}};
  if (!calibration.empty()) calib["file"] = io::fingerprint_file(calibration);
  json key = {{"recipe", r}, {"model", io::fingerprint_checkpoint_dir(model_dir, safetensors)}, {"calibration", calib}};
  if (!routers.empty())
    key["routers"] = routers;  // absent when none: the keys of states that prune none stay as they were
  return key;
}

std::vector<std::string> job_key_differences(const json& a, const json& b, const std::string& a_says,
                                             const std::string& b_says) {
  std::vector<std::string> out;
  const json empty = json::object();
  recipe_differences(without_default_options(a.value("recipe", empty)), without_default_options(b.value("recipe", empty)),
                     "", a_says, b_says, out);
  recipe_differences(a.value("run", empty), b.value("run", empty), "run", a_says, b_says, out);
  // Files as `b` sees them, against `a`.
  const std::string whose = b_says.rfind("rank ", 0) == 0 ? b_says.substr(0, b_says.find(' ', 5)) + "'s " : "";
  for (const auto& line : io::fingerprint_differences(a.value("model", empty), b.value("model", empty)))
    out.push_back(whose + "model file " + line);
  const json ca = a.value("calibration", json()), cb = b.value("calibration", json());
  if (ca.is_object() && cb.is_object()) {
    for (const auto& line : io::fingerprint_differences(ca.value("file", empty), cb.value("file", empty)))
      out.push_back(whose + "calibration file " + cb.value("source", std::string()) + ": " + line);
  }
  const json ra = a.value("routers", json::array()), rb = b.value("routers", json::array());
  if (ra != rb)
    out.push_back(fmt::format("routers pruned by recipe rules: {} {}, {} {}", a_says, ra.empty() ? "none" : ra.dump(),
                              b_says, rb.empty() ? "none" : rb.dump()));
  return out;
}

std::vector<std::string> resume_key_differences(const json& saved, const json& now) {
  return job_key_differences(saved, now, "the interrupted run used", "this command gives");
}

}  // namespace alps::pipeline
