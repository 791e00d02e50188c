#include "quantize/qdq_model.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "graph/error.h"
#include "onnx/graph_reads.h"
#include "onnx/import.h"
#include "ops/op_names.h"

namespace grove::quantize {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

std::string describe(const NodeProto& n) {
  return "node '" + (n.name().empty() ? (n.output_size() ? n.output(0) : std::string()) : n.name()) + "' (" +
         n.op_type() + ")";
}

int64_t attr_int(const NodeProto& n, const std::string& key, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == key) return a.i();
  return fallback;
}

float attr_float(const NodeProto& n, const std::string& key, float fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == key) return a.f();
  return fallback;
}

std::vector<float> float_values(const TensorProto& t) {
  int64_t count = 1;
  for (int64_t d : t.dims()) count *= d;
  std::vector<float> v(static_cast<size_t>(count));
  if (!t.raw_data().empty()) {
    if (t.raw_data().size() != v.size() * sizeof(float))
      throw Error("quantize: initializer '" + t.name() + "' holds " + std::to_string(t.raw_data().size()) +
                  " bytes for " + std::to_string(count) + " floats");
    std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    if (t.float_data_size() != count)
      throw Error("quantize: initializer '" + t.name() + "' holds " + std::to_string(t.float_data_size()) +
                  " floats for its shape");
    std::copy(t.float_data().begin(), t.float_data().end(), v.begin());
  }
  return v;
}

template <class T>
TensorProto make_tensor(const std::string& name, int dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
  return t;
}

// Scale and zero point of an asymmetric uint8 range that always holds 0 (so zero padding and
// ReLU's zeros are exact).
std::pair<float, uint8_t> uint8_params(TensorRange r) {
  const float lo = std::min(r.lo, 0.0f), hi = std::max(r.hi, 0.0f);
  const float scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  const float zero = std::nearbyint(std::clamp(-lo / scale, 0.0f, 255.0f));
  return {scale, static_cast<uint8_t>(zero)};
}

struct Candidate {
  int node = 0;
  int axis = 0;              // the weight's output-channel axis
  bool quantize_bias = false;
  std::string output;        // quantized output tensor ("" for none)
};

class Rewriter {
 public:
  Rewriter(onnx::ModelProto& model, bool per_channel) : g_(*model.mutable_graph()), per_channel_(per_channel) {
    for (const auto& t : g_.initializer()) initializers_[t.name()] = &t;
    for (const auto& i : g_.input()) graph_inputs_.insert(i.name());
    for (const auto& o : g_.output()) graph_outputs_.insert(o.name());
    for (const auto& n : g_.node())
      for (const auto& in : n.input()) ++uses_[in];
    for (const auto& n : g_.node())
      for (const auto& o : n.output()) names_.insert(o);
    for (const auto& [name, t] : initializers_) names_.insert(name);
    names_.insert(graph_inputs_.begin(), graph_inputs_.end());
  }

