#include "alps/prune/problem.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "alps/core/error.h"
#include "alps/io/safetensors.h"

namespace alps::prune {

namespace {
std::string shape_str(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

bool all_finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }
}  // namespace

void check_problem(const LayerProblem& p, const std::string& what) {
  ALPS_CHECK(p.W0.defined() && p.W0.dim() == 2 && p.W0.size(0) > 0 && p.W0.size(1) > 0, what,
             ": weight must be a non-empty [out, in] matrix, got ", p.W0.defined() ? shape_str(p.W0) : "none");
  const int64_t in = p.W0.size(1);
  ALPS_CHECK(p.G.defined() && p.G.dim() == 2 && p.G.size(0) == in && p.G.size(1) == in, what, ": gram must be [",
             in, ", ", in, "] for weight ", shape_str(p.W0), ", got ", p.G.defined() ? shape_str(p.G) : "none");
  ALPS_CHECK(at::isFloatingType(p.W0.scalar_type()) && at::isFloatingType(p.G.scalar_type()), what,
             ": weight and gram must be floating point");
  ALPS_CHECK(p.W0.device() == p.G.device(), what, ": weight on ", p.W0.device(), " but gram on ", p.G.device());
  ALPS_CHECK(all_finite(p.W0), what, ": weight contains NaN or Inf");
  ALPS_CHECK(all_finite(p.G), what, ": gram contains NaN or Inf");
  ALPS_CHECK(p.G.diagonal().min().item<double>() >= 0, what, ": gram has a negative diagonal entry (not X^T X)");
  ALPS_CHECK(p.tokens >= 0, what, ": tokens must be >= 0, got ", p.tokens);
  if (p.mean.defined()) {
    ALPS_CHECK(p.mean.dim() == 1 && p.mean.size(0) == in, what, ": mean must be [", in, "], got ", shape_str(p.mean));
    ALPS_CHECK(all_finite(p.mean), what, ": mean contains NaN or Inf");
  }
}

double relative_error(const LayerProblem& p, const at::Tensor& W) {
  ALPS_CHECK(W.sizes() == p.W0.sizes(), "relative_error: W is ", shape_str(W), " but the problem's weight is ",
             shape_str(p.W0));
  at::Tensor W0 = p.W0.to(at::kDouble);
  at::Tensor G = p.G.to(at::kDouble);
  at::Tensor delta = W.to(W0.device(), at::kDouble) - W0;  // [out, in]
  const double num = (delta.matmul(G) * delta).sum().item<double>();
  const double den = (W0.matmul(G) * W0).sum().item<double>();
  ALPS_CHECK(den > 0, "relative_error: tr(W0 G W0^T) = ", den, " (zero weights or zero gram), the error is undefined");
  return num / den;
}

LayerProblem load_problem(const std::filesystem::path& path) {
  io::SafetensorsFile file(path);
  auto floating = [&](const std::string& name) {
    at::Tensor t = file.tensor(name);
    ALPS_CHECK(at::isFloatingType(t.scalar_type()), "tensor '", name, "' in ", path.string(),
               ": expected a floating dtype, got ", t.scalar_type());
    return t;
  };
  ALPS_CHECK(file.contains("weight") && file.contains("gram"), path.string(),
             ": a layer problem needs tensors 'weight' [out, in] and 'gram' [in, in]");
  LayerProblem p;
  p.W0 = floating("weight").to(at::kFloat).clone();
  at::Tensor G = floating("gram");
  p.G = (G.scalar_type() == at::kDouble ? G : G.to(at::kFloat)).clone();
  if (file.contains("mean")) p.mean = floating("mean").to(at::kFloat).clone();
  const auto& meta = file.metadata();
  const auto tokens = meta.find("tokens");
  ALPS_CHECK(tokens != meta.end(), path.string(), ": metadata 'tokens' (the T behind gram) is missing");
  size_t used = 0;
  try {
    p.tokens = std::stoll(tokens->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ALPS_CHECK(used > 0 && used == tokens->second.size() && p.tokens >= 0, path.string(),
             ": metadata 'tokens' must be a non-negative integer, got '", tokens->second, "'");
  if (const auto name = meta.find("name"); name != meta.end()) p.name = name->second;
  check_problem(p, path.string());
  return p;
}

void save_problem(const std::filesystem::path& path, const LayerProblem& p) {
  check_problem(p, "save_problem " + path.string());
  std::vector<std::pair<std::string, at::Tensor>> tensors = {{"weight", p.W0.cpu().contiguous()},
                                                             {"gram", p.G.cpu().contiguous()}};
  if (p.mean.defined()) tensors.emplace_back("mean", p.mean.cpu().contiguous());
  std::map<std::string, std::string> meta = {{"tokens", std::to_string(p.tokens)}};
  if (!p.name.empty()) meta["name"] = p.name;
  io::save_safetensors(path, tensors, meta);
}

}  // namespace alps::prune
