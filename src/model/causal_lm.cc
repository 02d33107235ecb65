#include "alps/model/causal_lm.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/io/safetensors.h"
#include "alps/io/staged_path.h"
#include "alps/io/text_files.h"
#include "architecture.h"

namespace alps::model {

namespace fs = std::filesystem;

namespace {

const char* kSingleFile = "model.safetensors";
const char* kIndexFile = "model.safetensors.index.json";

std::string shape_str(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Older LLaMA checkpoints store the RoPE table; it is recomputed from the config, so it is carried but not used.
bool is_ignored_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Architecture> make_architecture(const ModelConfig& c) {
  const ArchitectureEntry* a = find_architecture(c.architecture);
  ALPS_CHECK(a != nullptr, "unknown architecture '", c.architecture, "' (supported: ", supported_architectures(), ")");
  return a->make(c);
}

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

}  // namespace

struct CausalLM::State {
  ModelConfig config;
  fs::path dir;
  std::unique_ptr<Architecture> arch;
  std::vector<io::SafetensorsFile> files;
  std::map<std::string, at::Tensor> host;       // checkpoint dtype, CPU (mapping views until replaced)
  std::map<std::string, std::string> file_of;   // tensor -> file name inside dir
  std::vector<std::string> order;               // input order: file by file, data-offset order
  std::map<std::string, std::string> metadata;  // __metadata__ of the first file
  c10::Device device{c10::kCPU};
  c10::ScalarType dtype = at::kFloat;
  std::map<std::string, at::Tensor> resident;   // compute device and dtype

