// Forward pass against independent references: transformers' own logits on random-weight fixtures
// (scripts/make_model_fixtures.py) and the stories260K-hf README's per-story NLLs and greedy continuation.
#include "alps/model/causal_lm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "alps/core/error.h"
#include "alps/io/safetensors.h"
#include "alps/model/config.h"
#include "model_fixtures.h"
#include "support.h"

namespace alps::model {
namespace {

namespace fs = std::filesystem;

fs::path stories_dir() { return test::committed_data_dir() / "models" / "stories260K-hf"; }

class GoldenLogits : public ::testing::TestWithParam<std::string> {};

// transformers and this forward pass compute the same fp32 network with differently blocked sums. Each logit ends
// a chain of accumulations: per block attention scores (head_dim terms), softmax and weighted values (T terms),
// the projections (hidden terms, four of them), the MLP's second matrix (intermediate terms); then the final
// norm and the head (hidden terms). What they round is of the size of the logits.
double logits_bound(const CausalLM& m, const at::Tensor& golden_logits) {
  const ModelConfig& c = m.config();
  const int64_t T = golden_logits.size(1);
  const double chain = static_cast<double>(
      c.num_layers * (c.head_dim + 2 * T + 4 * c.hidden_size + c.intermediate_size) + 2 * c.hidden_size);
  return test::rounding_bound(chain, golden_logits.abs().max().item<double>());
}

// Every golden sequence of a fixture: "" and, where the length matters (sliding windows, dynamic RoPE), "short.".
std::vector<std::string> golden_prefixes(const io::SafetensorsFile& golden) {
  std::vector<std::string> prefixes = {""};
  for (const io::TensorEntry& e : golden.entries())
    if (e.name == "short.input_ids") prefixes.push_back("short.");
  return prefixes;
}

TEST_P(GoldenLogits, MatchTransformers) {
  CausalLM m = CausalLM::load(fixture(GetParam()));
  io::SafetensorsFile golden(fixture(GetParam() + ".golden.safetensors"));
  for (const std::string& prefix : golden_prefixes(golden)) {
    SCOPED_TRACE(prefix + "input_ids");
    const at::Tensor expected = golden.tensor(prefix + "logits");
    at::Tensor logits = m.forward(golden.tensor(prefix + "input_ids"));
    EXPECT_EQ(logits.scalar_type(), at::kFloat);
    EXPECT_ALL_CLOSE(logits, expected, logits_bound(m, expected), 0);
    // The golden logits have O(1) spread, so a wrong forward cannot pass by being near-constant.
    EXPECT_GT(expected.std().item<double>(), 0.5);
  }
}

TEST_P(GoldenLogits, BlockByBlockEqualsForwardAndResidencyIsTransparent) {
  CausalLM m = CausalLM::load(fixture(GetParam()));
  io::SafetensorsFile golden(fixture(GetParam() + ".golden.safetensors"));
  at::Tensor ids = golden.tensor("input_ids");
  at::Tensor h = m.embed(ids);
  for (int64_t i = 0; i < m.num_blocks(); ++i) {
    m.load_block(i);
    h = m.block_forward(i, h);
    m.unload_block(i);
  }
  const double tol = logits_bound(m, golden.tensor("logits"));
  EXPECT_ALL_CLOSE(m.head(h), golden.tensor("logits"), tol, 0);
  m.load_all();
  EXPECT_ALL_CLOSE(m.forward(ids), golden.tensor("logits"), tol, 0);
}

// The same sequences fed in pieces through a KV cache (a prompt, single tokens as in decoding, a few at a time):
// the same logits as transformers' whole forward, to the same bound. Where the cache cannot be exact (dynamic RoPE
// beyond max_position_embeddings rotates every position by the whole length, longrope beyond its original length
// takes other factors) the model says so, and the pieces do differ there, so the rule is not vacuous.
TEST_P(GoldenLogits, KVCacheInPiecesEqualsWholeForward) {
  CausalLM m = CausalLM::load(fixture(GetParam()));
  io::SafetensorsFile golden(fixture(GetParam() + ".golden.safetensors"));
  for (const std::string& prefix : golden_prefixes(golden)) {
    SCOPED_TRACE(prefix + "input_ids");
    const at::Tensor ids = golden.tensor(prefix + "input_ids"), expected = golden.tensor(prefix + "logits");
    const int64_t T = ids.size(1);
    KVCache cache;
    std::vector<at::Tensor> pieces;
    for (int64_t s = 0, k = 0; s < T; ++k) {
      const int64_t len = std::min<int64_t>(T - s, k == 0 ? 5 : k % 3 == 0 ? 3 : 1);
      pieces.push_back(m.forward(ids.narrow(1, s, len), &cache));
      s += len;
      EXPECT_EQ(cache.length(), s);
    }
    const at::Tensor logits = at::cat(pieces, 1);
    if (m.cache_exact(T)) {
      EXPECT_ALL_CLOSE(logits, expected, logits_bound(m, expected), 0);
    } else {  // the table changes past a length: dynamic scaling's max_position_embeddings, longrope's original
      const RopeScaling& s = *m.config().rope_scaling;
      ASSERT_TRUE(s.type == "dynamic" || s.type == "longrope") << s.type;
      const int64_t switch_at = s.type == "dynamic" ? m.config().max_positions : s.original_max_position_embeddings;
      EXPECT_TRUE(m.cache_exact(switch_at));
      EXPECT_FALSE(m.cache_exact(switch_at + 1));
      EXPECT_GT((logits - expected).abs().max().item<double>(), 100 * logits_bound(m, expected));
    }
  }
}

// Token trees packed into one batch (a prefix shared by two branches, a second tree after it, a shorter row padded):
// every node's logits are those of its root-to-node path alone: transformers' golden logits for the golden
// sequences, the model's own forward for the branch no golden covers.
TEST_P(GoldenLogits, PackedTreesEqualEachPathAlone) {
  CausalLM m = CausalLM::load(fixture(GetParam()));
  io::SafetensorsFile golden(fixture(GetParam() + ".golden.safetensors"));
  const std::string prefix = m.cache_exact(golden.tensor("input_ids").size(1)) ? "" : "short.";
  const at::Tensor ids = golden.tensor(prefix + "input_ids"), expected = golden.tensor(prefix + "logits");
  // Depths stay below every sliding window, as a packed forward requires.
  int64_t T = ids.size(1);
  for (int64_t i = 0; i < m.num_blocks(); ++i)
    if (m.config().window_of_layer(i) > 0) T = std::min(T, m.config().window_of_layer(i));
  const int64_t n0 = T - 4, B = 2;
  // Each row: tokens with their parents (-1: a root) and depths, a parent before its children.
  std::vector<std::vector<int64_t>> tokens(B), parents(B), depths(B);
  auto chain = [&](int64_t row, const at::Tensor& toks, int64_t parent, int64_t depth) {
    for (int64_t t = 0; t < toks.size(0); ++t) {
      tokens[row].push_back(toks[t].item<int64_t>());
      parents[row].push_back(t == 0 ? parent : static_cast<int64_t>(tokens[row].size()) - 2);
      depths[row].push_back(depth + t);
    }
    return static_cast<int64_t>(tokens[row].size()) - 1;  // the last node
  };
  const int64_t fork = chain(0, ids[0].narrow(0, 0, n0), -1, 0);
  const int64_t branch_a = chain(0, ids[0].narrow(0, n0, T - n0), fork, n0) - (T - n0 - 1);
  const int64_t branch_b = chain(0, ids[1].narrow(0, 0, 3), fork, n0) - 2;
  const int64_t second = chain(0, ids[1].narrow(0, 0, T), -1, 0) - (T - 1);
  chain(1, ids[1].narrow(0, 0, 5), -1, 0);
  const int64_t W = static_cast<int64_t>(tokens[0].size());
  at::Tensor packed = at::zeros({B, W}, at::kLong), positions = at::zeros({B, W}, at::kLong);
  at::Tensor hidden = at::ones({B, W, W}, at::kBool);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < W; ++t) {
      if (t < static_cast<int64_t>(tokens[b].size())) {
        packed[b][t] = tokens[b][t];
        positions[b][t] = depths[b][t];
        if (parents[b][t] >= 0) hidden[b][t].copy_(hidden[b][parents[b][t]]);
      }
      hidden[b][t][t] = false;
    }
  const at::Tensor logits = m.head(m.packed_hidden_states(packed, positions, hidden));
  const double tol = logits_bound(m, expected);
  EXPECT_ALL_CLOSE(logits[0].narrow(0, 0, n0), expected[0].narrow(0, 0, n0), tol, 0);
  EXPECT_ALL_CLOSE(logits[0].narrow(0, branch_a, T - n0), expected[0].narrow(0, n0, T - n0), tol, 0);
  EXPECT_ALL_CLOSE(logits[0].narrow(0, second, T), expected[1].narrow(0, 0, T), tol, 0);
  EXPECT_ALL_CLOSE(logits[1].narrow(0, 0, 5), expected[1].narrow(0, 0, 5), tol, 0);
  const at::Tensor path_b = at::cat({ids[0].narrow(0, 0, n0), ids[1].narrow(0, 0, 3)}).unsqueeze(0);
  EXPECT_ALL_CLOSE(logits[0].narrow(0, branch_b, 3), m.forward(path_b)[0].narrow(0, n0, 3), tol, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenLogits, ::testing::ValuesIn(golden_fixtures()));

// Every architecture of the table is checked against transformers by at least one fixture.
TEST(GoldenLogits, EveryArchitectureHasAFixture) {
  std::set<std::string> covered;
  for (const std::string& name : golden_fixtures())
    covered.insert(load_config(fixture(name) / "config.json").architecture);
  EXPECT_GE(golden_fixtures().size(), 9u);
  std::istringstream listed(supported_architectures());  // "A, B, C"
  for (std::string arch; std::getline(listed >> std::ws, arch, ',');)
    EXPECT_EQ(covered.count(arch), 1u) << arch << " has no fixture in tests/data/model (make_model_fixtures.py)";
}

TEST(CausalLM, ObserverSeesEveryLinearInputInOrder) {
  for (const char* name : {"opt_pre", "opt_post", "llama_gqa", "qwen2_linear"}) {
    CausalLM m = CausalLM::load(fixture(name));
    at::Tensor ids = at::randint(0, m.config().vocab_size, {2, 7}, at::kLong);
    std::vector<std::string> seen;
    std::vector<at::Tensor> inputs;
    LinearObserver obs = [&](const std::string& linear, const at::Tensor& x) {
      seen.push_back(linear);
      inputs.push_back(x.clone());
    };
    at::Tensor h = m.embed(ids);
    at::Tensor out = m.block_forward(1, h, &obs);
    ASSERT_EQ(seen, m.linear_names(1)) << name;
    // q, k and v read the same normed input; every input is [batch, seq, in] with the weight's `in`.
    EXPECT_TRUE(inputs[0].equal(inputs[1]) && inputs[0].equal(inputs[2])) << name;
    for (size_t j = 0; j < seen.size(); ++j) {
      const at::Tensor w = m.tensor(m.weight_name(1, seen[j]));
      EXPECT_EQ(inputs[j].sizes(), (std::vector<int64_t>{2, 7, w.size(1)})) << name << " " << seen[j];
    }
    EXPECT_TRUE(out.equal(m.block_forward(1, h))) << "observer must not change the result";

    // observe_block shows the same inputs (the same arithmetic up to the last linear) in the same order.
    std::vector<std::string> seen_only;
    size_t j = 0;
    LinearObserver check = [&](const std::string& linear, const at::Tensor& x) {
      seen_only.push_back(linear);
      ASSERT_LT(j, inputs.size());
      EXPECT_TRUE(x.equal(inputs[j++])) << name << " " << linear;
    };
    m.observe_block(1, h, check);
    EXPECT_EQ(seen_only, seen) << name;
  }
}

TEST(CausalLM, CausalityLaterTokensDoNotChangeEarlierLogits) {
  CausalLM m = CausalLM::load(fixture("llama_gqa"));
  at::Tensor ids = at::randint(0, 96, {1, 16}, at::kLong);
  at::Tensor changed = ids.clone();
  changed.index_put_({0, 15}, (ids.index({0, 15}) + 1) % 96);
  // The first 15 positions run exactly the same arithmetic in both (same shapes; a row of a matrix product or a
  // norm never reads other rows; masked scores are -inf, weight exactly 0): bit-identical, on any CPU.
  EXPECT_TRUE(m.forward(ids).narrow(1, 0, 15).equal(m.forward(changed).narrow(1, 0, 15)));
  EXPECT_FALSE(at::allclose(m.forward(ids).narrow(1, 15, 1), m.forward(changed).narrow(1, 15, 1)));
}

TEST(CausalLM, SetTensorChangesTheForwardAndKeepsTheCheckpointDtype) {
  CausalLM m = CausalLM::load(fixture("llama_bias_bf16"));
  const std::string name = m.weight_name(0, "mlp.up_proj");
  at::Tensor ids = at::randint(0, 96, {1, 5}, at::kLong);
  at::Tensor before = m.forward(ids);
  m.load_all();
  m.set_tensor(name, at::zeros_like(m.tensor(name), at::kFloat));
  EXPECT_EQ(m.tensor(name).scalar_type(), at::kBFloat16);
  EXPECT_EQ(m.tensor(name).count_nonzero().item<int64_t>(), 0);
  EXPECT_FALSE(at::allclose(before, m.forward(ids)));
  EXPECT_THROW(m.set_tensor(name, at::zeros({3, 3})), Error);
  // The model keeps a copy of its own: a weight of the checkpoint's dtype changed afterwards changes nothing.
  at::Tensor w = at::ones_like(m.tensor(name));
  m.set_tensor(name, w);
  w.zero_();
  EXPECT_EQ(m.tensor(name).count_nonzero().item<int64_t>(), w.numel());
}

TEST(CausalLM, Stories260KInfo) {
  CausalLM m = CausalLM::load(stories_dir());
  EXPECT_EQ(m.config().architecture, "LlamaForCausalLM");
  EXPECT_EQ(m.num_blocks(), 5);
  EXPECT_EQ(m.num_parameters(), 260032);  // README: 260,032 parameters (tied head counted once)

  // A tied checkpoint that also stores lm_head.weight (some exporters write both): the head that runs is the
  // embedding, so the stored copy is not a parameter of the model.
  test::TempDir tmp;
  fs::copy(stories_dir(), tmp / "m");
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  {
    io::SafetensorsFile f(stories_dir() / "model.safetensors");
    for (const auto& e : f.entries()) tensors.emplace_back(e.name, f.tensor(e.name).clone());
    tensors.emplace_back("lm_head.weight", f.tensor("model.embed_tokens.weight").clone());
  }
  fs::remove(tmp / "m" / "model.safetensors");
  io::save_safetensors(tmp / "m" / "model.safetensors", tensors);
  EXPECT_EQ(CausalLM::load(tmp / "m").num_parameters(), 260032);
}

// README "Reference perplexity": story by story, [BOS] + ids, no EOS, log_softmax in fp64.
TEST(CausalLM, Stories260KReproducesReadmeNll) {
  CausalLM m = CausalLM::load(stories_dir());
  std::ifstream in(fixture("stories260K_sample_ids.json"));
  const auto doc = nlohmann::json::parse(in);
  const double readme_story_nll[] = {1.3160, 1.2386, 0.9522, 1.4934, 1.1879};
  ASSERT_EQ(doc["ids"].size(), 5u);
  double total = 0;
  int64_t count = 0;
  for (size_t s = 0; s < 5; ++s) {
    const auto ids_vec = doc["ids"][s].get<std::vector<int64_t>>();
    at::Tensor ids = at::tensor(ids_vec, at::kLong).unsqueeze(0);
    at::Tensor logp = at::log_softmax(m.forward(ids)[0].to(at::kDouble), -1);
    const int64_t n = ids.size(1) - 1;
    at::Tensor nll = -logp.narrow(0, 0, n).gather(1, ids[0].narrow(0, 1, n).unsqueeze(1));
    const double story = nll.mean().item<double>();
    // The README prints 4 decimals (half a unit: 5e-5, under 5.3e-5 of these values); the rest of the 1e-4 is
    // for fp32 rounding of a different implementation's forward pass, averaged over ~360 tokens.
    EXPECT_NEAR(story, readme_story_nll[s], 1e-4 * readme_story_nll[s]) << "story " << s;
    total += nll.sum().item<double>();
    count += n;
  }
  EXPECT_EQ(count, 1804);
  EXPECT_NEAR(total / count, 1.266441, 1e-4 * 1.266441);
}

TEST(CausalLM, Stories260KGreedyContinuationFromBos) {
  CausalLM m = CausalLM::load(stories_dir());
  m.load_all();
  const std::vector<int64_t> readme = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                                       338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433,
                                       426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338,
                                       391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415};
  std::vector<int64_t> ids = {1};
  for (size_t t = 0; t < readme.size(); ++t) {
    at::Tensor logits = m.forward(at::tensor(ids, at::kLong).unsqueeze(0));
    ids.push_back(logits[0][-1].argmax().item<int64_t>());
  }
  EXPECT_EQ(std::vector<int64_t>(ids.begin() + 1, ids.end()), readme);
}

TEST(CausalLM, RejectsBadTokenInput) {
  CausalLM m = CausalLM::load(fixture("opt_pre"));
  EXPECT_THROW(m.forward(at::full({1, 3}, 96, at::kLong)), Error);        // id >= vocab
  EXPECT_THROW(m.forward(at::zeros({1, 65}, at::kLong)), Error);          // > max_position_embeddings 64
  EXPECT_THROW(m.forward(at::zeros({3}, at::kLong)), Error);              // not [batch, seq]
  EXPECT_THROW(m.set_compute(c10::Device(c10::kCPU), at::kHalf), Error);  // half needs CUDA
}

// A packed forward needs every token to see itself (a query with no key has no softmax): a mask that hides a token
// from itself is refused, naming the token and the sequence.
TEST(CausalLM, PackedSequencesRefuseATokenHiddenFromItself) {
  CausalLM m = CausalLM::load(fixture("llama_gqa"));
  const at::Tensor ids = at::zeros({2, 4}, at::kLong), positions = at::arange(4, at::kLong).repeat({2, 1});
  at::Tensor hidden = at::ones({4, 4}, at::kBool).triu(1).repeat({2, 1, 1});
  EXPECT_EQ(test::error_message([&] { m.packed_hidden_states(ids, positions, hidden); }), "no error");
  hidden[1][2][2] = true;
  EXPECT_NE(test::error_message([&] {
              m.packed_hidden_states(ids, positions, hidden);
            }).find("token 2 of sequence 1 does not see itself"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] {
              m.packed_hidden_states(ids, positions, hidden.narrow(1, 0, 3));
            }).find("expected [batch, seq], [batch, seq], [batch, seq, seq]"),
            std::string::npos);
}

