#include "model/stored_weights.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "alps/core/error.h"
#include "alps/core/strings.h"
#include "alps/core/suggest.h"
#include "alps/io/text_files.h"
#include "model/fused_experts.h"

namespace alps::model {

namespace fs = std::filesystem;

namespace {

const char* kSingleFile = "model.safetensors";
const char* kIndexFile = "model.safetensors.index.json";

// Shard names come from an editable JSON file; each must name a file inside the model directory, so that a
// checkpoint never reads (or, resaved, republishes) whatever a crafted index points at. Hugging Face's hub cache is
// the one layout whose files legitimately resolve elsewhere: snapshots/<revision>/<file> are symlinks into the
// repository's blobs/ directory.
void check_shard_name(const fs::path& dir, const std::string& tensor, const std::string& file) {
  const std::string where =
      (dir / kIndexFile).string() + ": tensor '" + tensor + "' is placed in shard '" + file + "'";
  const fs::path rel(file);
  ALPS_CHECK(!file.empty() && !rel.has_root_path(), where,
             ", which is not a file name relative to the model directory");
  for (const fs::path& part : rel)
    ALPS_CHECK(part != "..", where, ", whose '..' leaves the model directory");
  std::error_code ec;  // a name the file system cannot resolve (too long, say) is the index's fault, not a crash
  const fs::path root = fs::weakly_canonical(dir, ec);
  ALPS_CHECK(!ec, "cannot resolve the model directory ", dir.string(), ": ", ec.message());
  const fs::path target = fs::weakly_canonical(dir / rel, ec);
  ALPS_CHECK(!ec, where, ", which cannot be resolved: ", ec.message());
  auto inside = [&target](const fs::path& base) {
    auto [b, t] = std::mismatch(base.begin(), base.end(), target.begin(), target.end());
    return b == base.end() && t != target.end();
  };
  const bool hub_blob = root.parent_path().filename() == "snapshots" &&
                        inside(root.parent_path().parent_path() / "blobs");
  ALPS_CHECK(inside(root) || hub_blob, where, ", which resolves to ", target.string(),
             " outside the model directory ", root.string());
}

// Weights in any format a model repository carries (PyTorch, safetensors, TensorFlow, Flax, GGUF/GGML, ONNX, rust,
// TFLite, Core ML, OpenVINO), and the index files of sharded ones: the dense model's, which must not travel beside
// the pruned safetensors (a loader that prefers them would load the unpruned model).
bool is_weights_file(const std::string& name) {
  static const std::set<std::string> kExtensions = {".safetensors", ".bin", ".pt",   ".pth",  ".ckpt", ".h5",
                                                    ".msgpack",     ".gguf", ".ggml", ".onnx", ".ot",   ".tflite",
                                                    ".mlmodel",     ".npz"};
  auto weights_extension = [](const std::string& n) {
    return kExtensions.count(fs::path(n).extension().string()) > 0;
  };
  const std::string index = ".index.json";
  if (ends_with(name, index)) return weights_extension(name.substr(0, name.size() - index.size()));
  return weights_extension(name);
}

}  // namespace

void StoredWeights::rename(const std::string& from, const std::string& to) {
  ALPS_CHECK(host.count(from) && !host.count(to), "cannot rename tensor '", from, "' to '", to, "'");
  host[to] = std::move(host.at(from));
  host.erase(from);
  file_of[to] = file_of.at(from);
  file_of.erase(from);
  renamed[to] = name_in_file(from);
  renamed.erase(from);
  if (auto it = sliced.find(from); it != sliced.end()) {
    sliced[to] = it->second;
    sliced.erase(from);
  }
  *std::find(order.begin(), order.end(), from) = to;
}

void StoredWeights::erase(const std::string& name) {
  ALPS_CHECK(host.count(name), "cannot remove tensor '", name, "': the checkpoint has none");
  host.erase(name);
  file_of.erase(name);
  renamed.erase(name);
  sliced.erase(name);
  order.erase(std::find(order.begin(), order.end(), name));
}

const std::string& StoredWeights::name_in_file(const std::string& name) const {
  auto it = renamed.find(name);
  return it == renamed.end() ? name : it->second;
}

at::Tensor StoredWeights::file_tensor(const std::string& name) const {
  const size_t file =
      static_cast<size_t>(std::find(file_names.begin(), file_names.end(), file_of.at(name)) - file_names.begin());
  auto it = sliced.find(name);
  if (it == sliced.end()) return files.at(file).tensor(name_in_file(name));
  return it->second.of(files.at(file).tensor(it->second.tensor));
}

StoredWeights read_weights(const fs::path& dir) {
  StoredWeights w;
  // Which files hold which tensors: the index for sharded checkpoints, else the one model.safetensors.
  std::map<std::string, std::string> indexed;
  if (fs::exists(dir / kIndexFile)) {
    const nlohmann::json index = io::read_json_file(dir / kIndexFile);
    try {
      for (const auto& [name, file] : index.at("weight_map").items()) {
        indexed[name] = file.get<std::string>();
        check_shard_name(dir, name, indexed[name]);
        if (std::find(w.file_names.begin(), w.file_names.end(), indexed[name]) == w.file_names.end())
          w.file_names.push_back(indexed[name]);
      }
    } catch (const nlohmann::json::exception& e) {
      ALPS_FAIL((dir / kIndexFile).string(), ": expected {\"weight_map\": {tensor: file}}: ", e.what());
    }
    std::sort(w.file_names.begin(), w.file_names.end());
  } else {
    ALPS_CHECK(fs::exists(dir / kSingleFile), "no ", kSingleFile, " or ", kIndexFile, " in model directory ",
               dir.string());
    w.file_names.push_back(kSingleFile);
  }

  for (const std::string& file : w.file_names) {
    w.files.emplace_back(dir / file);
    const io::SafetensorsFile& f = w.files.back();
    if (w.files.size() == 1) w.metadata = f.metadata();
    for (const io::TensorEntry& e : f.entries()) {
      ALPS_CHECK(!w.host.count(e.name), "tensor ", e.name, " appears in both ", w.file_of[e.name], " and ", file);
      if (!indexed.empty()) {
        auto it = indexed.find(e.name);
        ALPS_CHECK(it != indexed.end() && it->second == file, e.name, " in ", file, ": the index ", kIndexFile,
                   it == indexed.end() ? std::string(" does not list it") : " places it in " + it->second);
      }
      w.host[e.name] = f.tensor(e.name);
      w.file_of[e.name] = file;
      w.order.push_back(e.name);
    }
  }
  for (const auto& [name, file] : indexed)
    ALPS_CHECK(w.host.count(name), "tensor ", name, " listed in ", kIndexFile, " is missing from ", file);

  return w;
}

namespace {

// The files of `source` beside the weights into `dir`: config (with `config_fields` merged in), generation config and
// tokenizer files, unchanged otherwise. Hidden files are the input's own (a tool's marker of what it downloaded,
// .gitattributes): they would describe it, not the output. Returns the names written.
std::vector<std::string> copy_side_files(const fs::path& source, const fs::path& dir,
                                         const nlohmann::json& config_fields) {
  std::vector<std::string> written, dense, hidden;
  for (const auto& entry : fs::directory_iterator(source)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file()) continue;
    if (name.front() == '.') {
      hidden.push_back(name);
      continue;
    }
    if (is_weights_file(name)) {
      if (name != kIndexFile && fs::path(name).extension() != ".safetensors") dense.push_back(name);
      continue;
    }
    if (name == "config.json" && !config_fields.empty()) {
      auto config = nlohmann::ordered_json::parse(io::read_text_file(entry.path()));
      // Merged, not replaced: a multimodal config's smaller counts go inside its text_config beside the rest.
      config.merge_patch(nlohmann::ordered_json::parse(config_fields.dump()));
      std::ofstream out(dir / name, std::ios::trunc);
      out << config.dump(2) << "\n";
      ALPS_CHECK(out.good(), "cannot write ", (dir / name).string());
    } else {
      fs::copy_file(entry.path(), dir / name);
    }
    written.push_back(name);
  }
  if (!hidden.empty()) spdlog::info("not copied to the output (the input's hidden files): {}", join_names(hidden));
  if (!dense.empty())
    spdlog::info("not copied to the output (the dense model's weights in other formats): {}", join_names(dense));
  return written;
}

// The tensors of `w` into `dir` as one safetensors file, or in shards of at most `max_shard_bytes` with their index.
// Returns the names written.
std::vector<std::string> write_shards(const fs::path& dir, const StoredWeights& w, int64_t max_shard_bytes) {
  std::vector<std::string> written;
  // Greedy split in input order: a shard is closed when the next tensor would take it over the limit.
  const std::vector<OutputTensor> tensors = output_tensors(w);
  std::vector<std::vector<const OutputTensor*>> shards(1);
  int64_t total = 0, in_shard = 0;
  for (const OutputTensor& t : tensors) {
    if (in_shard > 0 && in_shard + t.bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += t.bytes;
    total += t.bytes;
  }
  const bool sharded = total > max_shard_bytes;
  if (!sharded) {
    shards = {{}};
    for (const OutputTensor& t : tensors) shards.front().push_back(&t);
  }

  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    const std::string file = sharded ? std::string(buf) : kSingleFile;
    std::vector<io::TensorEntry> layout;
    for (const OutputTensor* t : shards[k]) {
      layout.push_back(t->entry);
      weight_map[t->entry.name] = file;
    }
    io::SafetensorsWriter writer(dir / file, layout, w.metadata);
    for (const OutputTensor* t : shards[k]) writer.write(t->entry.name, t->value());
    writer.finish();
    written.push_back(file);
  }
  if (sharded) {
    std::ofstream out(dir / kIndexFile);
    out << nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) << "\n";
    ALPS_CHECK(out.good(), "cannot write ", (dir / kIndexFile).string());
    written.push_back(kIndexFile);
  }
  spdlog::info("wrote {} tensors ({:.1f} MB, {} file{})", tensors.size(), total / 1e6, shards.size(),
               shards.size() > 1 ? "s" : "");
  return written;
}

}  // namespace

std::vector<std::string> write_weights(const fs::path& source, const fs::path& dir, const StoredWeights& w,
                                       int64_t max_shard_bytes, const nlohmann::json& config_fields) {
  std::vector<std::string> written = copy_side_files(source, dir, config_fields);
  for (std::string& file : write_shards(dir, w, max_shard_bytes)) written.push_back(std::move(file));
  return written;
}

}  // namespace alps::model
