#include "alps/model/causal_lm.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/strings.h"
#include "alps/io/safetensors.h"
#include "alps/io/staged_path.h"
#include "model/architecture.h"
#include "model/causal_lm_state.h"
#include "model/fused_experts.h"
#include "model/stored_weights.h"

namespace alps::model {

namespace fs = std::filesystem;

namespace {

// The config.json values a linear's expected shape comes from, in words (each family names them its own way), with
// " in " after them: a stored shape that disagrees points at one of them, or at a checkpoint written for another
// config. "" for other tensors.
std::string shape_source(const std::string& name) {
  auto ends = [&](const char* linear) { return ends_with(name, std::string(linear) + ".weight"); };
  if (ends("qkv_proj")) return "the query and key/value head counts, head_dim and hidden_size in ";
  if (ends("q_proj") || ends("o_proj")) return "the query head count, head_dim and hidden_size in ";
  if (ends("k_proj") || ends("v_proj")) return "the key/value head count, head_dim and hidden_size in ";
  for (const char* mlp : {"gate_up_proj", "gate_proj", "up_proj", "down_proj", "w1", "w2", "w3", "fc1", "fc2"})
    if (ends(mlp)) return "the MLP's (or an expert's) intermediate size and hidden_size in ";
  return "";
}

// Older LLaMA checkpoints store the RoPE table; it is recomputed from the config, so it is carried but not used.
bool is_ignored_buffer(const std::string& name) { return ends_with(name, "rotary_emb.inv_freq"); }

std::unique_ptr<Architecture> make_architecture(const ModelConfig& c) {
  const ArchitectureEntry* a = find_architecture(c.architecture);
  ALPS_CHECK(a != nullptr, "unknown architecture '", c.architecture, "' (supported: ", supported_architectures(), ")");
  return a->make(c);
}

}  // namespace

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
  s.stored = read_weights(dir);
  // transformers 5 names a fused checkpoint's router and experts under mlp.experts.* whatever the family (Mixtral's
  // block_sparse_moe.experts.{e}.w1 included); alps holds its experts as the per-expert layout with those names.
  const std::string fused = unfuse_experts(s.stored);
  if (!fused.empty()) {
    ALPS_CHECK(s.config.moe.has_value(), fused, " in ", dir.string(), ": fused experts in a ", s.config.architecture,
               " checkpoint, whose config.json describes no mixture of experts");
    s.config.moe->naming = ExpertNaming::qwen;
    s.config.moe->fused = true;
  }
  s.arch = make_architecture(s.config);

  // Every expected tensor present with the config's shape and a float dtype; nothing unexpected.
  std::set<std::string> expected;
  for (const TensorSpec& spec : s.arch->tensor_specs()) {
    expected.insert(spec.name);
    auto it = s.stored.host.find(spec.name);
    if (it == s.stored.host.end()) {
      ALPS_CHECK(spec.optional, "missing tensor ", spec.name, " (", shape_str(spec.shape), ") in ",
                 (dir / s.stored.file_names.front()).string(),
                 s.stored.file_names.size() > 1 ? " and the other shards" : "");
      continue;
    }
    const at::Tensor& t = it->second;
    const std::string where = spec.name + " in " + s.stored.file_of[spec.name];
    ALPS_CHECK(t.sizes() == c10::IntArrayRef(spec.shape), where, ": expected ", shape_str(spec.shape), ", got ",
               shape_str(t.sizes()), " (from ", shape_source(spec.name), "config.json of ", s.config.architecture, ")");
    const auto dt = t.scalar_type();
    ALPS_CHECK(dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16, where,
               ": expected dtype F32, F16 or BF16, got ", io::dtype_to_safetensors(dt));
  }
  for (const std::string& name : s.stored.order)
    ALPS_CHECK(expected.count(name) || is_ignored_buffer(name) || s.arch->carried(name), "unexpected tensor ", name,
               " in ", s.stored.file_of[name], " for ", s.config.architecture, " with ", s.config.num_layers,
               " layers");
  spdlog::debug("loaded {} ({} tensors, {} files) from {}", s.config.architecture, s.stored.host.size(),
                s.stored.files.size(), dir.string());
  return m;
}

