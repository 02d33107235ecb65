#pragma once
// Internal interface between CausalLM (storage, residency, validation, saving) and one model family's forward
// pass (llama.cc, opt.cc). A family states which tensors a checkpoint must hold and computes on weights it
// fetches by name, already on the compute device in the compute dtype.
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alps/model/causal_lm.h"
#include "alps/model/config.h"

namespace alps::model {

/// One tensor a checkpoint holds: its name, its shape derived from the config, and whether it may be absent.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool optional = false;
};

/// Where a forward's T new tokens sit. Without a cache: positions 0 .. T - 1 (the default).
struct Placement {
  int64_t past = 0;      ///< cached slots before the first new token
  at::Tensor positions;  ///< [batch, T] int64 position of each new token; undefined: past .. past + T - 1
  /// Keys hidden from each query: [batch, T, past + T] bool (several token trees packed into one sequence);
  /// undefined: none.
  at::Tensor hidden_keys;
  /// With per-query hidden keys: host [batch, T] int64, the first key each query may see (keys before it are not
  /// computed); undefined: key 0.
  at::Tensor first_keys;
  /// Positions are depths in packed token trees, not slots: a sliding window (which counts slots) is not applied,
  /// and the caller keeps every position below it.
  bool packed = false;
  int64_t length = 0;  ///< the longest sequence after this forward (1 + the largest position); 0: past + T
  /// The caller reads the linears' inputs (through the observer) and not the block's output: the forward may end
  /// once the last linear's input is observed, without its product, and return an undefined tensor.
  bool inputs_only = false;
  /// With an observer: a mixture of experts shows every token to every expert (MoeObservation::all_experts).
  bool all_experts = false;
  /// With an observer: a mixture of experts shows its router its input too (MoeObservation::router).
  bool show_router = false;
  /// When set, a mixture of experts shows it each expert's outputs on its routed tokens (MoeObservation::outputs).
  const ExpertObserver* expert_outputs = nullptr;
  int64_t sequence_length(int64_t T) const { return length > 0 ? length : past + T; }
};

/// A mixture block's experts as stored: the router (a row per expert) and each expert's tensors, short names within
/// the block ("mlp.gate.weight"; "mlp.experts.3.up_proj.weight", ...).
struct ExpertTensors {
  std::string router;
  std::vector<std::vector<std::string>> experts;
};

/// Weight access for a forward: name -> tensor on the compute device in the compute dtype.
using WeightFn = std::function<at::Tensor(const std::string&)>;
/// A stored tensor's shape by its full name.
using ShapeFn = std::function<std::vector<int64_t>(const std::string&)>;

class Architecture {
 public:
  virtual ~Architecture() = default;
  /// Every tensor the checkpoint must (or may) contain.
  virtual std::vector<TensorSpec> tensor_specs() const = 0;
  /// Prunable linears of block i, in execution order (`shape` gives a stored tensor's current shape by its full name).
  virtual std::vector<std::string> linear_names(int64_t block, const ShapeFn& shape) const = 0;
  /// "model.layers.3." / "model.decoder.layers.3.".
  virtual std::string block_prefix(int64_t i) const = 0;
  /// Names the embedding stage and the head read (made resident by load_all).
  virtual std::vector<std::string> non_block_tensors() const = 0;
  virtual at::Tensor embed(const WeightFn& w, const at::Tensor& ids, const Placement& at) const = 0;
  /// Block i on hidden [batch, seq, hidden] placed at `at`; with a cache, the queries also attend to its keys and
  /// values, and the block's own are appended to it.
  virtual at::Tensor block_forward(const WeightFn& w, int64_t i, const at::Tensor& hidden,
                                   const LinearObserver* observer, BlockCache* cache, const Placement& at) const = 0;
  /// Whether the keys and values cached for positions before `length` equal those a forward over all `length`
  /// positions computes (false where a position's encoding depends on the sequence's length).
  virtual bool cache_exact(int64_t length) const {
    (void)length;
    return true;
  }
  /// hidden -> logits [batch, seq, vocab] in fp32.
  virtual at::Tensor head(const WeightFn& w, const at::Tensor& hidden) const = 0;
  /// How `s` units leave block i, one rule per linear whose input they are (`shape` gives a stored tensor's current
  /// shape by its full name); the default refuses, naming the family.
  virtual std::vector<UnitRule> unit_rules(int64_t block, Structure s, const ShapeFn& shape) const {
    (void)block, (void)s, (void)shape;
    return {UnitRule::refused("alps has no structured-pruning rule for this family")};
  }
  /// Block i's experts as its tensors are now; nullopt for a block without a mixture (the default).
  virtual std::optional<ExpertTensors> expert_tensors(int64_t block, const ShapeFn& shape) const {
    (void)block, (void)shape;
    return std::nullopt;
  }
  /// The config.json fields that the stored shapes give where they differ from the config (CausalLM's).
  virtual nlohmann::json config_of_shapes(const ShapeFn& shape) const {
    (void)shape;
    return nlohmann::json::object();
  }
  /// Whether `name` belongs to the checkpoint beside the language model (a multimodal model's vision tower): loaded
  /// without a spec, never computed with, written out as it is.
  virtual bool carried(const std::string& name) const {
    (void)name;
    return false;
  }
};

