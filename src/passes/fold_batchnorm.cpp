// BatchNormalization after Conv: y = s * (conv(x) - mean) + beta with s = gamma / sqrt(var + eps)
// is conv with weights W * s (per output channel) and bias (b - mean) * s + beta.
#include <cmath>
#include <set>

#include "ops/op_names.h"
#include "passes/passes.h"

namespace grove {

namespace {
const Tensor* constant_f32(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  if (it == g.initializers.end() || it->second.dtype() != DType::f32) return nullptr;
  return &it->second;
}
}  // namespace

void fold_batchnorm_into_conv(Graph& g) {
  std::map<std::string, int> readers;
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs) ++readers[in];
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs) producer[o] = i;

  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t bi = 0; bi < g.nodes.size(); ++bi) {
    const Node& bn = g.nodes[bi];
    if (bn.op_type != kBatchNormalization || !bn.domain.empty() || bn.inputs.size() != 5) continue;
    if (bn.attr_int("training_mode", 0) != 0) continue;
    bool extra = false;
    for (size_t k = 1; k < bn.outputs.size(); ++k) extra |= !bn.outputs[k].empty();
    if (extra) continue;
    auto p = producer.find(bn.inputs[0]);
    if (p == producer.end()) continue;
    Node& conv = g.nodes[p->second];
    if (conv.op_type != kConv || !conv.domain.empty() || conv.outputs.size() != 1) continue;
    if (readers[bn.inputs[0]] != 1 || graph_outputs.count(bn.inputs[0])) continue;
    const Tensor* w = constant_f32(g, conv.inputs[1]);
    const Tensor* b = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? constant_f32(g, conv.inputs[2]) : nullptr;
    const Tensor *gamma = constant_f32(g, bn.inputs[1]), *beta = constant_f32(g, bn.inputs[2]);
    const Tensor *mean = constant_f32(g, bn.inputs[3]), *var = constant_f32(g, bn.inputs[4]);
    if (!w || !gamma || !beta || !mean || !var || w->rank() < 3) continue;
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !b) continue;
    int64_t oc = w->dim(0);
    if (gamma->numel() != oc || beta->numel() != oc || mean->numel() != oc || var->numel() != oc) continue;

    float eps = bn.attr_float("epsilon", 1e-5f);
    Tensor new_w = w->clone(), new_b(DType::f32, {oc});
    int64_t per_oc = w->numel() / oc;
    for (int64_t c = 0; c < oc; ++c) {
      float s = gamma->data<float>()[c] / std::sqrt(var->data<float>()[c] + eps);
      float* wc = new_w.data<float>() + c * per_oc;
      for (int64_t k = 0; k < per_oc; ++k) wc[k] *= s;
      float bias = b ? b->data<float>()[c] : 0.f;
      new_b.data<float>()[c] = (bias - mean->data<float>()[c]) * s + beta->data<float>()[c];
    }
    // New names: the original weights may be shared with another Conv.
    std::string wname = conv.name + "/bn_folded_weight", bname = conv.name + "/bn_folded_bias";
    Tensor& wt = g.initializers[wname] = std::move(new_w);
    Tensor& bt = g.initializers[bname] = std::move(new_b);
    g.values[wname] = ValueInfo{DType::f32, wt.shape(), nullptr, true};
    g.values[bname] = ValueInfo{DType::f32, bt.shape(), nullptr, true};
    conv.inputs.resize(3);
    conv.inputs[1] = wname;
    conv.inputs[2] = bname;
    conv.outputs[0] = bn.outputs[0];
    drop[bi] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace grove