const ModelConfig& CausalLM::config() const { return state_->config; }
const fs::path& CausalLM::dir() const { return state_->dir; }
int64_t CausalLM::num_blocks() const { return state_->config.num_layers; }
int64_t CausalLM::attention_scores_bytes(int64_t batch, int64_t seqlen, c10::ScalarType dtype) const {
  const int64_t scores = std::min(kBatchedStepScores, batch * state_->config.num_heads * seqlen * seqlen);
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  return scores * (dtype == c10::kFloat || dtype == c10::kDouble ? element : 2 * element + 4);
}
std::vector<std::string> CausalLM::linear_names(int64_t block) const {
  return state_->arch->linear_names(block, shapes_of(*this));
}

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
  load_non_block();
  for (int64_t i = 0; i < num_blocks(); ++i) load_block(i);
}

void CausalLM::unload_all() {
  unload_non_block();
  for (int64_t i = 0; i < num_blocks(); ++i) unload_block(i);
}

void CausalLM::load_non_block() {
  for (const std::string& name : state_->arch->non_block_tensors())
    if (state_->stored.host.count(name)) state_->make_resident(name);
}

void CausalLM::unload_non_block() {
  for (const std::string& name : state_->arch->non_block_tensors()) state_->resident.erase(name);
}

void CausalLM::load_block(int64_t i) {
  const std::string prefix = state_->arch->block_prefix(i);
  for (const auto& [name, t] : state_->stored.host)
    if (name.compare(0, prefix.size(), prefix) == 0) state_->make_resident(name);
}

void CausalLM::unload_block(int64_t i) {
  const std::string prefix = state_->arch->block_prefix(i);
  for (auto it = state_->resident.begin(); it != state_->resident.end();)
    it = it->first.compare(0, prefix.size(), prefix) == 0 ? state_->resident.erase(it) : std::next(it);
}

at::Tensor CausalLM::embed(const at::Tensor& ids) const { return embed_at(ids, Placement{}); }

at::Tensor CausalLM::embed_at(const at::Tensor& ids, const Placement& at) const {
  const ModelConfig& c = state_->config;
  ALPS_CHECK(ids.dim() == 2, "token ids: expected [batch, seq], got ", shape_str(ids.sizes()));
  ALPS_CHECK(at.sequence_length(ids.size(1)) <= c.max_sequence_length(), "sequence of ",
             at.sequence_length(ids.size(1)), " tokens exceeds the model's ", c.max_positions,
             " positions (max_position_embeddings in ", (state_->dir / "config.json").string(), ")");
  at::Tensor x = ids.to(state_->device, at::kLong);
  if (x.numel() > 0) {
    const int64_t lo = x.min().item<int64_t>(), hi = x.max().item<int64_t>();
    ALPS_CHECK(lo >= 0 && hi < c.vocab_size, "token ids must lie in [0, ", c.vocab_size, "), got [", lo, ", ", hi, "]");
  }
  return state_->arch->embed(state_->weight_fn(), x, at);
}

at::Tensor CausalLM::block_forward(int64_t i, const at::Tensor& hidden, const LinearObserver* observer) const {
  return run_block(i, hidden, observer, Placement{});
}

void CausalLM::observe_block(int64_t i, const at::Tensor& hidden, const LinearObserver& observer, ExpertInputs experts,
                             const ExpertObserver* outputs, bool router) const {
  Placement at;
  at.inputs_only = true;
  at.all_experts = experts == ExpertInputs::all;
  at.show_router = router;
  at.expert_outputs = outputs;
  run_block(i, hidden, &observer, at);
}

