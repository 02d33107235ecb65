#pragma once
// A causal LM is an embedding stage, a list of transformer blocks and a head. The pruning pipeline drives it block
// by block; evaluation runs it whole. Weights live on the host in their checkpoint dtype (memory-mapped where
// possible) and are made resident on the compute device per block, so a 7B model prunes with one block on the GPU.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "alps/model/config.h"
#include "alps/model/kv_cache.h"

namespace alps::model {

using TensorMap = std::map<std::string, at::Tensor>;

/// Sees the input of every prunable linear during a block forward: the linear's short name ("self_attn.q_proj")
/// and its input activations [batch, seq, in] on the compute device.
using LinearObserver = std::function<void(const std::string& linear, const at::Tensor& input)>;

/// Sees, during an observed forward of a mixture block, each expert's output [n, hidden] (before its routing weight)
/// on the n tokens routed to it, and those tokens' routing probabilities [n] (fp32, the softmax over every expert).
using ExpertObserver = std::function<void(int64_t expert, const at::Tensor& probability, const at::Tensor& output)>;

/// What structured pruning removes from a block (docs/structured.md): MLP neurons, query heads (the same count from
/// each key/value group), whole key/value groups with their query heads, or a mixture's experts (docs/moe.md).
enum class Structure { neurons, heads, kv_groups, experts };

/// A run of a tensor's rows, from where the run before it ended: `width` rows for each of the rule's units in turn,
/// or, with width 0, `rows` rows that belong to no unit and all stay.
struct RowRun {
  int64_t width = 1;
  int64_t rows = 0;
};

/// A tensor of a block whose rows follow the removed units, as runs from its top that cover every row: a gate_proj
/// is one run of width 1, a fused gate_up_proj two (the gate's rows, then the up's), a fused qkv_proj losing query
/// heads one of head_dim rows then one kept whole (its keys and values).
struct UnitRows {
  std::string tensor;  ///< short name in the block, "mlp.gate_proj.weight"
  std::vector<RowRun> runs = {RowRun{}};
};

/// How units of one kind leave one linear's input in block i: the linear whose input columns the units are (`width`
/// columns each, in `parts` equal consecutive parts that must keep equal counts), the tensors whose rows follow them,
/// and the config.json field that states their count. A block may have several (a mixture: each expert's neurons,
/// the shared expert's). A family or block without one says why in `refusal`.
struct UnitRule {
  std::string refusal;   ///< non-empty: this kind of unit cannot be removed here, and why
  std::string consumer;  ///< short linear name, "mlp.down_proj", "mlp.experts.3.down_proj"
  std::string field;     ///< "intermediate_size", "moe_intermediate_size", "num_attention_heads", ...
  int64_t units = 0;
  int64_t width = 1;
  int64_t parts = 1;
  /// The kept count must be a multiple of it: transformers multiplies a mixture's experts in grouped products
  /// (torch's grouped_mm), whose rows must be whole multiples of 16 bytes, 8 values of bf16.
  int64_t multiple = 1;
  std::vector<UnitRows> rows;

  /// No rule here, and why.
  static UnitRule refused(std::string why) {
    UnitRule r;
    r.refusal = std::move(why);
    return r;
  }
};

/// What CausalLM::keep_experts changed: each tensor renamed or removed, full names, old -> new ("" when removed), and
/// the router, whose rows changed.
struct KeptExperts {
  std::map<std::string, std::string> renamed;
  std::string router;
};

struct SaveOptions {
  /// Above this many bytes the weights are split into model-0000i-of-0000n.safetensors shards plus an index.
  int64_t max_shard_bytes = 5'000'000'000;
};

class Architecture;  // per-family forward (llama.cc, opt.cc)
struct Placement;   // where a forward's tokens sit (architecture.h)

class CausalLM {
 public:
  /// Loads and validates a Hugging Face checkpoint directory (config.json, model.safetensors or sharded with
  /// model.safetensors.index.json). Errors name the file and the tensor.
  static CausalLM load(const std::filesystem::path& dir);
  CausalLM(CausalLM&&) noexcept;
  CausalLM& operator=(CausalLM&&) noexcept;
  ~CausalLM();