  at::Tensor weight(const std::string& name) const {
    if (auto it = resident.find(name); it != resident.end()) return it->second;
    auto it = host.find(name);
    ALPS_CHECK(it != host.end(), "tensor '", name, "' is not part of the checkpoint in ", dir.string());
    return it->second.to(device, dtype);
  }
  WeightFn weight_fn() const {
    return [this](const std::string& name) { return weight(name); };
  }
  void make_resident(const std::string& name) { resident[name] = host.at(name).to(device, dtype); }
};

CausalLM::CausalLM() : state_(std::make_unique<State>()) {}
CausalLM::CausalLM(CausalLM&&) noexcept = default;
CausalLM& CausalLM::operator=(CausalLM&&) noexcept = default;
CausalLM::~CausalLM() = default;

CausalLM CausalLM::load(const fs::path& dir) {
  CausalLM m;
  State& s = *m.state_;
  s.dir = dir;
  ALPS_CHECK(fs::is_directory(dir), "model directory ", dir.string(), " does not exist");
  ALPS_CHECK(fs::exists(dir / "config.json"), "no config.json in model directory ", dir.string());
  s.config = load_config(dir / "config.json");
  s.arch = make_architecture(s.config);

  // Which files hold which tensors: the index for sharded checkpoints, else the one model.safetensors.
  std::vector<std::string> file_names;
  std::map<std::string, std::string> indexed;
  if (fs::exists(dir / kIndexFile)) {
    const nlohmann::json index = io::read_json_file(dir / kIndexFile);
    try {
      for (const auto& [name, file] : index.at("weight_map").items()) {
        indexed[name] = file.get<std::string>();
        check_shard_name(dir, name, indexed[name]);
        if (std::find(file_names.begin(), file_names.end(), indexed[name]) == file_names.end())
          file_names.push_back(indexed[name]);
      }
    } catch (const nlohmann::json::exception& e) {
      ALPS_FAIL((dir / kIndexFile).string(), ": expected {\"weight_map\": {tensor: file}}: ", e.what());
    }
    std::sort(file_names.begin(), file_names.end());
  } else {
    ALPS_CHECK(fs::exists(dir / kSingleFile), "no ", kSingleFile, " or ", kIndexFile, " in model directory ",
               dir.string());
    file_names.push_back(kSingleFile);
  }

  for (const std::string& file : file_names) {
    s.files.emplace_back(dir / file);
    const io::SafetensorsFile& f = s.files.back();
    if (s.files.size() == 1) s.metadata = f.metadata();
    for (const io::TensorEntry& e : f.entries()) {
      ALPS_CHECK(!s.host.count(e.name), "tensor ", e.name, " appears in both ", s.file_of[e.name], " and ", file);
      if (!indexed.empty()) {
        auto it = indexed.find(e.name);
        ALPS_CHECK(it != indexed.end() && it->second == file, e.name, " in ", file, ": the index ", kIndexFile,
                   it == indexed.end() ? std::string(" does not list it") : " places it in " + it->second);
      }
      s.host[e.name] = f.tensor(e.name);
      s.file_of[e.name] = file;
      s.order.push_back(e.name);
    }
  }
  for (const auto& [name, file] : indexed)
    ALPS_CHECK(s.host.count(name), "tensor ", name, " listed in ", kIndexFile, " is missing from ", file);

  // Every expected tensor present with the config's shape and a float dtype; nothing unexpected.
  std::set<std::string> expected;
  for (const TensorSpec& spec : s.arch->tensor_specs()) {
    expected.insert(spec.name);
    auto it = s.host.find(spec.name);
    if (it == s.host.end()) {
      ALPS_CHECK(spec.optional, "missing tensor ", spec.name, " (", shape_str(spec.shape), ") in ",
                 (dir / file_names.front()).string(), file_names.size() > 1 ? " and the other shards" : "");
      continue;
    }
    const at::Tensor& t = it->second;
    const std::string where = spec.name + " in " + s.file_of[spec.name];
    ALPS_CHECK(t.sizes() == c10::IntArrayRef(spec.shape), where, ": expected ", shape_str(spec.shape), ", got ",
               shape_str(t.sizes()), " (from config.json of ", s.config.architecture, ")");
    const auto dt = t.scalar_type();
    ALPS_CHECK(dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16, where, ": expected dtype F32, F16 or BF16, got ",
               io::dtype_to_safetensors(dt));
  }
  for (const std::string& name : s.order)
    ALPS_CHECK(expected.count(name) || is_ignored_buffer(name), "unexpected tensor ", name, " in ", s.file_of[name],
               " for ", s.config.architecture, " with ", s.config.num_layers, " layers");
  spdlog::debug("loaded {} ({} tensors, {} files) from {}", s.config.architecture, s.host.size(), s.files.size(),
                dir.string());
  return m;
}

const ModelConfig& CausalLM::config() const { return state_->config; }
const fs::path& CausalLM::dir() const { return state_->dir; }
int64_t CausalLM::num_blocks() const { return state_->config.num_layers; }
std::vector<std::string> CausalLM::linear_names() const { return state_->arch->linear_names(); }

std::string CausalLM::weight_name(int64_t block, const std::string& linear) const {
  ALPS_CHECK(block >= 0 && block < num_blocks(), "block index ", block, " out of range [0, ", num_blocks(), ")");
  return state_->arch->block_prefix(block) + linear + ".weight";
}

void CausalLM::set_compute(c10::Device device, c10::ScalarType dtype) {
  ALPS_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
             "compute dtype must be fp32, fp64, fp16 or bf16");
  ALPS_CHECK(device.is_cuda() || dtype == at::kFloat || dtype == at::kDouble, "compute dtype ", c10::toString(dtype),
             " needs a CUDA device; CPU computes in fp32");
  state_->device = device;
  state_->dtype = dtype;
  state_->resident.clear();
}
c10::Device CausalLM::compute_device() const { return state_->device; }
c10::ScalarType CausalLM::compute_dtype() const { return state_->dtype; }

void CausalLM::load_all() {
  for (const std::string& name : state_->arch->non_block_tensors())
    if (state_->host.count(name)) state_->make_resident(name);
  for (int64_t i = 0; i < num_blocks(); ++i) load_block(i);
}

void CausalLM::load_block(int64_t i) {
  const std::string prefix = state_->arch->block_prefix(i);
  for (const auto& [name, t] : state_->host)
    if (name.compare(0, prefix.size(), prefix) == 0) state_->make_resident(name);
}

void CausalLM::unload_block(int64_t i) {
  const std::string prefix = state_->arch->block_prefix(i);
  for (auto it = state_->resident.begin(); it != state_->resident.end();)
    it = it->first.compare(0, prefix.size(), prefix) == 0 ? state_->resident.erase(it) : std::next(it);
}

void KVCache::pad_to(const at::Tensor& lengths) {
  ALPS_CHECK(lengths.dim() == 1 && !blocks.empty() && lengths.size(0) == blocks.front().keys.size(0),
             "KV cache: expected one length per cached sequence");
  const at::Tensor n = lengths.to(blocks.front().keys.device(), at::kLong);
  ALPS_CHECK(n.numel() == 0 || (n.min().item<int64_t>() >= 1 && n.max().item<int64_t>() <= length()),
             "KV cache: sequence lengths must lie in [1, ", length(), "]");
  next_position = n;
  hidden_keys = at::arange(length(), n.options()).unsqueeze(0) >= n.unsqueeze(1);
}

KVCache KVCache::select_rows(const at::Tensor& rows) const {
  KVCache out;
  for (const BlockCache& b : blocks) {
    const at::Tensor r = rows.to(b.keys.device(), at::kLong);
    out.blocks.push_back({b.keys.index_select(0, r), b.values.index_select(0, r)});
  }
  const at::Tensor r = rows.to(at::kLong);
  if (next_position.defined()) out.next_position = next_position.index_select(0, r.to(next_position.device()));
  if (hidden_keys.defined()) out.hidden_keys = hidden_keys.index_select(0, r.to(hidden_keys.device()));
  return out;
}

KVCache KVCache::concat(const std::vector<KVCache>& parts) {
  ALPS_CHECK(!parts.empty(), "KV cache: nothing to concatenate");
  int64_t width = 0;
  bool ragged = false;
  for (const KVCache& p : parts) {
    ALPS_CHECK(p.blocks.size() == parts.front().blocks.size() && p.length() > 0,
               "KV cache: only filled caches of one model concatenate");
    ragged = ragged || p.hidden_keys.defined() || p.next_position.defined() || p.length() != parts.front().length();
    width = std::max(width, p.length());
  }
  KVCache out;
  for (size_t b = 0; b < parts.front().blocks.size(); ++b) {
    std::vector<at::Tensor> keys, values;
    for (const KVCache& p : parts) {
      const BlockCache& c = p.blocks[b];
      const int64_t pad = width - c.length();
      keys.push_back(pad > 0 ? at::constant_pad_nd(c.keys, {0, 0, 0, pad}) : c.keys);
      values.push_back(pad > 0 ? at::constant_pad_nd(c.values, {0, 0, 0, pad}) : c.values);
    }
    out.blocks.push_back({at::cat(keys), at::cat(values)});
  }
  if (ragged) {
    std::vector<at::Tensor> next, hidden;
    for (const KVCache& p : parts) {
      const at::TensorOptions on = at::TensorOptions(p.blocks.front().keys.device());
      const int64_t rows = p.blocks.front().keys.size(0), pad = width - p.length();
      next.push_back(p.next_position.defined() ? p.next_position
                                               : at::full({rows}, p.length(), on.dtype(at::kLong)));
      at::Tensor h = p.hidden_keys.defined() ? p.hidden_keys : at::zeros({rows, p.length()}, on.dtype(at::kBool));
      hidden.push_back(pad > 0 ? at::cat({h, at::ones({rows, pad}, h.options())}, 1) : h);
    }
    out.next_position = at::cat(next);
    out.hidden_keys = at::cat(hidden);
  }
  return out;
}

int64_t KVCache::bytes_per_slot() const {
  int64_t bytes = 0;
  for (const BlockCache& b : blocks)
    if (b.keys.defined()) bytes += 2 * b.keys.size(1) * b.keys.size(3) * static_cast<int64_t>(b.keys.element_size());
  return bytes;
}

namespace {

void check_hidden(const ModelConfig& c, int64_t i, const at::Tensor& hidden) {
  ALPS_CHECK(hidden.dim() == 3 && hidden.size(2) == c.hidden_size, "block ", i, " input: expected [batch, seq, ",
             c.hidden_size, "], got ", shape_str(hidden.sizes()));
}

}  // namespace

at::Tensor CausalLM::embed(const at::Tensor& ids) const { return embed_at(ids, Placement{}); }

at::Tensor CausalLM::embed_at(const at::Tensor& ids, const Placement& at) const {
  const ModelConfig& c = state_->config;
  ALPS_CHECK(ids.dim() == 2, "token ids: expected [batch, seq], got ", shape_str(ids.sizes()));
  ALPS_CHECK(at.past + ids.size(1) <= c.max_sequence_length(), "sequence of ", at.past + ids.size(1),
             " tokens exceeds the model's ", c.max_positions, " positions (max_position_embeddings in ",
             (state_->dir / "config.json").string(), ")");
  at::Tensor x = ids.to(state_->device, at::kLong);
  if (x.numel() > 0) {
    const int64_t lo = x.min().item<int64_t>(), hi = x.max().item<int64_t>();
    ALPS_CHECK(lo >= 0 && hi < c.vocab_size, "token ids must lie in [0, ", c.vocab_size, "), got [", lo, ", ", hi, "]");
  }
  return state_->arch->embed(state_->weight_fn(), x, at);
}

at::Tensor CausalLM::block_forward(int64_t i, const at::Tensor& hidden, const LinearObserver* observer) const {
  ALPS_CHECK(i >= 0 && i < num_blocks(), "block index ", i, " out of range [0, ", num_blocks(), ")");
  check_hidden(state_->config, i, hidden);
  return state_->arch->block_forward(state_->weight_fn(), i, hidden.to(state_->device, state_->dtype), observer,
                                     nullptr, Placement{});
}

bool CausalLM::cache_exact(int64_t length) const { return state_->arch->cache_exact(length); }

at::Tensor CausalLM::head(const at::Tensor& hidden) const {
  return state_->arch->head(state_->weight_fn(), hidden.to(state_->device, state_->dtype));
}

at::Tensor CausalLM::hidden_states(const at::Tensor& ids, KVCache* cache) const {
  if (cache == nullptr) {
    at::Tensor h = embed(ids);
    for (int64_t i = 0; i < num_blocks(); ++i) h = block_forward(i, h);
    return h;
  }
  ALPS_CHECK(ids.dim() == 2, "token ids: expected [batch, seq], got ", shape_str(ids.sizes()));
  cache->blocks.resize(static_cast<size_t>(num_blocks()));
  const int64_t B = ids.size(0), T = ids.size(1);
  ALPS_CHECK(cache->length() == 0 || cache->blocks.front().keys.size(0) == B, "a KV cache of ",
             cache->blocks.front().keys.size(0), " sequences continued by a batch of ", B);
  Placement at;
  at.past = cache->length();
  if (cache->next_position.defined())
    at.positions = cache->next_position.unsqueeze(1) + at::arange(T, cache->next_position.options());
  if (cache->hidden_keys.defined())
    at.hidden_keys = at::cat({cache->hidden_keys, at::zeros({B, T}, cache->hidden_keys.options())}, 1);
  at::Tensor h = embed_at(ids, at);
  for (int64_t i = 0; i < num_blocks(); ++i)
    h = state_->arch->block_forward(state_->weight_fn(), i, h, nullptr, &cache->blocks[static_cast<size_t>(i)], at);
  if (cache->next_position.defined()) cache->next_position = cache->next_position + T;
  cache->hidden_keys = at.hidden_keys;
  return h;
}

at::Tensor CausalLM::forward(const at::Tensor& ids, KVCache* cache, bool last_only) const {
  const at::Tensor h = hidden_states(ids, cache);
  return head(last_only ? h.narrow(1, h.size(1) - 1, 1) : h);
}

std::vector<std::string> CausalLM::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : state_->host) names.push_back(name);
  return names;
}

