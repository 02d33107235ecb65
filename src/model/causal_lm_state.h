#pragma once
// What a CausalLM holds (causal_lm.cc loads, computes with and saves it; structured_edits.cc changes its shapes), for
// the files of src/model that implement CausalLM.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "alps/core/error.h"
#include "alps/model/causal_lm.h"
#include "model/architecture.h"
#include "model/stored_weights.h"

namespace alps::model {

struct CausalLM::State {
  ModelConfig config;
  std::filesystem::path dir;
  std::unique_ptr<Architecture> arch;
  StoredWeights stored;
  c10::Device device{c10::kCPU};
  c10::ScalarType dtype = at::kFloat;
  std::map<std::string, at::Tensor> resident;  // compute device and dtype

  at::Tensor weight(const std::string& name) const {
    if (auto it = resident.find(name); it != resident.end()) return it->second;
    auto it = stored.host.find(name);
    ALPS_CHECK(it != stored.host.end(), "tensor '", name, "' is not part of the checkpoint in ", dir.string());
    return it->second.to(device, dtype);
  }
  WeightFn weight_fn() const {
    return [this](const std::string& name) { return weight(name); };
  }
  void make_resident(const std::string& name) { resident[name] = stored.host.at(name).to(device, dtype); }
};

// The stored tensors' shapes, as the family's structured rules read them.
inline ShapeFn shapes_of(const CausalLM& m) {
  return [&m](const std::string& name) { return m.tensor(name).sizes().vec(); };
}

/// "[2, 3]".
inline std::string shape_str(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace alps::model
