// Checkpoint validation (errors name the file and the tensor) and saving (layout, names, dtypes, sharding, ties).
#include <ATen/ATen.h>

#include <fstream>
#include <functional>
#include <tuple>
#include <set>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "model_fixtures.h"
#include "checkpoint_names.h"
#include "support.h"

namespace alps::model {
namespace {

namespace fs = std::filesystem;

TEST(Checkpoint, WrongShapeNamesTensorFileAndShapes) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("llama_gqa", tmp);
  rewrite_weights(dir, [](auto& ts) {
    for (auto& [name, t] : ts)
      if (name == "model.layers.1.mlp.up_proj.weight") t = t.t().contiguous();
  });
  EXPECT_EQ(test::error_message([&] { CausalLM::load(dir); }).rfind(
                "model.layers.1.mlp.up_proj.weight in model.safetensors: expected [48, 32], got [32, 48]", 0),
            0u);
}

TEST(Checkpoint, MissingAndExtraTensors) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("opt_pre", tmp);
  rewrite_weights(dir, [](auto& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(),
                            [](auto& p) { return p.first.find("layers.1.fc2.bias") != std::string::npos; }),
             ts.end());
  });
  std::string msg = test::error_message([&] { CausalLM::load(dir); });
  EXPECT_NE(msg.find("missing tensor model.decoder.layers.1.fc2.bias"), std::string::npos) << msg;

  fs::path dir2 = copy_fixture("opt_post", tmp);
  rewrite_weights(dir2, [](auto& ts) { ts.emplace_back("model.decoder.layers.2.fc1.weight", at::zeros({64, 32})); });
  msg = test::error_message([&] { CausalLM::load(dir2); });
  EXPECT_NE(msg.find("unexpected tensor model.decoder.layers.2.fc1.weight in model.safetensors"), std::string::npos)
      << msg;
}

TEST(Checkpoint, IntegerDtypeRejected) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("opt_pre", tmp);
  rewrite_weights(dir, [](auto& ts) {
    for (auto& [name, t] : ts)
      if (name == "model.decoder.layers.0.fc1.bias") t = t.to(at::kInt);
  });
  const std::string msg = test::error_message([&] { CausalLM::load(dir); });
  EXPECT_NE(msg.find("fc1.bias in model.safetensors: expected dtype F32, F16 or BF16"), std::string::npos) << msg;
}

TEST(Checkpoint, TruncatedAndCorruptSafetensors) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("opt_pre", tmp);
  const auto size = fs::file_size(dir / "model.safetensors");
  fs::resize_file(dir / "model.safetensors", size - 100);
  EXPECT_NE(test::error_message([&] { CausalLM::load(dir); }).find("model.safetensors"), std::string::npos);

  fs::path dir2 = copy_fixture("opt_post", tmp);
  {
    std::fstream f(dir2 / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(9);
    f.write("###", 3);  // inside the JSON header
  }
  EXPECT_NE(test::error_message([&] { CausalLM::load(dir2); }).find("model.safetensors"), std::string::npos);

  fs::path dir3 = copy_fixture("llama_gqa", tmp);
  fs::remove(dir3 / "model.safetensors");
  EXPECT_NE(
      test::error_message([&] { CausalLM::load(dir3); }).find("no model.safetensors or model.safetensors.index.json"),
      std::string::npos);
}

TEST(Checkpoint, UnknownArchitectureAndBadConfig) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("opt_pre", tmp);
  edit_config(dir, [](nlohmann::json& j) { j["architectures"] = {"GPTNeoXForCausalLM"}; });
  EXPECT_NE(test::error_message([&] { CausalLM::load(dir); }).find("unknown architecture 'GPTNeoXForCausalLM'"),
            std::string::npos);

  fs::path dir2 = copy_fixture("llama_gqa", tmp);
  edit_config(dir2, [](nlohmann::json& j) { j["num_key_value_heads"] = 3; });
  EXPECT_NE(test::error_message([&] { CausalLM::load(dir2); }).find("not a multiple of num_key_value_heads 3"),
            std::string::npos);

  fs::path dir3 = copy_fixture("llama_gqa", tmp);
  edit_config(dir3, [](nlohmann::json& j) { j["rope_parameters"]["rope_type"] = "yarn"; });
  EXPECT_NE(test::error_message([&] { CausalLM::load(dir3); }).find("got 'yarn'"), std::string::npos);
}

