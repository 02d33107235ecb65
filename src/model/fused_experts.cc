#include "model/fused_experts.h"

#include <ATen/ATen.h>

#include <array>
#include <map>

#include "alps/core/error.h"
#include "alps/core/strings.h"
#include "model/causal_lm_state.h"

namespace alps::model {

namespace {

// The fused tensors' names after their layer's "mlp.experts.", and each expert's projections in their rows.
struct Layout {
  const char* name;
  std::vector<std::string> parts;
};
const std::array<Layout, 2>& layouts() {
  static const std::array<Layout, 2> kLayouts = {
      {{"gate_up_proj", {"gate_proj", "up_proj"}}, {"down_proj", {"down_proj"}}}};
  return kLayouts;
}

std::string expert_tensor(const std::string& experts, int64_t e, const std::string& part) {
  return experts + std::to_string(e) + "." + part + ".weight";
}

// The layout of a held tensor's name when it is a fused experts tensor ("....experts.gate_up_proj"), else null.
const Layout* fused_layout(const std::string& name) {
  for (const Layout& l : layouts()) {
    if (ends_with(name, std::string(".experts.") + l.name)) return &l;
  }
  return nullptr;
}

}  // namespace

std::string unfuse_experts(StoredWeights& w) {
  std::string first;
  std::vector<std::string> order;
  for (const std::string& name : w.order) {
    const Layout* layout = fused_layout(name);
    if (layout == nullptr) {
      order.push_back(name);
      continue;
    }
    const at::Tensor t = w.host.at(name);
    const std::string file = w.file_of.at(name), where = name + " in " + file;
    const auto parts = static_cast<int64_t>(layout->parts.size());
    ALPS_CHECK(t.dim() == 3, where, ": a fused experts tensor is [experts, rows, columns], got ", shape_str(t.sizes()));
    ALPS_CHECK(t.size(1) % parts == 0, where, ": its ", t.size(1), " rows per expert are not ", parts,
               " projections of one size (gate, then up)");
    const int64_t rows = t.size(1) / parts;
    const std::string experts = name.substr(0, name.size() - std::string(layout->name).size());
    for (int64_t e = 0; e < t.size(0); ++e)
      for (int64_t p = 0; p < parts; ++p) {
        const std::string held = expert_tensor(experts, e, layout->parts[static_cast<size_t>(p)]);
        ALPS_CHECK(!w.host.count(held), where, ": its expert ", e, " is also stored apart, as ", held, " in ",
                   w.file_of.at(held));
        const FileSlice slice{name, e, p * rows, rows};
        w.host[held] = slice.of(t);
        w.file_of[held] = file;
        w.sliced[held] = slice;
        order.push_back(held);
      }
    w.host.erase(name);
    w.file_of.erase(name);
    w.fused.push_back({name, experts, layout->parts});
    if (first.empty()) first = name;
  }
  w.order = std::move(order);
  return first;
}

std::vector<OutputTensor> output_tensors(const StoredWeights& w) {
  // Each held tensor that goes into a fused one: that one's index; and how many experts each fused one has now
  // (experts 0 .. n - 1: removing experts renumbers the kept ones).
  std::map<std::string, size_t> member_of;
  std::vector<int64_t> experts(w.fused.size(), 0);
  for (size_t i = 0; i < w.fused.size(); ++i) {
    const FusedTensor& f = w.fused[i];
    for (int64_t e = 0; w.host.count(expert_tensor(f.experts, e, f.parts.front())); ++e, ++experts[i])
      for (const std::string& part : f.parts) {
        const std::string held = expert_tensor(f.experts, e, part);
        ALPS_CHECK(w.host.count(held), "cannot write ", f.name, ": ", held, " is missing");
        member_of[held] = i;
      }
    ALPS_CHECK(experts[i] > 0, "cannot write ", f.name, ": its layer holds no expert");
  }
  std::vector<OutputTensor> out;
  std::vector<bool> placed(w.fused.size(), false);
  for (const std::string& name : w.order) {
    auto it = member_of.find(name);
    if (it == member_of.end()) {
      const at::Tensor t = w.host.at(name);
      out.push_back({io::entry_for(name, t), static_cast<int64_t>(t.nbytes()), [t] { return t; }});
      continue;
    }
    if (placed[it->second]) continue;
    placed[it->second] = true;
    const FusedTensor& f = w.fused[it->second];
    const int64_t n = experts[it->second];
    // Every expert's projections have expert 0's shapes: structured pruning takes the same count from each.
    const at::Tensor& a = w.host.at(expert_tensor(f.experts, 0, f.parts.front()));
    int64_t rows = 0;
    for (const std::string& part : f.parts) rows += w.host.at(expert_tensor(f.experts, 0, part)).size(0);
    for (int64_t e = 0; e < n; ++e)
      for (const std::string& part : f.parts) {
        const at::Tensor& x = w.host.at(expert_tensor(f.experts, e, part));
        const at::Tensor& x0 = w.host.at(expert_tensor(f.experts, 0, part));
        ALPS_CHECK(x.sizes() == x0.sizes() && x.scalar_type() == a.scalar_type(), "cannot write ", f.name, ": ",
                   expert_tensor(f.experts, e, part), " is ", shape_str(x.sizes()), " where expert 0's is ",
                   shape_str(x0.sizes()));
      }
    OutputTensor o;
    o.entry.name = f.name;
    o.entry.dtype = a.scalar_type();
    o.entry.shape = {n, rows, a.size(1)};
    o.bytes = n * rows * a.size(1) * static_cast<int64_t>(a.element_size());
    o.value = [&w, &f, n, rows, a] {
      at::Tensor fused = at::empty({n, rows, a.size(1)}, a.options());
      for (int64_t e = 0; e < n; ++e) {
        int64_t row = 0;
        for (const std::string& part : f.parts) {
          const at::Tensor& x = w.host.at(expert_tensor(f.experts, e, part));
          fused.select(0, e).narrow(0, row, x.size(0)).copy_(x);
          row += x.size(0);
        }
      }
      return fused;
    };
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace alps::model
