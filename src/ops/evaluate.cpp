#include "ops/evaluate.h"

#include <exception>

#include "ops/op.h"

namespace grove {
namespace {

const OpSpec& lookup(const Node& node) {
  const OpSpec* def = OpRegistry::builtin().find(node);
  if (!def || !def->infer || !def->reference) throw Unsupported(node.describe() + ": unsupported op");
  return *def;
}

[[noreturn]] void rethrow_with_node(const Node& node) {
  try {
    throw;
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.find("node '") != std::string::npos) throw;
    throw e.prefixed(node.describe() + ": ");
  } catch (const std::exception& e) {
    // std::out_of_range from .at(), std::bad_alloc from a huge bogus shape, ...
    throw Error(node.describe() + ": " + e.what());
  }
}

}  // namespace

std::vector<ValueInfo> infer_node(const Node& node, std::span<const ValueInfo> in) {
  const OpSpec& def = lookup(node);
  std::vector<ValueInfo> out(node.outputs.size());
  try {
    def.infer(node, in, out);
    for (const auto& o : out)
      for (int64_t d : o.shape)
        if (d < 0) throw Error("inferred a negative dimension " + shape_str(o.shape));
  } catch (...) {
    rethrow_with_node(node);
  }
  return out;
}

std::vector<Tensor> evaluate_node(const Node& node, std::span<const Tensor* const> in, int64_t max_output_bytes) {
  std::vector<ValueInfo> infos(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i]) infos[i] = ValueInfo{in[i]->dtype(), in[i]->shape(), in[i], true};
    else infos[i].present = false;
  }
  std::vector<ValueInfo> out_infos = infer_node(node, infos);
  int64_t out_bytes = 0;
  for (const auto& oi : out_infos)
    if (oi.dtype != DType::undefined) {
      const int64_t bytes = checked_mul(numel(oi.shape), static_cast<int64_t>(dtype_size(oi.dtype)));
      if (bytes > max_output_bytes - out_bytes)
        throw Error(node.describe() + ": its outputs need more than the " + std::to_string(max_output_bytes) +
                    " bytes left under the memory limit (raise it with --max-memory)");
      out_bytes += bytes;
    }
  const OpSpec& def = lookup(node);
  std::vector<Tensor> out;
  std::vector<Tensor*> out_ptrs;
  out.reserve(out_infos.size());
  try {
    // An output the node leaves unnamed may be left undefined by infer: it gets no buffer.
    for (const auto& oi : out_infos) {
      if (oi.dtype == DType::undefined) out.emplace_back();
      else out.emplace_back(oi.dtype, oi.shape);
    }
    for (auto& t : out) out_ptrs.push_back(t.empty() ? nullptr : &t);
    def.reference(node, in, out_ptrs);
  } catch (...) {
    rethrow_with_node(node);
  }
  return out;
}

}  // namespace grove
