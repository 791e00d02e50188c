#include "plan/shared_weights.h"

#include <cstring>

namespace grove::plan_detail {
namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.raw() == b.raw();
}

bool same_attribute(const Attribute& a, const Attribute& b) {
  if (a.kind != b.kind || a.i != b.i || a.s != b.s || a.ints != b.ints || a.strings != b.strings || a.g != b.g)
    return false;
  // Bit patterns, so that NaN equals itself and 0.0 differs from -0.0.
  if (std::memcmp(&a.f, &b.f, sizeof a.f) != 0 || a.floats.size() != b.floats.size()) return false;
  if (!a.floats.empty() && std::memcmp(a.floats.data(), b.floats.data(), a.floats.size() * sizeof(float)) != 0)
    return false;
  return a.t.numel() == 0 && b.t.numel() == 0 ? a.t.dtype() == b.t.dtype() : same_tensor(a.t, b.t);
}

bool same_node(const Node& a, const Node& b) {
  if (a.op_type != b.op_type || a.domain != b.domain || a.opset != b.opset || !(a.decisions == b.decisions) ||
      a.attrs.size() != b.attrs.size())
    return false;
  for (auto ia = a.attrs.begin(), ib = b.attrs.begin(); ia != a.attrs.end(); ++ia, ++ib)
    if (ia->first != ib->first || !same_attribute(ia->second, ib->second)) return false;
  return true;
}

// Same dtypes and shapes, and the same tensor wherever an input is constant.
bool same_inputs(const std::vector<ValueInfo>& a, const std::vector<ValueInfo>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].present != b[i].present || a[i].dtype != b[i].dtype || a[i].shape != b[i].shape) return false;
    if ((a[i].data == nullptr) != (b[i].data == nullptr)) return false;
    if (a[i].data && !same_tensor(*a[i].data, *b[i].data)) return false;
  }
  return true;
}

}  // namespace

SharedPrepared::Result SharedPrepared::prepare(const Node& node, const TileRule& rule, const NodeInfos& infos,
                                               const std::vector<const Tensor*>& constants) {
  // The constants the rule reads are the infos' data (node_infos fills both from the graph's
  // initializers); a node without any has nothing worth sharing. Candidates are the entries
  // whose first constant is the same buffer.
  const Tensor* first = nullptr;
  for (const Tensor* c : constants)
    if (c && !first) first = c;
  if (!first) {
    std::shared_ptr<const void> prepared = rule.prepare(node, infos.in, constants);
    return {prepared, prepared != nullptr};
  }
  auto [begin, end] = by_first_constant_.equal_range(first->raw());
  for (auto it = begin; it != end; ++it) {
    const Entry& e = entries_[it->second];
    if (e.rule == &rule && same_node(*e.node, node) && same_inputs(e.in, infos.in)) return {e.prepared, false};
  }
  std::shared_ptr<const void> prepared = rule.prepare(node, infos.in, constants);
  if (prepared) {
    by_first_constant_.emplace(first->raw(), entries_.size());
    entries_.push_back({&node, &rule, infos.in, prepared});
  }
  return {prepared, prepared != nullptr};
}

}  // namespace grove::plan_detail