  // Conv -> BatchNormalization (inference, constants, the BN the Conv's only reader) becomes
  // one Conv with scaled weights and a bias, as ONNX Runtime's quantization pre-processing
  // does: quantizing between them would round the Conv's output at the wrong scale and keep
  // the BN as a float op between integer ones. Returns how many were folded.
  int fold_batchnorms() {
    std::map<std::string, int> producer;
    for (int i = 0; i < g_.node_size(); ++i)
      for (const auto& o : g_.node(i).output()) producer[o] = i;
    std::set<int> drop;
    for (int bi = 0; bi < g_.node_size(); ++bi) {
      const NodeProto& bn = g_.node(bi);
      if (bn.op_type() != kBatchNormalization || !bn.domain().empty() || bn.input_size() != 5 ||
          bn.output_size() != 1 || attr_int(bn, "training_mode", 0) != 0)
        continue;
      auto p = producer.find(bn.input(0));
      if (p == producer.end() || uses_[bn.input(0)] != 1 || graph_outputs_.count(bn.input(0))) continue;
      NodeProto& conv = *g_.mutable_node(p->second);
      if (conv.op_type() != kConv || !conv.domain().empty() || conv.input_size() < 2) continue;
      const TensorProto* w = weight(conv.input(1));
      const TensorProto* b = conv.input_size() > 2 && !conv.input(2).empty() ? weight(conv.input(2)) : nullptr;
      if (!w || w->dims_size() < 3 || (conv.input_size() > 2 && !conv.input(2).empty() && !b)) continue;
      std::vector<std::vector<float>> bn_params;
      for (int k = 1; k < 5; ++k)
        if (const TensorProto* t = weight(bn.input(k))) bn_params.push_back(float_values(*t));
      const int64_t channels = w->dims(0);
      if (bn_params.size() != 4) continue;
      bool shapes_ok = true;
      for (const auto& v : bn_params) shapes_ok = shapes_ok && static_cast<int64_t>(v.size()) == channels;
      if (!shapes_ok) continue;
      const std::vector<float>&gamma = bn_params[0], &beta = bn_params[1], &mean = bn_params[2], &var = bn_params[3];
      std::vector<float> wv = float_values(*w), bv = b ? float_values(*b) : std::vector<float>(channels, 0.0f);
      const float eps = attr_float(bn, "epsilon", 1e-5f);
      const size_t per_channel = wv.size() / static_cast<size_t>(channels);
      for (int64_t c = 0; c < channels; ++c) {
        const float s = gamma[c] / std::sqrt(var[c] + eps);
        for (size_t k = 0; k < per_channel; ++k) wv[c * per_channel + k] *= s;
        bv[c] = (bv[c] - mean[c]) * s + beta[c];
      }
      const std::string wn = unique(conv.input(1) + "_bn_folded"), bnn = unique(bn.output(0) + "_conv_bias");
      add_initializer(make_tensor<float>(wn, TensorProto::FLOAT, std::vector<int64_t>(w->dims().begin(), w->dims().end()), wv));
      add_initializer(make_tensor<float>(bnn, TensorProto::FLOAT, {channels}, bv));
      conv.set_input(1, wn);
      if (conv.input_size() > 2) conv.set_input(2, bnn);
      else conv.add_input(bnn);
      conv.set_output(0, bn.output(0));
      drop.insert(bi);
    }
    if (drop.empty()) return 0;
    google::protobuf::RepeatedPtrField<NodeProto> kept;
    for (int i = 0; i < g_.node_size(); ++i)
      if (!drop.count(i)) *kept.Add() = g_.node(i);
    g_.mutable_node()->Swap(&kept);
    uses_.clear();
    for (const auto& n : g_.node())
      for (const auto& in : n.input()) ++uses_[in];
    return static_cast<int>(drop.size());
  }

