#include "graph/graph_hash.h"

#include <bit>

namespace grove {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
// Opens a node's decision record in the hashed stream.
constexpr uint64_t kDecisionsMark = 0x6465636973696f6eull;  // "decision"

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * kFnvPrime;
  return h;
}

// Every field is length-prefixed, so that ("ab", "c") and ("a", "bc") hash differently.
struct Hasher {
  uint64_t h = kFnvOffset;
  void u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    h = fnv1a(h, b, 8);
  }
  void str(const std::string& s) {
    u64(s.size());
    h = fnv1a(h, s.data(), s.size());
  }
  void ints(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) u64(static_cast<uint64_t>(x));
  }
  bool weights = true;  // tensors by their bytes, or by dtype and shape only
  void tensor(const Tensor& t) {
    u64(static_cast<uint64_t>(t.dtype()));
    ints(t.shape());
    if (!weights) return;
    size_t n = t.empty() ? 0 : t.bytes();
    u64(n);
    if (n) h = fnv1a(h, t.raw(), n);
  }
  void attribute(const Attribute& a) {
    u64(static_cast<uint64_t>(a.kind));
    u64(static_cast<uint64_t>(a.i));
    u64(std::bit_cast<uint32_t>(a.f));
    str(a.s);
    ints(a.ints);
    u64(a.floats.size());
    for (float f : a.floats) u64(std::bit_cast<uint32_t>(f));
    u64(a.strings.size());
    for (const auto& s : a.strings) str(s);
    tensor(a.t);
  }
  void decisions(const Decisions& d) {
    u64(static_cast<uint64_t>(d.conv));
    u64(static_cast<uint64_t>(d.conv_source));
    u64(static_cast<uint64_t>(d.precision));
    u64(d.output_bf16);
    u64(d.x_nchw);
    u64(d.y_channel_offset.has_value());
    u64(static_cast<uint64_t>(d.y_channel_offset.value_or(0)));
    const FusedEpilogue& e = d.epilogue;
    u64(static_cast<uint64_t>(e.activation));
    u64(std::bit_cast<uint32_t>(e.alpha));
    u64(std::bit_cast<uint32_t>(e.beta));
    str(e.fused);
    u64(static_cast<uint64_t>(e.fused_flops));
    u64(static_cast<uint64_t>(e.residual_activation));
  }
  void part(const std::optional<Decisions>& d) {
    u64(d.has_value());
    if (d) decisions(*d);
  }
  void decls(const std::vector<ValueDecl>& v) {
    u64(v.size());
    for (const auto& d : v) {
      str(d.name);
      u64(static_cast<uint64_t>(d.dtype));
      u64(d.has_shape);
      u64(d.dims.size());
      for (const auto& dim : d.dims) {
        u64(static_cast<uint64_t>(dim.value));
        str(dim.param);
      }
    }
  }
};

}  // namespace

uint64_t graph_hash(const Graph& g, bool weights) {
  Hasher h;
  h.weights = weights;
  h.u64(g.opsets.size());
  for (const auto& [domain, version] : g.opsets) {
    h.str(domain);
    h.u64(static_cast<uint64_t>(version));
  }
  h.decls(g.inputs);
  h.decls(g.outputs);
  h.u64(g.nodes.size());
  for (const Node& n : g.nodes) {
    h.str(n.op_type);
    h.str(n.domain);
    h.str(n.name);
    h.u64(n.inputs.size());
    for (const auto& s : n.inputs) h.str(s);
    h.u64(n.outputs.size());
    for (const auto& s : n.outputs) h.str(s);
    h.u64(n.attrs.size());
    for (const auto& [key, attr] : n.attrs) {
      h.str(key);
      h.attribute(attr);
    }
    // Decided nodes only, so that a model as imported (nothing decided) keeps the hash it had
    // before decisions were typed: tuning records on disk are keyed by it (tune/record.h).
    if (!n.decisions.empty()) {
      h.u64(kDecisionsMark);
      h.decisions(n.decisions);
      h.part(n.decisions.expand);
      h.part(n.decisions.project);
      h.part(n.decisions.pool);
    }
  }
  h.u64(g.values.size());
  for (const auto& [name, info] : g.values) {
    h.str(name);
    h.u64(static_cast<uint64_t>(info.dtype));
    h.ints(info.shape);
  }
  h.u64(g.initializers.size());
  for (const auto& [name, t] : g.initializers) {
    h.str(name);
    h.tensor(t);
  }
  return h.h;
}

uint64_t bytes_hash(const void* data, size_t n) { return fnv1a(kFnvOffset, data, n); }

}  // namespace grove
