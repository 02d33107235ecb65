#include "fuzz_targets.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "alps/core/error.h"
#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "alps/model/config.h"
#include "alps/pipeline/recipe.h"
#include "alps/prune/problem.h"
#include "alps/tokenizer/tokenizer.h"
#include "model/architecture.h"
#include "tokenizer/byte_map.h"

namespace alps::fuzz {

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("fuzz harness cannot write " + path.string());
}

// Targets that take several files read them from one input cut at NUL bytes (JSON text never holds a raw NUL, so
// the fuzzer can move the cut freely). Missing parts are empty.
std::vector<std::string_view> split(std::string_view input, size_t parts) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < parts) {
    const size_t cut = input.find('\0');
    if (cut == std::string_view::npos) break;
    out.push_back(input.substr(0, cut));
    input.remove_prefix(cut + 1);
  }
  out.push_back(input);
  out.resize(parts);
  return out;
}

// Reads every byte a tensor views, so a view reaching past the mapping faults here rather than going unnoticed.
uint64_t touch(const at::Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  uint64_t sum = 0;
  for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
  return sum;
}

// What a user does with a tokenizer right after loading it: encode (with and without the special tokens) and
// decode, here on text that reaches added tokens, byte fallback, multi-byte characters and whitespace runs.
void exercise(const tokenizer::Tokenizer& t) {
  static const std::string kText =
      "Hello world, it's 2024!  Ünïcødé 你好 \xF0\x9F\x98\x80 <|endoftext|> <s></s><unk> \n\t x  ";
  for (bool special : {false, true}) {
    const std::vector<int64_t> ids = t.encode(kText, special);
    t.decode(ids);
  }
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < std::min<int64_t>(t.vocab_size(), 1024); ++i) ids.push_back(i);
  t.decode(ids);
  (void)t.bos_id();
  (void)t.eos_id();
  (void)t.kind();
}

void load_safetensors(const fs::path& dir, std::string_view input) {
  const fs::path file = dir / "model.safetensors";
  write_file(file, input);
  io::SafetensorsFile f(file);
  uint64_t sum = 0;
  for (const io::TensorEntry& e : f.entries()) {
    if (!f.contains(e.name)) throw std::logic_error("entry '" + e.name + "' listed but not found");
    sum += touch(f.tensor(e.name));
  }
  for (const auto& [key, value] : f.metadata()) sum += key.size() + value.size();
  (void)sum;
}

void load_config(const fs::path& dir, std::string_view input) {
  const fs::path file = dir / "config.json";
  write_file(file, input);
  (void)model::load_config(file);
}

// A two-shard LLaMA checkpoint small enough to load thousands of times a second; only the index is fuzzed.
constexpr char kShardConfig[] = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4, "intermediate_size": 4,
  "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 8,
  "max_position_embeddings": 16, "tie_word_embeddings": true})";

void write_shards(const fs::path& dir) {
  write_file(dir / "config.json", kShardConfig);
  const model::ModelConfig config = model::load_config(dir / "config.json");
  std::vector<std::pair<std::string, at::Tensor>> shards[2];
  size_t k = 0;
  const auto arch = model::find_architecture(config.architecture)->make(config);
  for (const model::TensorSpec& spec : arch->tensor_specs()) {
    if (spec.optional) continue;
    shards[k++ % 2].emplace_back(spec.name, at::ones(spec.shape, at::kFloat));
  }
  io::save_safetensors(dir / "model-00001-of-00002.safetensors", shards[0]);
  io::save_safetensors(dir / "model-00002-of-00002.safetensors", shards[1]);
}

void load_shard_index(const fs::path& dir, std::string_view input) {
  if (!fs::exists(dir / "config.json")) write_shards(dir);
  write_file(dir / "model.safetensors.index.json", input);
  (void)model::CausalLM::load(dir);
}

void load_tokenizer_json(const fs::path& dir, std::string_view input) {
  write_file(dir / "tokenizer.json", input);
  exercise(*tokenizer::load_tokenizer(dir));
}

void load_vocab_merges(const fs::path& dir, std::string_view input) {
  const auto parts = split(input, 2);
  write_file(dir / "vocab.json", parts[0]);
  write_file(dir / "merges.txt", parts[1]);
  exercise(*tokenizer::load_tokenizer(dir));
}

void load_tokenizer_model(const fs::path& dir, std::string_view input) {
  write_file(dir / "tokenizer.model", input);
  exercise(*tokenizer::load_tokenizer(dir));
}

// The special-token files around a fixed byte-level vocabulary (every byte, <|endoftext|> and a few merges).
void write_small_vocab(const fs::path& dir) {
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    std::string token;
    for (unsigned char c : tokenizer::byte_to_unicode(static_cast<uint8_t>(b))) {
      if (c == '"' || c == '\\') token += '\\';
      token += static_cast<char>(c);
    }
    vocab += "\"" + token + "\": " + std::to_string(b) + ", ";
  }
  vocab += R"("<|endoftext|>": 256, "he": 257, "ll": 258, "Ġw": 259, "<s>": 260, "</s>": 261})";
  write_file(dir / "vocab.json", vocab);
  write_file(dir / "merges.txt", "#version: 0.2\nh e\nl l\nĠ w\n");
}

void load_tokenizer_config(const fs::path& dir, std::string_view input) {
  if (!fs::exists(dir / "vocab.json")) write_small_vocab(dir);
  const auto parts = split(input, 3);
  const char* names[] = {"tokenizer_config.json", "special_tokens_map.json", "config.json"};
  for (size_t i = 0; i < parts.size(); ++i) {
    // An absent file and an empty one are different inputs; an empty part stands for absent.
    if (parts[i].empty())
      fs::remove(dir / names[i]);
    else
      write_file(dir / names[i], parts[i]);
  }
  exercise(*tokenizer::load_tokenizer(dir));
}

void load_problem(const fs::path& dir, std::string_view input) {
  const fs::path file = dir / "layer.safetensors";
  write_file(file, input);
  (void)prune::load_problem(file);
}

void load_recipe(const fs::path& dir, std::string_view input) {
  const fs::path file = dir / "recipe.json";
  write_file(file, input);
  const pipeline::Recipe r = pipeline::load_recipe(file);
  (void)pipeline::recipe_to_json(r).dump();
  (void)pipeline::plan_for(r, "model.layers.0.self_attn.q_proj");
}

// One scratch directory per process, on tmpfs when there is one: a fuzzer writes its input millions of times.
class Scratch {
 public:
  Scratch() {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    root_ = base / ("alps-fuzz-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path dir(const std::string& target) {
    const fs::path d = root_ / target;
    if (!fs::exists(d)) fs::create_directories(d);
    return d;
  }

 private:
  fs::path root_;
};

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"safetensors", &load_safetensors},
      {"config", &load_config},
      {"shard_index", &load_shard_index},
      {"tokenizer_json", &load_tokenizer_json},
      {"vocab_merges", &load_vocab_merges},
      {"tokenizer_model", &load_tokenizer_model},
      {"tokenizer_config", &load_tokenizer_config},
      {"problem", &load_problem},
      {"recipe", &load_recipe},
  };
  return all;
}

const Target& target(std::string_view name) {
  for (const Target& t : targets())
    if (name == t.name) return t;
  throw std::invalid_argument("unknown fuzz target '" + std::string(name) + "'");
}

std::optional<std::string> run(const Target& target, const uint8_t* data, size_t size) {
  static Scratch scratch;
  const fs::path dir = scratch.dir(target.name);
  try {
    target.load(dir, std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace alps::fuzz