  // Picks the nodes to quantize; reasons for the ones left in float go to `report`.
  std::vector<Candidate> choose(QuantizeReport& report) {
    std::map<std::string, int> consumer;  // tensor -> its only consumer's index, or -1
    for (int i = 0; i < g_.node_size(); ++i)
      for (const auto& in : g_.node(i).input()) consumer[in] = consumer.count(in) ? -1 : i;
    std::vector<Candidate> chosen;
    for (int i = 0; i < g_.node_size(); ++i) {
      const NodeProto& n = g_.node(i);
      const std::string& op = n.op_type();
      if (!(n.domain().empty() || n.domain() == "ai.onnx") || (op != kConv && op != kMatMul && op != kGemm)) continue;
      auto skip = [&](const std::string& why) { report.skipped.push_back(describe(n) + ": " + why); };
      // A product of two activations (attention's Q.K^T) has no weights to quantize: not a candidate.
      if (n.input_size() < 2 || !initializers_.count(n.input(1))) continue;
      const TensorProto* w = weight(n.input(1));
      if (!w) {
        skip("weight of another dtype than float32");
        continue;
      }
      if (initializers_.count(n.input(0)) || graph_inputs_.count(n.input(1))) {
        skip("input 0 is a constant, or input 1 can be fed at run time");
        continue;
      }
      Candidate c;
      c.node = i;
      if (op == kConv) {
        if (w->dims_size() < 3) continue;
        c.axis = 0;
        c.quantize_bias = n.input_size() > 2 && weight(n.input(2));
      } else if (op == kMatMul) {
        if (w->dims_size() != 2) {
          skip("weight of rank " + std::to_string(w->dims_size()) + ", not 2");
          continue;
        }
        c.axis = 1;
      } else {
        if (w->dims_size() != 2 || attr_int(n, "transA", 0) != 0) {
          skip("transA or a weight not of rank 2");
          continue;
        }
        c.axis = attr_int(n, "transB", 0) ? 0 : 1;
        c.quantize_bias = n.input_size() > 2 && weight(n.input(2)) && weight(n.input(2))->dims_size() == 1 &&
                          attr_float(n, "alpha", 1.0f) == 1.0f && attr_float(n, "beta", 1.0f) == 1.0f;
      }
      // The output, or the output of a Relu that alone reads it (the two fuse into one op).
      std::string out = n.output(0);
      auto only = consumer.find(out);
      if (!graph_outputs_.count(out) && only != consumer.end() && only->second >= 0 &&
          g_.node(only->second).op_type() == kRelu)
        out = g_.node(only->second).output(0);
      if (!graph_outputs_.count(out) && uses_.count(out)) c.output = out;
      chosen.push_back(c);
      if (op == kConv) ++report.conv;
      else if (op == kMatMul) ++report.matmul;
      else ++report.gemm;
    }
    return chosen;
  }

  // The activation tensors the chosen nodes read and write.
  std::vector<std::string> activations(const std::vector<Candidate>& chosen) const {
    std::vector<std::string> names;
    auto add = [&](const std::string& name) {
      if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    };
    for (const auto& c : chosen) {
      add(g_.node(c.node).input(0));
      add(c.output);
    }
    return names;
  }

  void rewrite(const std::vector<Candidate>& chosen, const std::map<std::string, TensorRange>& ranges) {
    // The QuantizeLinear/DequantizeLinear pair of each activation: placed right after its producer.
    std::map<std::string, std::string> dequantized;  // activation -> its DequantizeLinear output
    std::map<std::string, std::vector<NodeProto>> pairs_after;  // producer output -> nodes to emit after it
    std::vector<NodeProto> at_start;
    std::set<std::string> produced;
    for (const auto& n : g_.node())
      for (const auto& o : n.output()) produced.insert(o);
    for (const auto& [name, range] : ranges) {
      const auto [scale, zero] = uint8_params(range);
      const std::string s = unique(name + "_scale"), z = unique(name + "_zero_point");
      const std::string q = unique(name + "_quantized"), dq = unique(name + "_dequantized");
      add_initializer(make_tensor<float>(s, TensorProto::FLOAT, {}, {scale}));
      add_initializer(make_tensor<uint8_t>(z, TensorProto::UINT8, {}, {zero}));
      std::vector<NodeProto> nodes{make_node(kQuantizeLinear, {name, s, z}, q, -1),
                                   make_node(kDequantizeLinear, {q, s, z}, dq, -1)};
      dequantized[name] = dq;
      scales_[name] = scale;
      auto& where = produced.count(name) ? pairs_after[name] : at_start;
      where.insert(where.end(), nodes.begin(), nodes.end());
    }

    std::map<int, const Candidate*> by_node;
    for (const auto& c : chosen) by_node[c.node] = &c;
    google::protobuf::RepeatedPtrField<NodeProto> old_nodes;
    old_nodes.Swap(g_.mutable_node());
    for (auto& n : at_start) *g_.add_node() = std::move(n);
    for (int i = 0; i < old_nodes.size(); ++i) {
      NodeProto n = old_nodes.Get(i);
      const std::string activation = n.input_size() ? n.input(0) : std::string();
      for (int k = 0; k < n.input_size(); ++k) {
        auto it = dequantized.find(n.input(k));
        if (it != dequantized.end()) n.set_input(k, it->second);
      }
      auto c = by_node.find(i);
      if (c != by_node.end()) quantize_weights(n, *c->second, activation);
      *g_.add_node() = std::move(n);
      for (const auto& o : old_nodes.Get(i).output()) {
        auto it = pairs_after.find(o);
        if (it == pairs_after.end()) continue;
        for (auto& pair : it->second) *g_.add_node() = std::move(pair);
      }
    }
    // Initializers no node reads any more (float weights replaced by int8 ones, folded batch
    // norms) are dropped; a subgraph's reads of outer values count.
    std::set<std::string> read;
    collect_reads(g_, read);
    auto* inits = g_.mutable_initializer();
    for (int i = inits->size(); i-- > 0;)
      if (!read.count(inits->Get(i).name()) && !graph_outputs_.count(inits->Get(i).name()) &&
          !graph_inputs_.count(inits->Get(i).name()))
        inits->DeleteSubrange(i, 1);
  }