class ConfigReader;

/// One supported architecture: its name in config.json's "architectures", its "model_type", how it reads the rest
/// of config.json, and its forward. The table of them is in architectures.cc.
struct ArchitectureEntry {
  const char* name;
  const char* model_type;
  void (*read_config)(const ConfigReader& r, ModelConfig& c);
  std::unique_ptr<Architecture> (*make)(const ModelConfig& c);
};
/// nullptr when unknown.
const ArchitectureEntry* find_architecture(const std::string& name);
const ArchitectureEntry* find_model_type(const std::string& model_type);

// The forwards (one per family) and config readers (one per architecture) are declared beside the table that names
// them (architectures.cc), their only caller.
/// What every LLaMA-style config shares (sizes, GQA, head_dim, RMSNorm eps, the MLP's activation, RoPE and its
/// scaling, tied head); `defaults` are the architecture's config-class defaults for fields config.json may omit.
struct LlamaDefaults {
  explicit LlamaDefaults(int64_t max_positions = 2048, std::optional<int64_t> num_kv_heads = std::nullopt)
      : max_positions(max_positions), num_kv_heads(num_kv_heads) {}
  int64_t max_positions;
  std::optional<int64_t> num_kv_heads;  ///< nullopt: num_attention_heads
  std::optional<int64_t> head_dim;      ///< when absent; nullopt, null or 0: hidden_size / num_attention_heads
  double norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  const char* activation_field = "hidden_act";
  const char* activation = "silu";  ///< the one activation the family's forward computes
  bool rope_by_layer_type = false;  ///< the family reads RoPE itself (Gemma 3: parameters per layer type)
  bool partial_rotary = false;      ///< partial_rotary_factor below 1 is the family's (Phi-3), not refused
};
void read_llama_family_config(const ConfigReader& r, const LlamaDefaults& defaults, ModelConfig& c);
/// What Gemma 2 and 3 configs differ in: their config classes' defaults.
struct GemmaDefaults {
  int64_t max_positions;
  int64_t sliding_pattern;  ///< without layer_types, every sliding_pattern-th layer is full, the others slide
  double attention_softcap, logit_softcap;  ///< 0: none
  bool rope_by_layer_type;
};
/// The config of a Gemma block (gemma2.cc): sizes, norms, GeGLU, query scaling, soft-capping, sliding layers.
void read_gemma_family_config(const ConfigReader& r, const GemmaDefaults& gemma, ModelConfig& c);
/// The sliding windows of Qwen2 and Qwen3 configs (use_sliding_window, sliding_window, layer_types or
/// max_window_layers; qwen2.cc).
void read_qwen_sliding_windows(const ConfigReader& r, ModelConfig& c);
/// config.json's sliding_window: 0 when null (no window), `absent` (the config class's default) when missing, else a
/// positive integer.
int64_t read_sliding_window(const ConfigReader& r, int64_t absent);
/// c.sliding_window: `window` on the layers config.json's layer_types marks "sliding_attention" (each entry
/// "full_attention" or "sliding_attention"), on those `fallback` marks when it has no layer_types. A sliding layer
/// without a window (0) is refused, `off` saying why the window is off.
void set_sliding_layers(const ConfigReader& r, const std::vector<bool>& fallback, int64_t window, const char* off,
                        ModelConfig& c);