at::Tensor CausalLM::tensor(const std::string& name) const {
  auto it = state_->host.find(name);
  ALPS_CHECK(it != state_->host.end(), "tensor '", name, "' is not part of the checkpoint in ", state_->dir.string());
  return it->second;
}

void CausalLM::set_tensor(const std::string& name, const at::Tensor& value) {
  auto it = state_->host.find(name);
  ALPS_CHECK(it != state_->host.end(), "set_tensor: '", name, "' is not part of the checkpoint in ",
             state_->dir.string());
  ALPS_CHECK(value.sizes() == it->second.sizes(), "set_tensor ", name, ": expected ", shape_str(it->second.sizes()),
             ", got ", shape_str(value.sizes()));
  // A private host copy: never alias the caller's tensor or write through to the mapped file.
  it->second = value.detach().to(at::kCPU, it->second.scalar_type()).contiguous().clone();
  if (state_->resident.count(name)) state_->make_resident(name);
}

std::string CausalLM::first_non_finite_tensor() const {
  for (const std::string& name : state_->order) {
    const at::Tensor& t = state_->host.at(name);
    if (!at::isfinite(t).all().item<bool>()) return name + " in " + (state_->dir / state_->file_of.at(name)).string();
  }
  return "";
}

void CausalLM::check_finite_result(double result, const std::string& what) const {
  if (std::isfinite(result)) return;
  const std::string bad = first_non_finite_tensor();
  const std::string value = std::isnan(result) ? "NaN" : result > 0 ? "+Inf" : "-Inf";
  ALPS_CHECK(bad.empty(), what, " is ", value, ": tensor ", bad, " holds NaN or Inf");
  ALPS_FAIL(what, " is ", value, " although every weight in ", state_->dir.string(), " is finite: the forward pass ",
            "overflowed in ", dtype_name(state_->dtype), " (fp16 ends at 65504; fp32 or bf16 has more range)");
}