TEST(CausalLM, GoldenLogits_CUDA) {
  // Gemma 2's soft-capped attention takes batched steps where the others take the fused kernel.
  for (const char* name : {"opt_pre", "llama_gqa", "qwen3_qknorm", "olmo2_post", "gemma2_softcap",
                           "gemma3_local_global", "gemma3_multimodal", "phi3_longrope", "phi3_swa", "qwen3_moe_routed",
                           "qwen2_moe_shared", "mixtral_top2", "olmoe_clip"}) {
    CausalLM m = CausalLM::load(fixture(name));
    io::SafetensorsFile golden(fixture(std::string(name) + ".golden.safetensors"));
    m.set_compute(c10::Device(c10::kCUDA, 0), at::kFloat);
    m.load_all();
    at::Tensor logits = m.forward(golden.tensor("input_ids"));
    EXPECT_TRUE(logits.is_cuda());
    EXPECT_ALL_CLOSE(logits.cpu(), golden.tensor("logits"), 2e-3, 2e-3);  // TF32 may be on for CUDA matmuls
    m.set_compute(c10::Device(c10::kCUDA, 0), at::kBFloat16);
    EXPECT_ALL_CLOSE(m.forward(golden.tensor("input_ids")).cpu(), golden.tensor("logits"), 0.3, 0.1);
  }
}

}  // namespace
}  // namespace alps::model
