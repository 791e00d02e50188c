// A network's stem: a conv (ReLU fused) and a 3x3 stride-2 max pool that alone reads its
// output. Run apart, the conv's output (3 MB at ResNet-50's, GoogLeNet's and SqueezeNet's
// stems) is written to memory, to lines no recent op touched, and read back by the pool; fused
// into one grove.internal ConvMaxPoolNhwc (ops/conv_fused/conv_max_pool.h), a tile computes it band by
// band in cache and writes only the pooled quarter. Only float32 channels-last convs with
// constant weights on the row path (the fused rule's), without a residual or bf16, and a
// max pool with one output.
#include "graph/node_decisions.h"
#include "kernels/conv_rows.h"
#include "kernels/isa.h"
#include "ops/conv/channels_last.h"
#include "ops/conv_fused/conv_max_pool.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/flops.h"
#include "passes/fuse_pairs.h"
#include "passes/passes.h"

namespace grove {
namespace {

bool fusable_conv(const Graph& g, const Node& c) {
  if (c.op_type != kConvNhwc || c.domain != kGroveDomain || c.outputs.size() != 1 || c.inputs.size() < 2 ||
      c.inputs.size() > 3 || runs_in_bf16(c) || stores_bf16(c) || conv_primitive_choice(c) != ConvPrimitive::unset ||
      !g.initializers.count(c.inputs[1]))
    return false;
  const Tensor& w = g.initializers.at(c.inputs[1]);
  return w.rank() == 4 && w.dtype() == DType::f32 && c.attr_int("group", 1) == 1;
}

bool fusable_pool(const Node& p) {
  if (p.op_type != kMaxPoolNhwc || p.domain != kGroveDomain || p.inputs.size() != 1) return false;
  for (size_t i = 1; i < p.outputs.size(); ++i)
    if (!p.outputs[i].empty()) return false;  // Indices
  return p.attr_int("storage_order", 0) == 0 && p.attr_ints("kernel_shape").size() == 2;
}

}  // namespace

int fuse_conv_max_pool(Graph& g, const std::set<std::string>& keep) {
  // The fused rule computes the conv on the row kernel only; elsewhere the two stay apart.
  if (!kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32)) return 0;
  return fuse_pairs(g, keep, [&](const Node& c, const Node& p) -> std::optional<Node> {
    if (!fusable_pool(p) || !fusable_conv(g, c)) return std::nullopt;
    Node f = c;
    f.op_type = kConvMaxPoolNhwc;
    f.outputs = {p.outputs[0]};
    for (const auto& [key, value] : p.attrs) f.attrs[kPoolPrefix + key] = value;
    f.decisions.pool = as_part(p.decisions);
    f.decisions.epilogue.fused_flops = node_flops(g, c);
    return f;
  });
}

}  // namespace grove