 private:
  const TensorProto* weight(const std::string& name) const {
    auto it = initializers_.find(name);
    if (it == initializers_.end() || it->second->data_type() != TensorProto::FLOAT) return nullptr;
    return it->second;
  }

  std::string unique(const std::string& base) {
    std::string name = base;
    for (int i = 2; names_.count(name); ++i) name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  void add_initializer(TensorProto t) {
    *g_.add_initializer() = std::move(t);
    // Pointers into the repeated field may move: index again.
    initializers_.clear();
    for (const auto& i : g_.initializer()) initializers_[i.name()] = &i;
  }

  NodeProto make_node(std::string_view op_type, std::vector<std::string> inputs, const std::string& output, int axis) {
    const std::string op(op_type);
    NodeProto n;
    n.set_op_type(op);
    n.set_name(unique(output + "_" + op));
    for (const auto& in : inputs) n.add_input(in);
    n.add_output(output);
    if (axis >= 0) {
      auto* a = n.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
    }
    return n;
  }

  // Replaces input 1 (and the bias) of `n` by int8 (int32) initializers behind DequantizeLinear
  // nodes, emitted before `n`.
  void quantize_weights(NodeProto& n, const Candidate& c, const std::string& activation) {
    const TensorProto w = *weight(n.input(1));
    const std::vector<float> values = float_values(w);
    std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
    const int64_t channels = per_channel_ ? dims[static_cast<size_t>(c.axis)] : 1;
    // Element e belongs to channel (e / inner) % channels.
    int64_t inner = 1;
    if (per_channel_)
      for (size_t d = static_cast<size_t>(c.axis) + 1; d < dims.size(); ++d) inner *= dims[d];
    std::vector<float> largest(static_cast<size_t>(channels), 0.0f);
    auto channel_of = [&](size_t e) { return per_channel_ ? (static_cast<int64_t>(e) / inner) % channels : 0; };
    for (size_t e = 0; e < values.size(); ++e)
      if (std::isfinite(values[e])) largest[channel_of(e)] = std::max(largest[channel_of(e)], std::fabs(values[e]));
    std::vector<float> scale(largest.size());
    for (size_t ch = 0; ch < scale.size(); ++ch) scale[ch] = largest[ch] > 0 ? largest[ch] / 127.0f : 1.0f;
    std::vector<int8_t> q(values.size());
    for (size_t e = 0; e < values.size(); ++e)
      q[e] = static_cast<int8_t>(std::clamp(std::nearbyint(values[e] / scale[channel_of(e)]), -127.0f, 127.0f));
    const std::vector<int64_t> scale_dims = per_channel_ ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
    const std::string wq = unique(w.name() + "_quantized"), ws = unique(w.name() + "_scale");
    const std::string wz = unique(w.name() + "_zero_point"), wdq = unique(w.name() + "_dequantized");
    add_initializer(make_tensor<int8_t>(wq, TensorProto::INT8, dims, q));
    add_initializer(make_tensor<float>(ws, TensorProto::FLOAT, scale_dims, scale));
    add_initializer(make_tensor<int8_t>(wz, TensorProto::INT8, scale_dims, std::vector<int8_t>(scale.size(), 0)));
    *g_.add_node() = make_node(kDequantizeLinear, {wq, ws, wz}, wdq, per_channel_ ? c.axis : -1);
    n.set_input(1, wdq);

    // The bias at scale x_scale * w_scale, so the integer sums take it exactly.
    auto x_scale = scales_.find(activation);
    if (!c.quantize_bias || x_scale == scales_.end()) return;
    const TensorProto b = *weight(n.input(2));
    const std::vector<float> bias = float_values(b);
    const size_t out_channels = static_cast<size_t>(dims[static_cast<size_t>(c.axis)]);
    if (bias.size() != out_channels) return;
    std::vector<float> bias_scale(out_channels);
    std::vector<int32_t> bq(out_channels);
    for (size_t ch = 0; ch < out_channels; ++ch) {
      bias_scale[ch] = x_scale->second * scale[per_channel_ ? ch : 0];
      const double v = std::nearbyint(static_cast<double>(bias[ch]) / bias_scale[ch]);
      if (!std::isfinite(v) || std::fabs(v) > 2147483647.0) return;  // keep a float bias
      bq[ch] = static_cast<int32_t>(v);
    }
    const std::string bqn = unique(b.name() + "_quantized"), bs = unique(b.name() + "_scale");
    const std::string bdq = unique(b.name() + "_dequantized");
    add_initializer(make_tensor<int32_t>(bqn, TensorProto::INT32, {static_cast<int64_t>(out_channels)}, bq));
    add_initializer(make_tensor<float>(bs, TensorProto::FLOAT, {static_cast<int64_t>(out_channels)}, bias_scale));
    *g_.add_node() = make_node(kDequantizeLinear, {bqn, bs}, bdq, 0);
    n.set_input(2, bdq);
  }

  onnx::GraphProto& g_;
  bool per_channel_;
  std::map<std::string, const TensorProto*> initializers_;
  std::set<std::string> graph_inputs_, graph_outputs_, names_;
  std::map<std::string, int> uses_;
  std::map<std::string, float> scales_;
};

int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

}  // namespace