at::Tensor CausalLM::run_block(int64_t i, const at::Tensor& hidden, const LinearObserver* observer,
                               const Placement& at) const {
  ALPS_CHECK(i >= 0 && i < num_blocks(), "block index ", i, " out of range [0, ", num_blocks(), ")");
  ALPS_CHECK(hidden.dim() == 3 && hidden.size(2) == state_->config.hidden_size, "block ", i,
             " input: expected [batch, seq, ", state_->config.hidden_size, "], got ", shape_str(hidden.sizes()));
  return state_->arch->block_forward(state_->weight_fn(), i, hidden.to(state_->device, state_->dtype), observer,
                                     nullptr, at);
}

bool CausalLM::cache_exact(int64_t length) const { return state_->arch->cache_exact(length); }

at::Tensor CausalLM::head(const at::Tensor& hidden) const {
  return state_->arch->head(state_->weight_fn(), hidden.to(state_->device, state_->dtype));
}

at::Tensor CausalLM::hidden_states(const at::Tensor& ids, KVCache* cache) const {
  ALPS_CHECK(ids.dim() == 2, "token ids: expected [batch, seq], got ", shape_str(ids.sizes()));
  const int64_t B = ids.size(0);
  Placement at;
  if (cache != nullptr) {
    cache->blocks.resize(static_cast<size_t>(num_blocks()));
    ALPS_CHECK(cache->length() == 0 || cache->blocks.front().keys.size(0) == B, "a KV cache of ",
               cache->blocks.front().keys.size(0), " sequences continued by a batch of ", B);
    at.past = cache->length();
  }
  at::Tensor h = embed_at(ids, at);
  for (int64_t i = 0; i < num_blocks(); ++i)
    h = state_->arch->block_forward(state_->weight_fn(), i, h, nullptr,
                                    cache != nullptr ? &cache->blocks[static_cast<size_t>(i)] : nullptr, at);
  return h;
}

at::Tensor CausalLM::packed_hidden_states(const at::Tensor& ids, const at::Tensor& positions,
                                          const at::Tensor& hidden) const {
  ALPS_CHECK(ids.dim() == 2 && positions.sizes() == ids.sizes() && hidden.dim() == 3 && hidden.size(0) == ids.size(0) &&
                 hidden.size(1) == ids.size(1) && hidden.size(2) == ids.size(1),
             "packed sequences: token ids ", shape_str(ids.sizes()), ", positions ", shape_str(positions.sizes()),
             ", hidden keys ", shape_str(hidden.sizes()), " (expected [batch, seq], [batch, seq], [batch, seq, seq])");
  Placement at;
  at.packed = true;
  at.positions = positions.to(state_->device, at::kLong);
  at.hidden_keys = hidden.to(state_->device, at::kBool);
  // A step of the attention starts at the first key one of its queries sees: in a sequence of short trees most
  // keys before a query belong to other trees.
  const at::Tensor seen = hidden.to(at::kCPU, at::kBool).logical_not().contiguous();
  at.first_keys = at::empty({ids.size(0), ids.size(1)}, at::kLong);
  const int64_t B = ids.size(0), T = ids.size(1);
  const bool* v = seen.data_ptr<bool>();
  int64_t* first = at.first_keys.data_ptr<int64_t>();
  for (int64_t r = 0; r < B * T; ++r) {
    ALPS_CHECK(v[r * T + r % T], "packed sequences: token ", r % T, " of sequence ", r / T, " does not see itself");
    first[r] = std::find(v + r * T, v + (r + 1) * T, true) - (v + r * T);
  }
  if (ids.numel() > 0) at.length = positions.max().item<int64_t>() + 1;
  at::Tensor h = embed_at(ids, at);
  for (int64_t i = 0; i < num_blocks(); ++i)
    h = state_->arch->block_forward(state_->weight_fn(), i, h, nullptr, nullptr, at);
  return h;
}

at::Tensor CausalLM::forward(const at::Tensor& ids, KVCache* cache, bool last_only) const {
  const at::Tensor h = hidden_states(ids, cache);
  return head(last_only ? h.narrow(1, h.size(1) - 1, 1) : h);
}