// Shared pieces of the forwards (attention.cc).

/// Additive causal mask [seq, seq]: 0 on and below the diagonal, -inf above, in `dtype` on `device`.
at::Tensor causal_mask(int64_t seq, c10::ScalarType dtype, c10::Device device);
/// How causal_attention cuts its work: `batched`, steps over many (sequence, KV group) pairs at once, each product
/// run by BLAS over all its threads (any device and dtype); `tiled`, one (sequence, KV group, query tile) per task
/// on alps's own threads, each tile's scores kept in one core's cache (fp32 on the CPU); `automatic`, tiled where
/// it applies, BLAS has a pool of its own (core/threads.h) and a sequence's scores are not a handful, else batched.
/// automatic: fused on a GPU where it applies, else tiled (fp32 on the CPU) or batched. fused: one call of libtorch's
/// scaled_dot_product_attention (flash or memory-efficient kernels; libtorch 2.x, so the CUDA build only), for
/// forwards without hidden or first keys whose queries start the sequence or are one decoding step.
enum class AttentionSchedule { automatic, batched, tiled, fused };
/// Whether this build's libtorch has the fused attention (AttentionSchedule::fused).
bool fused_attention_available();
/// Scores a batched step holds at most by default (elements): ~24 MB in fp32, below glibc's largest mmap threshold,
/// so that on the CPU the buffer is reused instead of being mapped and page-faulted afresh for every step.
inline constexpr int64_t kBatchedStepScores = int64_t{6} << 20;

/// What causal_attention computes beyond q, k and v, and how it cuts the work.
struct AttentionOptions {
  double scale = 1;  ///< multiplies q k^T
  /// > 0: the scaled scores s become softcap * tanh(s / softcap) before the mask (Gemma 2's attention logit
  /// soft-capping; the fused schedule cannot express it, so such attention never takes it)
  double softcap = 0;
  int64_t window = 0;  ///< > 0: query i sees keys i - window + 1 .. i only (sliding-window attention)
  int64_t past = 0;    ///< cached positions before the first query
  /// [B, T, past + T] bool keys hidden from each query (undefined: none); the window counts slots, so it cannot be
  /// combined with hidden keys inside it.
  at::Tensor hidden_keys;
  /// Host [B, T] int64: the first key each query may see (undefined: key 0); a step computes no key before the first
  /// of its queries'.
  at::Tensor first_keys;
  int64_t chunk = 0;       ///< query rows per step (0: sized from the problem)
  int64_t max_scores = 0;  ///< scores one step holds at most, in elements (0: the schedule's default)
  AttentionSchedule schedule = AttentionSchedule::automatic;
};
/// The options of a forward placed at `at` (its past, hidden and first keys), with `scale` and `window`.
AttentionOptions attention_at(const Placement& at, double scale, int64_t window = 0);

/// Causal multi-head attention. q [B, H, T, D] holds positions past .. past + T - 1; k and v [B, KV, past + T, D]
/// hold positions 0 .. past + T - 1, with H a multiple of KV (query head h reads KV head h / (H / KV)). Returns
/// [B, T, H * D], computed without copying K or V.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const AttentionOptions& options);
/// Appends a block's new keys and values [B, KV, T, D] to `cache` (when given) and returns all of them.
std::pair<at::Tensor, at::Tensor> extend_cache(BlockCache* cache, at::Tensor keys, at::Tensor values);
/// x W^T + b (b may be undefined).
at::Tensor apply_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace alps::model