QuantizeReport quantize_model(const std::string& model_path, const std::string& out_path,
                              const std::vector<TensorMap>& samples, const QuantizeOptions& options,
                              const CalibrationProgress& progress) {
  onnx::ModelProto model;
  {
    std::ifstream f(model_path, std::ios::binary);
    if (!f) throw Error("quantize: cannot open '" + model_path + "'");
    std::ostringstream bytes;
    bytes << f.rdbuf();
    if (!model.ParseFromString(bytes.str())) throw Error(model_path + ": not an ONNX model (protobuf parse failed)");
  }
  for (const auto& t : model.graph().initializer())
    if (t.data_location() == TensorProto::EXTERNAL)
      throw Error(model_path + ": initializer '" + t.name() +
                  "' has external data; grove quantize supports models with all weights inside the file");
  const int64_t opset = default_opset(model);
  if (opset < 10)
    throw Error(model_path + ": opset " + std::to_string(opset) + " has no QuantizeLinear; quantize needs opset 10 or later");

  QuantizeReport report;
  report.per_channel = options.per_channel && opset >= 13;
  Rewriter rewriter(model, report.per_channel);
  report.folded_batchnorms = rewriter.fold_batchnorms();
  const std::vector<Candidate> chosen = rewriter.choose(report);
  const std::vector<std::string> tensors = rewriter.activations(chosen);
  report.activations = static_cast<int>(tensors.size());
  // Calibrated on the model as rewritten so far (batch norms folded), which computes the same
  // function as the original up to float rounding.
  std::string folded;
  if (!model.SerializeToString(&folded)) throw Error("quantize: cannot serialise " + model_path);
  const auto ranges = tensors.empty()
                          ? std::map<std::string, TensorRange>{}
                          : calibrate(load_onnx_bytes(folded, model_path), tensors, samples, options.calibration, progress);
  rewriter.rewrite(chosen, ranges);

  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out)) throw Error("quantize: cannot write '" + out_path + "'");
  return report;
}

}  // namespace grove::quantize
