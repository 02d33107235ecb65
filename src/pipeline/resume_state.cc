#include "alps/pipeline/resume_state.h"

#include <fmt/format.h>

#include <fstream>
#include <set>

#include "alps/core/error.h"
#include "alps/core/fault.h"
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
constexpr int kStateFormat = 3;
constexpr const char* kStateFile = "state.json";


// "block-00003.safetensors" -> 3; -1 for any other name.
int64_t numbered(const std::string& name, const std::string& prefix) {
  const std::string suffix = ".safetensors";
  if (name.size() != prefix.size() + 5 + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
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
fs::path StateDir::inputs_file(int64_t b) const { return dir_ / fmt::format("inputs-{:05d}.safetensors", b); }

void StateDir::save(const ResumeState& s, const std::vector<std::pair<std::string, at::Tensor>>& block_weights,
                    const at::Tensor& next_inputs) {
  // A resumed run may write a block's file again (it stopped between the file and state.json).
  if (s.next_block > 0)
    io::save_safetensors(block_file(s.next_block - 1), block_weights, {}, io::ExistingFile::kReplace);
  crash_point("state-block-saved");
  // Named by block, never overwritten in place: until state.json moves on, it still names the previous inputs.
  if (next_inputs.defined())
    io::save_safetensors(inputs_file(s.next_block), {{"inputs", next_inputs}}, {}, io::ExistingFile::kReplace);
  crash_point("state-inputs-saved");
  // The state is alps's own, rewritten after every block.
  io::write_text_staged(dir_ / kStateFile,
                        json{{"format", kStateFormat},
                             {"key", s.key},
                             {"next_block", s.next_block},
                             {"inputs", next_inputs.defined()},
                             {"layers", s.layers},
                             {"phase_seconds", s.phase_seconds},
                             {"calibration", s.calibration},
                             {"sparsity_profile", s.sparsity_profile}}
                            .dump(1),
                        io::ExistingFile::kReplace);
  if (on_saved_) on_saved_(s.next_block);
  crash_point("state-json-saved");
  remove_unreferenced(s.next_block);
}

void StateDir::remove_unreferenced(int64_t next_block) const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    const int64_t block = numbered(name, "block-"), inputs = numbered(name, "inputs-");
    const bool stale = (block >= next_block) || (inputs >= 0 && inputs != next_block) ||
                       (name.size() > 1 && name[0] == '.' && name.find(".tmp-") != std::string::npos);
    if (stale) fs::remove(e.path(), ec);
  }
}

ResumeState StateDir::load() const {
  const fs::path file = dir_ / kStateFile;
  json doc;
  try {
    doc = io::read_json_file(file);
  } catch (const Error& e) {
    ALPS_FAIL("resume state ", file.string(), " is damaged (", e.what(), "): pass --overwrite to start over");
  }
  const int format = doc.value("format", 1);
  ALPS_CHECK(format == 2 || format == kStateFormat, file.string(), " was written by another version of alps (state "
             "format ", format, ", this alps reads 2 and ", kStateFormat, "): pass --overwrite to start over");
  ResumeState s;
  try {
    s.key = doc.at("key");
    s.next_block = doc.at("next_block").get<int64_t>();
    s.layers = doc.at("layers");
    s.phase_seconds = doc.at("phase_seconds");
    s.calibration = doc.at("calibration");
    s.has_inputs = doc.value("inputs", true);
    s.sparsity_profile = doc.value("sparsity_profile", json());
  } catch (const json::exception& e) {
    ALPS_FAIL(file.string(), " is damaged (", e.what(), "): pass --overwrite to start over");
  }
  ALPS_CHECK(s.next_block >= 0, file.string(), ": next_block must be >= 0, got ", s.next_block);
  for (int64_t b = 0; b < s.next_block + (s.has_inputs ? 1 : 0); ++b) {
    const fs::path f = b < s.next_block ? block_file(b) : inputs_file(b);
    ALPS_CHECK(fs::is_regular_file(f), "resume state in ", dir_.string(), " is damaged: ", f.filename().string(),
               " is missing; pass --overwrite to start over");
  }
  remove_unreferenced(s.next_block);  // leftovers of the run that died while saving
  return s;
}

std::vector<std::pair<std::string, at::Tensor>> StateDir::load_block(int64_t b) const {
  io::SafetensorsFile f(block_file(b));
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& e : f.entries()) out.emplace_back(e.name, f.tensor(e.name).clone());
  return out;
}

at::Tensor StateDir::load_inputs(const ResumeState& s) const {
  if (!s.has_inputs) return {};
  return io::SafetensorsFile(inputs_file(s.next_block)).tensor("inputs").clone();
}

namespace {

// How a user gives a recipe field: its flag (with the recipe key, which a --config file uses).
std::string given_as(const std::string& path) {
  std::string flag;
  for (const RecipeKnob& k : recipe_knobs())
    if (k.path() == path) flag = k.flag;
  if (path == "pattern") flag = "--sparsity/--pattern";
  if (path == "skip") flag = "--skip";
  if (path.rfind("options.", 0) == 0) flag = "--option " + path.substr(8);
  return flag.empty() ? fmt::format("recipe field \"{}\"", path) : fmt::format("{} (recipe \"{}\")", flag, path);
}

// Leaf by leaf, so that a nested recipe field is named in full ("calibration.seed").
void recipe_differences(const json& a, const json& b, const std::string& prefix, std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const auto& k : keys)
      recipe_differences(a.contains(k) ? a[k] : json(), b.contains(k) ? b[k] : json(),
                         prefix.empty() ? k : prefix + "." + k, out);
  } else if (a != b) {
    out.push_back(fmt::format("{}: the interrupted run used {}, this command gives {}", given_as(prefix),
                              a.is_null() ? "none" : a.dump(), b.is_null() ? "none" : b.dump()));
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

json resume_key(const Recipe& recipe, const fs::path& model_dir, const fs::path& calibration) {
  json r = recipe_to_json(recipe);
  for (const RecipeKnob& k : recipe_knobs())
    if (!k.affects_result) (k.calibration ? r["calibration"] : r).erase(k.key);
  r.erase("eval");  // evaluated after pruning
  json calib = {{"source", calibration.string()}};
  if (!calibration.empty()) calib["file"] = io::fingerprint_file(calibration);
  return {{"recipe", r}, {"model", io::fingerprint_checkpoint_dir(model_dir)}, {"calibration", calib}};
}

std::vector<std::string> resume_key_differences(const json& saved, const json& now) {
  std::vector<std::string> out;
  const json empty = json::object();
  recipe_differences(without_default_options(saved.value("recipe", empty)),
                     without_default_options(now.value("recipe", empty)), "", out);
  for (const auto& line : io::fingerprint_differences(saved.value("model", empty), now.value("model", empty)))
    out.push_back("model file " + line);
  const json ca = saved.value("calibration", json()), cb = now.value("calibration", json());
  if (ca.is_object() && cb.is_object()) {
    for (const auto& line : io::fingerprint_differences(ca.value("file", empty), cb.value("file", empty)))
      out.push_back("calibration file " + cb.value("source", std::string()) + ": " + line);
  }
  return out;
}

}  // namespace alps::pipeline