at::Tensor CausalLM::tensor(const std::string& name) const {
  auto it = state_->stored.host.find(name);
  ALPS_CHECK(it != state_->stored.host.end(), "tensor '", name, "' is not part of the checkpoint in ",
             state_->dir.string());
  return it->second;
}

at::Tensor& CausalLM::stored_for(const std::string& name, const at::Tensor& value, const char* what) {
  auto it = state_->stored.host.find(name);
  ALPS_CHECK(it != state_->stored.host.end(), what, ": '", name, "' is not part of the checkpoint in ",
             state_->dir.string());
  ALPS_CHECK(value.sizes() == it->second.sizes(), what, " ", name, ": expected ", shape_str(it->second.sizes()),
             ", got ", shape_str(value.sizes()));
  return it->second;
}

void CausalLM::set_tensor(const std::string& name, const at::Tensor& value) {
  // A private host copy: never alias the caller's tensor or write through to the mapped file.
  adopt_tensor(name, to_host(value, stored_for(name, value, "set_tensor").scalar_type()));
}

void CausalLM::reshape_tensor(const std::string& name, const at::Tensor& value) {
  auto it = state_->stored.host.find(name);
  ALPS_CHECK(it != state_->stored.host.end(), "reshape_tensor: '", name, "' is not part of the checkpoint in ",
             state_->dir.string());
  it->second = to_host(value, it->second.scalar_type()).contiguous();
  if (state_->resident.count(name)) state_->resident[name] = it->second.to(state_->device, state_->dtype);
}

void CausalLM::adopt_tensor(const std::string& name, at::Tensor host) {
  at::Tensor& held = stored_for(name, host, "adopt_tensor");
  ALPS_CHECK(host.is_cpu() && host.scalar_type() == held.scalar_type() && host.is_contiguous(), "adopt_tensor ", name,
             ": expected a contiguous host tensor of the checkpoint's dtype");
  held = std::move(host);
  if (state_->resident.count(name)) state_->resident[name] = held.to(state_->device, state_->dtype);
}

void CausalLM::release_tensor(const std::string& name) {
  auto it = state_->stored.host.find(name);
  ALPS_CHECK(it != state_->stored.host.end(), "release_tensor: '", name, "' is not part of the checkpoint in ",
             state_->dir.string());
  ALPS_CHECK(!state_->resident.count(name), "release_tensor: '", name, "' is resident on the device");
  it->second = state_->stored.file_tensor(name);
}

std::string CausalLM::first_non_finite_tensor() const {
  for (const std::string& name : state_->stored.order) {
    const at::Tensor& t = state_->stored.host.at(name);
    if (!at::isfinite(t).all().item<bool>())
      return name + " in " + (state_->dir / state_->stored.file_of.at(name)).string();
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
  // A tied model runs its embedding as the head: an lm_head.weight stored beside it is never used.
  const bool unused_head = state_->config.tie_word_embeddings;
  for (const auto& [name, t] : state_->stored.host)
    if (!is_ignored_buffer(name) && !(unused_head && name == "lm_head.weight")) n += t.numel();
  return n;
}

int64_t CausalLM::weight_file_bytes() const {
  int64_t bytes = 0;
  for (const auto& name : state_->stored.file_names) bytes += static_cast<int64_t>(fs::file_size(state_->dir / name));
  return bytes;
}

void CausalLM::save(const fs::path& out_dir, const SaveOptions& options) const {
  ALPS_CHECK(fs::weakly_canonical(out_dir) != fs::weakly_canonical(state_->dir),
             "cannot save over the loaded checkpoint ", state_->dir.string(), " (its tensors are memory-mapped)");
  io::StagedPath staged(out_dir);
  fs::create_directories(staged.temp());
  write_files(staged.temp(), options);
  staged.commit();
}

std::vector<std::string> CausalLM::write_files(const fs::path& dir, const SaveOptions& options) const {
  return write_weights(state_->dir, dir, state_->stored, options.max_shard_bytes, config_of_shapes());
}

}  // namespace alps::model