  const ModelConfig& config() const;
  const std::filesystem::path& dir() const;
  int64_t num_blocks() const;
  /// Bytes of attention scores a forward over [batch, seqlen] new positions holds at once where its attention runs
  /// in batched steps (a GPU; half precision adds the fp32 softmax and its cast back), for memory estimates.
  int64_t attention_scores_bytes(int64_t batch, int64_t seqlen, c10::ScalarType dtype) const;
  /// Prunable linears of block i, short names in execution order (OPT: self_attn.{q,k,v,out}_proj, fc1, fc2;
  /// LLaMA: self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj; a mixture of experts: each expert's
  /// mlp.experts.{e}.{gate,up,down}_proj in place of the MLP's).
  std::vector<std::string> linear_names(int64_t block) const;
  /// Checkpoint name of block i's linear weight, e.g. "model.layers.3.self_attn.q_proj.weight".
  std::string weight_name(int64_t block, const std::string& linear) const;

  /// Device and dtype of every forward computation (default CPU fp32). Resident copies are dropped.
  void set_compute(c10::Device device, c10::ScalarType dtype);
  c10::Device compute_device() const;
  c10::ScalarType compute_dtype() const;
  /// Makes all weights resident on the compute device (evaluation, generation) / drops every resident copy.
  void load_all();
  void unload_all();
  /// Makes block i resident / drops its resident copy. A forward on a non-resident block copies it for that call.
  void load_block(int64_t i);
  void unload_block(int64_t i);
  /// The same for the tensors outside the blocks (embeddings, final norm, head).
  void load_non_block();
  void unload_non_block();

  /// Token ids [batch, seq] (int64) at positions 0 .. seq - 1 -> hidden states entering block 0,
  /// [batch, seq, hidden], compute dtype.
  at::Tensor embed(const at::Tensor& ids) const;
  /// Block i on hidden [batch, seq, hidden] (causal attention over the whole sequence, positions 0..seq-1).
  at::Tensor block_forward(int64_t i, const at::Tensor& hidden, const LinearObserver* observer = nullptr) const;
  /// Block i's forward for its linears' inputs only: `observer` sees each of them as in block_forward, and the
  /// block's output, which needs the last linear's product and is not wanted here, is not computed.
  /// `outputs`, when set, sees a mixture block's experts' outputs (the down projections then run); with `router`,
  /// the observer sees a mixture block's router (router_name) too, first of the linears that read the MLP's input.
  void observe_block(int64_t i, const at::Tensor& hidden, const LinearObserver& observer,
                     ExpertInputs experts = ExpertInputs::routed, const ExpertObserver* outputs = nullptr,
                     bool router = false) const;
  /// Final norm / projection and lm_head: hidden -> logits [batch, seq, vocab] in fp32.
  at::Tensor head(const at::Tensor& hidden) const;
  /// embed and every block: the final hidden states [batch, seq, hidden]. With a cache, ids continue its
  /// sequences and extend it.
  at::Tensor hidden_states(const at::Tensor& ids, KVCache* cache = nullptr) const;
  /// Final hidden states [batch, seq, hidden] of sequences that each hold several token trees (inputs that share
  /// a prefix hold it once): `positions` [batch, seq] int64 is each token's depth in its tree, and `hidden`
  /// [batch, seq, seq] bool hides from each token every key that is neither the token nor one of its ancestors
  /// (which come before it). A token's state is the one a forward over its root-to-token path alone gives (up to
  /// rounding) while every depth is below the model's sliding windows.
  at::Tensor packed_hidden_states(const at::Tensor& ids, const at::Tensor& positions, const at::Tensor& hidden) const;
  /// hidden_states, then the head. `last_only`: the head runs on the last position only (logits [batch, 1, vocab]).
  at::Tensor forward(const at::Tensor& ids, KVCache* cache = nullptr, bool last_only = false) const;
  /// Whether a cache extended up to `length` positions gives what one forward over them gives (up to rounding).
  /// False only where a position's encoding depends on the sequence's length (dynamic RoPE scaling beyond
  /// max_position_embeddings): recompute from an empty cache there.
  bool cache_exact(int64_t length) const;

