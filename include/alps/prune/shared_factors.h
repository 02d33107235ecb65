#pragma once
// Work that the solves of linears reading one input can share. Such linears (q/k/v, gate/up) have one G, so a
// method's factorization of it (ALPS's scaled Hessian and its eigendecomposition) is the same for all of them: the
// first solve stores it, the next ones of the group take it. The key names everything the tensors depend on
// besides G (method, damping, precision), so that another method or constant never takes a wrong entry.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace alps::prune {

class SharedFactors {
 public:
  /// How many linears read this input: a factorization made once serves them all, which a solve weighs when it
  /// chooses between a factorization per layer and one shared eigendecomposition.
  int64_t users = 1;
  /// Whether G passed check_gram (prune/problem.h) in the solve of one of them: the others skip the O(in^3) check.
  bool gram_checked = false;

  /// The tensors stored under `key`, or nullptr.
  const std::vector<at::Tensor>* find(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void store(const std::string& key, std::vector<at::Tensor> tensors) { entries_[key] = std::move(tensors); }

 private:
  std::map<std::string, std::vector<at::Tensor>> entries_;
};

}  // namespace alps::prune