// Values no Hugging Face model has: each is refused, naming config.json and the field (today's alternatives are
// NaN activations, empty tensors or a size silently truncated from a float).
TEST(Checkpoint, ConfigValuesOutOfRangeNameFileAndField) {
  test::TempDir tmp;
  const std::vector<ConfigCase> cases = {
      {"llama_gqa", [](nlohmann::json& j) { j["rms_norm_eps"] = 0.0; }, "rms_norm_eps must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["rms_norm_eps"] = -1e-6; }, "rms_norm_eps must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["rms_norm_eps"] = "small"; }, "'rms_norm_eps' must be a number"},
      {"llama_gqa", [](nlohmann::json& j) { j["rope_parameters"]["rope_theta"] = 0.0; }, "rope_theta must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["rope_parameters"]["rope_theta"] = -10000.0; }, "rope_theta"},
      {"llama_gqa", [](nlohmann::json& j) { j["rope_parameters"]["factor"] = 0.0; }, "factor must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["rope_parameters"]["low_freq_factor"] = -1.0; }, "low_freq_factor"},
      {"llama_gqa", [](nlohmann::json& j) { j["rope_parameters"]["original_max_position_embeddings"] = 0; },
       "original_max_position_embeddings must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["num_key_value_heads"] = 0; }, "num_key_value_heads must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["num_key_value_heads"] = 2.5; },
       "'num_key_value_heads' must be an integer"},
      {"llama_gqa", [](nlohmann::json& j) { j["head_dim"] = -8; }, "head_dim must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["max_position_embeddings"] = 0; },
       "max_position_embeddings must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["max_position_embeddings"] = 128.5; }, "'max_position_embeddings'"},
      {"llama_gqa", [](nlohmann::json& j) { j["num_hidden_layers"] = 0; }, "num_hidden_layers must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["intermediate_size"] = -48; }, "intermediate_size must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["vocab_size"] = 0; }, "vocab_size must be positive"},
      {"llama_gqa", [](nlohmann::json& j) { j["num_attention_heads"] = -4; }, "num_attention_heads must be positive"},
      {"llama_gqa",
       [](nlohmann::json& j) {
         j.erase("head_dim");
         j["num_attention_heads"] = 3;
         j["num_key_value_heads"] = 3;
       },
       "hidden_size 32 is not divisible by num_attention_heads 3"},
      {"opt_pre", [](nlohmann::json& j) { j["hidden_size"] = 30; }, "hidden_size 30 is not divisible"},
      {"opt_pre", [](nlohmann::json& j) { j["ffn_dim"] = 0; }, "ffn_dim must be positive"},
      {"opt_pre", [](nlohmann::json& j) { j["word_embed_proj_dim"] = 0; }, "word_embed_proj_dim must be positive"},
      {"opt_pre", [](nlohmann::json& j) { j["max_position_embeddings"] = -64; }, "max_position_embeddings"},
  };
  expect_config_refusals(cases, tmp);
}

