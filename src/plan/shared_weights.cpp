#include "plan/shared_weights.h"

#include <algorithm>
#include <cstring>

namespace grove {
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

// The decisions without the FLOPs fused epilogues count (they scale with the activations'
// shape; nothing prepared reads them).
NodeDecisions without_counts(NodeDecisions d) {
  d.epilogue.fused_flops = 0;
  for (std::optional<Decisions>* part : {&d.expand, &d.project, &d.pool})
    if (*part) (*part)->epilogue.fused_flops = 0;
  return d;
}

bool same_node(const Node& a, const Node& b) {
  if (a.op_type != b.op_type || a.domain != b.domain || a.opset != b.opset ||
      !(without_counts(a.decisions) == without_counts(b.decisions)) ||
      a.attrs.size() != b.attrs.size())
    return false;
  for (auto ia = a.attrs.begin(), ib = b.attrs.begin(); ia != a.attrs.end(); ++ia, ++ib)
    if (ia->first != ib->first || !same_attribute(ia->second, ib->second)) return false;
  return true;
}

}  // namespace

const SharedPrepared::Entry* SharedPrepared::find(const Node& node, const TileRule& rule, std::span<const ValueInfo> in,
                                                  const std::vector<const Tensor*>& constants) const {
  for (const Entry& e : entries_) {
    if (e.rule != &rule || e.in.size() != in.size() || e.constants.size() != constants.size()) continue;
    bool same = true;
    for (size_t i = 0; same && i < in.size(); ++i) {
      const bool constant = constants[i] != nullptr;
      same = e.in[i].present == in[i].present && e.in[i].dtype == in[i].dtype &&
             constant == !e.constants[i].empty() && (!constant || same_tensor(e.constants[i], *constants[i])) &&
             ((rule.prepare_ignores_other_shapes && !constant) || e.in[i].shape == in[i].shape);
    }
    if (same && same_node(e.node, node) && !e.prepared.expired()) return &e;
  }
  return nullptr;
}

SharedPrepared::Result SharedPrepared::prepare(const Node& node, const TileRule& rule, std::span<const ValueInfo> in,
                                               const std::vector<const Tensor*>& constants) {
  // The constants the rule reads are the infos' data (node_infos fills both from the graph's
  // initializers); a node without any has nothing worth sharing.
  if (std::none_of(constants.begin(), constants.end(), [](const Tensor* c) { return c != nullptr; }))
    return {rule.prepare(node, in, constants), false};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Entries whose copies no plan holds any more go (and let their constants go).
    std::erase_if(entries_, [](const Entry& e) { return e.prepared.expired(); });
    if (const Entry* e = find(node, rule, in, constants))
      if (std::shared_ptr<const void> p = e->prepared.lock()) return {std::move(p), true};
  }
  // Prepared outside the lock: packing takes long, and other plans' nodes need not wait.
  std::shared_ptr<const void> prepared = rule.prepare(node, in, constants);
  if (!prepared) return {nullptr, false};
  std::lock_guard<std::mutex> lock(mutex_);
  if (const Entry* e = find(node, rule, in, constants))  // another plan prepared it meanwhile
    if (std::shared_ptr<const void> p = e->prepared.lock()) return {std::move(p), true};
  Entry entry{node, &rule, std::vector<ValueInfo>(in.begin(), in.end()), {}, prepared};
  for (ValueInfo& v : entry.in) v.data = nullptr;
  for (const Tensor* c : constants) entry.constants.push_back(c ? *c : Tensor());
  entries_.push_back(std::move(entry));
  return {std::move(prepared), false};
}

size_t SharedPrepared::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.prepared.expired(); }));
}

}  // namespace grove