int64_t CausalLM::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : state_->host)
    if (!is_ignored_buffer(name)) n += t.numel();
  return n;
}

void CausalLM::save(const fs::path& out_dir, const SaveOptions& options) const {
  ALPS_CHECK(fs::weakly_canonical(out_dir) != fs::weakly_canonical(state_->dir), "cannot save over the loaded checkpoint ",
             state_->dir.string(), " (its tensors are memory-mapped)");
  io::StagedPath staged(out_dir);
  fs::create_directories(staged.temp());
  write_files(staged.temp(), options);
  staged.commit();
}

std::vector<std::string> CausalLM::write_files(const fs::path& dir, const SaveOptions& options) const {
  const State& s = *state_;
  std::vector<std::string> written;
  // config, generation config and tokenizer files travel unchanged; weights are rewritten below.
  for (const auto& entry : fs::directory_iterator(s.dir)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    // Weights in any format are not copied: a stale pytorch_model.bin next to pruned safetensors would be wrong.
    if (!entry.is_regular_file() || name == kIndexFile || name == "pytorch_model.bin.index.json" ||
        ext == ".safetensors" || (ext == ".bin" && name.rfind("pytorch_model", 0) == 0) || ext == ".pth" ||
        ext == ".ckpt")
      continue;
    fs::copy_file(entry.path(), dir / name);
    written.push_back(name);
  }

  // Greedy split in input order: a shard is closed when the next tensor would take it over the limit.
  std::vector<std::vector<std::string>> shards(1);
  int64_t total = 0, in_shard = 0;
  for (const std::string& name : s.order) {
    const int64_t bytes = static_cast<int64_t>(s.host.at(name).nbytes());
    if (in_shard > 0 && in_shard + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(name);
    in_shard += bytes;
    total += bytes;
  }
  const bool sharded = total > options.max_shard_bytes;
  if (!sharded) shards = {s.order};

  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    const std::string file = sharded ? std::string(buf) : kSingleFile;
    std::vector<io::TensorEntry> layout;
    for (const std::string& name : shards[k]) {
      layout.push_back(io::entry_for(name, s.host.at(name)));
      weight_map[name] = file;
    }
    io::SafetensorsWriter writer(dir / file, layout, s.metadata);
    for (const std::string& name : shards[k]) writer.write(name, s.host.at(name));
    writer.finish();
    written.push_back(file);
  }
  if (sharded) {
    std::ofstream out(dir / kIndexFile);
    out << nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) << "\n";
    ALPS_CHECK(out.good(), "cannot write ", (dir / kIndexFile).string());
    written.push_back(kIndexFile);
  }
  spdlog::info("wrote {} tensors ({:.1f} MB, {} file{})", s.order.size(), total / 1e6, shards.size(),
               shards.size() > 1 ? "s" : "");
  return written;
}

}  // namespace alps::model