// Shard names in the index are data from a file: they must stay inside the model directory.
TEST(Checkpoint, ShardIndexEntriesStayInsideTheModelDirectory) {
  test::TempDir tmp;
  const std::string shard = "model-00001-of-00003.safetensors";
  auto redirect = [&](const fs::path& dir, const std::string& to) {
    nlohmann::json index;
    std::ifstream(dir / "model.safetensors.index.json") >> index;
    for (auto& [name, file] : index["weight_map"].items())
      if (file == shard) file = to;
    std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << index.dump();
  };
  auto expect_refused = [&](const fs::path& dir, const std::string& entry, const std::string& why) {
    const std::string msg = test::error_message([&] { CausalLM::load(dir); });
    EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shard '" + entry + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  };
  // The same bytes outside the model directory would load today.
  fs::create_directories(tmp / "elsewhere");
  fs::copy_file(fixture("opt_proj") / shard, tmp / "elsewhere" / shard);

  fs::path dir = copy_fixture("opt_proj", tmp);
  redirect(dir, "../elsewhere/" + shard);
  expect_refused(dir, "../elsewhere/" + shard, "'..' leaves the model directory");

  dir = copy_fixture("opt_proj", tmp);
  redirect(dir, (tmp / "elsewhere" / shard).string());
  expect_refused(dir, (tmp / "elsewhere" / shard).string(), "not a file name relative to the model directory");

  dir = copy_fixture("opt_proj", tmp);
  fs::create_symlink(tmp / "elsewhere" / shard, dir / "linked.safetensors");
  redirect(dir, "linked.safetensors");
  expect_refused(dir, "linked.safetensors", "outside the model directory");

  // Symlinks that stay inside are fine, and so is the Hugging Face hub cache (snapshots/<rev>/* -> ../../blobs/*).
  dir = copy_fixture("opt_proj", tmp);
  fs::rename(dir / shard, dir / "real.bin");
  fs::create_symlink("real.bin", dir / shard);
  EXPECT_NO_THROW(CausalLM::load(dir));
  const fs::path repo = tmp / "models--x--opt", snapshot = repo / "snapshots" / "abc123";
  fs::create_directories(snapshot);
  fs::create_directories(repo / "blobs");
  for (const auto& e : fs::directory_iterator(fixture("opt_proj"))) {
    const std::string blob = "blob-" + e.path().filename().string();
    fs::copy_file(e.path(), repo / "blobs" / blob);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, snapshot / e.path().filename());
  }
  EXPECT_NO_THROW(CausalLM::load(snapshot));
}

// A directory where a checkpoint file belongs is named as such, not reported as a libtorch or stream oddity.
TEST(Checkpoint, DirectoryWhereAFileIsExpected) {
  test::TempDir tmp;
  auto expect_directory_error = [](const fs::path& dir, const fs::path& file) {
    const std::string msg = test::error_message([&] { CausalLM::load(dir); });
    EXPECT_NE(msg.find(file.string() + " is a directory, expected a file"), std::string::npos) << msg;
  };
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::path dir = copy_fixture("opt_pre", tmp);
    fs::remove(dir / file);
    fs::create_directory(dir / file);
    expect_directory_error(dir, dir / file);
  }
  for (const char* file : {"model.safetensors.index.json", "model-00002-of-00003.safetensors"}) {
    fs::path dir = copy_fixture("opt_proj", tmp);
    fs::remove(dir / file);
    fs::create_directory(dir / file);
    expect_directory_error(dir, dir / file);
  }
}

TEST(Checkpoint, ShardedIndexMismatch) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("opt_proj", tmp);
  nlohmann::json index;
  std::ifstream(dir / "model.safetensors.index.json") >> index;
  const std::string moved = index["weight_map"].begin().key();
  const std::string file = index["weight_map"][moved];
  index["weight_map"][moved] = file == "model-00001-of-00003.safetensors" ? "model-00002-of-00003.safetensors"
                                                                          : "model-00001-of-00003.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  EXPECT_NE(test::error_message([&] { CausalLM::load(dir); }).find(moved), std::string::npos);
}

TEST(Checkpoint, F16StorageComputesInFp32OnTheStoredValues) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("llama_gqa", tmp);
  rewrite_weights(dir, [](auto& ts) {
    for (auto& [name, t] : ts) t = t.to(at::kHalf);
  });
  CausalLM half = CausalLM::load(dir);
  CausalLM full = CausalLM::load(fixture("llama_gqa"));
  for (const std::string& name : test::checkpoint_tensor_names(full.dir())) {
    EXPECT_EQ(half.tensor(name).scalar_type(), at::kHalf) << name;
    full.set_tensor(name, full.tensor(name).to(at::kHalf).to(at::kFloat));  // the same values, kept in F32
  }
  at::Tensor ids = at::randint(0, 96, {2, 11}, at::kLong);
  EXPECT_TRUE(half.forward(ids).equal(full.forward(ids)));
}