  /// How `s` units leave block i as its tensors are now (the counts of units read from their shapes): one rule per
  /// linear whose input they are; a refusal is the only rule.
  std::vector<UnitRule> unit_rules(int64_t block, Structure s) const;
  /// Keeps `kept` (ascending) of the units of `rule` (one of block i's unit_rules): their rows of every tensor that
  /// follows them, and `consumer_weight` [out, kept * width] as the consumer linear's weight. Returns the names of
  /// the tensors changed.
  std::vector<std::string> keep_units(int64_t block, const UnitRule& rule, const std::vector<int64_t>& kept,
                                      const at::Tensor& consumer_weight);
  /// Experts of block i as its tensors are now (0: no mixture).
  int64_t num_experts(int64_t block) const;
  /// Block i's router, a linear of a row per expert, within the block ("mlp.gate"); "" where the block has no
  /// mixture. Not among linear_names: it stays dense unless a recipe rule names it.
  std::string router_name(int64_t block) const;
  /// Keeps `kept` (ascending) of block i's experts: the router keeps their rows, the others' tensors go, and the
  /// kept ones are renumbered 0 .. kept - 1 as the output names them.
  KeptExperts keep_experts(int64_t block, const std::vector<int64_t>& kept);
  /// The config.json fields that the stored tensors' shapes give where they differ from config.json (a structured
  /// run's intermediate_size, num_attention_heads, num_key_value_heads, head_dim, num_experts), under
  /// ModelConfig::config_section where the checkpoint nests them; empty when none does. Throws if the blocks disagree,
  /// which no standard config can state.
  nlohmann::json config_of_shapes() const;

  /// Number of stored parameters (tied weights counted once).
  int64_t num_parameters() const;
  /// Bytes of the weight files the model was loaded from (the single file or the index's shards).
  int64_t weight_file_bytes() const;

  /// Host tensor in the checkpoint's dtype.
  at::Tensor tensor(const std::string& name) const;
  /// Replaces a weight (same shape; stored on the host in the checkpoint dtype, resident copy refreshed).
  void set_tensor(const std::string& name, const at::Tensor& value);
  /// set_tensor for a tensor whose shape structured pruning changed (keep_units; a resumed run's saved blocks).
  void reshape_tensor(const std::string& name, const at::Tensor& value);
  /// set_tensor for a value handed over: `host`, a contiguous host tensor in the checkpoint's dtype that nothing else
  /// writes, is kept as it is, without a copy.
  void adopt_tensor(const std::string& name, at::Tensor host);
  /// Drops what set_tensor put there: `name` reads the checkpoint's own tensor again (its mapped file's pages), and
  /// the memory of the replacement goes back. Not for a resident tensor (a block loaded on the device).
  void release_tensor(const std::string& name);
  /// "NAME in FILE" for the first tensor (checkpoint order) holding NaN or Inf, empty when every one is finite. A
  /// scan of all weights: for explaining a non-finite result, not for every forward pass.
  std::string first_non_finite_tensor() const;
  /// Throws alps::Error unless `result` is finite: `what` (e.g. "perplexity of window 3") names the result, the
  /// message names the first non-finite weight, or says that the forward pass overflowed with finite weights.
  void check_finite_result(double result, const std::string& what) const;

  /// Writes the checkpoint files in the input's layout (config.json, generation_config.json, tokenizer files
  /// copied, safetensors sharded above SaveOptions::max_shard_bytes) into the existing directory `dir`; returns
  /// the names of the files written.
  std::vector<std::string> write_files(const std::filesystem::path& dir, const SaveOptions& options = {}) const;
  /// Writes a new checkpoint directory: staged under a temporary name and renamed into place, so it appears
  /// complete or not at all. An existing `out_dir` that is not empty is refused, never replaced.
  void save(const std::filesystem::path& out_dir, const SaveOptions& options = {}) const;

 private:
  CausalLM();
  at::Tensor embed_at(const at::Tensor& ids, const Placement& at) const;
  at::Tensor run_block(int64_t i, const at::Tensor& hidden, const LinearObserver* observer, const Placement& at) const;
  /// The stored tensor `value` replaces, checked to exist and to have its shape (`what` names the caller).
  at::Tensor& stored_for(const std::string& name, const at::Tensor& value, const char* what);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace alps::model