// Every tensor of `a` is in `b` with the same dtype and identical bytes.
void expect_same_tensors(const CausalLM& a, const CausalLM& b) {
  ASSERT_EQ(test::checkpoint_tensor_names(a.dir()), test::checkpoint_tensor_names(b.dir()));
  for (const std::string& name : test::checkpoint_tensor_names(a.dir())) {
    EXPECT_EQ(a.tensor(name).scalar_type(), b.tensor(name).scalar_type()) << name;
    EXPECT_TRUE(a.tensor(name).view(at::kByte).equal(b.tensor(name).view(at::kByte))) << name;
  }
}

TEST(Checkpoint, SaveIsFaithfulAndKeepsSideFiles) {
  test::TempDir tmp;
  for (const char* name : {"opt_pre", "llama_bias_bf16", "opt_proj"}) {
    CausalLM m = CausalLM::load(fixture(name));
    m.save(tmp / name);
    EXPECT_TRUE(fs::exists(tmp / name / "model.safetensors")) << "small models are written unsharded";
    EXPECT_FALSE(fs::exists(tmp / name / "model.safetensors.index.json"));
    for (const char* side : {"config.json", "generation_config.json"})
      EXPECT_TRUE(fs::exists(tmp / name / side)) << side;
    CausalLM r = CausalLM::load(tmp / name);
    expect_same_tensors(m, r);
    // Tied heads stay tied: no lm_head tensor appears.
    if (m.config().tie_word_embeddings)
      EXPECT_FALSE(io::SafetensorsFile(tmp / name / "model.safetensors").contains("lm_head.weight"));
  }
  EXPECT_EQ(CausalLM::load(tmp / "llama_bias_bf16").tensor("model.norm.weight").scalar_type(), at::kBFloat16);
  // No staging directories are left behind.
  for (const auto& e : fs::directory_iterator(tmp.path()))
    EXPECT_NE(e.path().filename().string().front(), '.') << e.path();
}

TEST(Checkpoint, ShardedSaveRoundTripWithModifiedWeights) {
  test::TempDir tmp;
  CausalLM m = CausalLM::load(fixture("llama_gqa"));
  const std::string name = m.weight_name(1, "self_attn.k_proj");
  at::Tensor w = m.tensor(name).clone();
  w.masked_fill_(w.abs() < w.abs().median(), 0);  // a "pruned" weight
  m.set_tensor(name, w);
  SaveOptions opt;
  opt.max_shard_bytes = 20'000;  // ~87 kB of weights -> several shards
  m.save(tmp / "out", opt);
  ASSERT_TRUE(fs::exists(tmp / "out" / "model.safetensors.index.json"));
  nlohmann::json index;
  std::ifstream(tmp / "out" / "model.safetensors.index.json") >> index;
  std::set<std::string> files;
  for (const auto& [t, f] : index["weight_map"].items()) files.insert(f.get<std::string>());
  EXPECT_GE(files.size(), 4u);
  for (const std::string& f : files) {
    EXPECT_TRUE(fs::exists(tmp / "out" / f)) << f;
    EXPECT_LE(fs::file_size(tmp / "out" / f), 20'000u + 4'096u) << f;  // limit on data plus the JSON header
  }
  CausalLM r = CausalLM::load(tmp / "out");
  expect_same_tensors(m, r);
  EXPECT_TRUE(r.tensor(name).equal(w));
  at::Tensor ids = at::randint(0, 96, {2, 9}, at::kLong);
  EXPECT_TRUE(r.forward(ids).equal(m.forward(ids)));

  // An existing checkpoint is never replaced (nor deleted), and saving over the loaded checkpoint is refused.
  EXPECT_THROW(m.save(tmp / "out"), Error);
  EXPECT_TRUE(fs::exists(tmp / "out" / "model.safetensors.index.json"));
  EXPECT_THROW(r.save(tmp / "out"), Error);
  m.save(tmp / "out2");
  expect_same_tensors(m, CausalLM::load(tmp / "out2"));
}

}  // namespace
}  // namespace alps::model
