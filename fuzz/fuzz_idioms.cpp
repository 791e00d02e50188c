// Differential fuzz target: the input bytes are a script of choices that builds a graph from
// the idioms real exporters write (Conv-BatchNorm-activation, BatchNorm after Gemm or Flatten
// on 2-D and 3-D values, squeeze-excitation, PRelu with each slope shape, channel shuffle,
// YOLO Focus slices, weights shared through Identity, opset-9 Slice/Pad/Upsample, weights
// listed as graph inputs, Concat of Convs, broadcasting residual Adds, Gemm with every
// transpose and scale and a 1-D C, Softmax on any axis). The oracle is not crash-freedom: the
// optimized plan on the tile runtime must give the reference executor's numbers on the graph
// as imported (fuzz_common.h); a difference aborts with the two values and the model.
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"

namespace {

using grove::fuzz::Choices;

using Dims = std::vector<int64_t>;

class IdiomBuilder {
 public:
  IdiomBuilder(Choices& c) : c_(c) {
    opset_ = c.chance() ? 9 : 13;
    model_.set_ir_version(opset_ == 9 ? 4 : 8);
    model_.add_opset_import()->set_version(opset_);
    g_ = model_.mutable_graph();
    g_->set_name("idioms");
    // An image: [N, C, H, W] with even H and W (Focus halves them).
    shape_ = {c.small(1, 2), c.small(1, 8), 2 * c.small(2, 6), 2 * c.small(2, 6)};
    declare(g_->add_input(), "x", shape_);
    value_ = "x";
  }

  void add_idiom() {
    if (shape_.size() != 4) return flat_idiom();
    switch (c_.pick(11)) {
      case 0: return conv_bn_activation();
      case 1: return squeeze_excitation();
      case 2: return prelu();
      case 3: return channel_shuffle();
      case 4: return focus();
      case 5: return shared_weights();
      case 6: return concat_of_convs();
      case 7: return residual_add();
      case 8: return slice_pad_resize();
      case 9: return bn_after_flatten();
      default: return softmax();
    }
  }

  std::string finish() {
    // Now and then the declared output shape is wrong: exporters write stale ones, and the
    // runtime must go by the graph, not the declaration.
    Dims declared = shape_;
    if (c_.pick(4) == 0 && !declared.empty()) declared[0] += 3;
    declare(g_->add_output(), value_, declared);
    return model_.SerializeAsString();
  }

 private:
  static void declare(onnx::ValueInfoProto* v, const std::string& name, const Dims& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }

  std::string fresh(const std::string& stem) { return stem + std::to_string(++serial_); }

  // A float initializer of small values; now and then also listed as a graph input (an
  // overridable default, as IR version 3 exporters wrote every weight).
  std::string weight(const Dims& dims, float lo = -0.5f, float hi = 0.5f) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(fresh("w"));
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) t->add_float_data(lo + (hi - lo) * static_cast<float>(c_.byte()) / 255.0f);
    if (c_.pick(8) == 0) declare(g_->add_input(), t->name(), dims);
    return t->name();
  }

  std::string ints(const Dims& values) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(fresh("i"));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }

  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(fresh(op));
    for (auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  }
  static void attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const Dims& v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(v);
  }

  // Conv of x into `out_channels`, k x k, stride 1 or 2, padded to keep the plane or not.
  std::string conv(const std::string& x, const Dims& in, int64_t out_channels, Dims& out_shape, bool grouped) {
    const int64_t k = c_.chance() ? 3 : 1, stride = c_.pick(4) == 0 ? 2 : 1, pad = k == 3 && c_.chance() ? 1 : 0;
    const int64_t group = grouped && in[1] == out_channels && c_.chance() ? in[1] : 1;
    std::vector<std::string> inputs = {x, weight({out_channels, in[1] / group, k, k})};
    if (c_.chance()) inputs.push_back(weight({out_channels}));
    const std::string out = fresh("conv");
    onnx::NodeProto* n = node("Conv", inputs, out);
    attr(n, "kernel_shape", Dims{k, k});
    if (stride != 1) attr(n, "strides", Dims{stride, stride});
    if (pad) attr(n, "pads", Dims{pad, pad, pad, pad});
    if (group != 1) attr(n, "group", group);
    out_shape = {in[0], out_channels, (in[2] + 2 * pad - k) / stride + 1, (in[3] + 2 * pad - k) / stride + 1};
    return out;
  }

  std::string batchnorm(const std::string& x, int64_t channels) {
    Dims c = {channels};
    const std::string out = fresh("bn");
    onnx::NodeProto* n = node("BatchNormalization", {x, weight(c, 0.5f, 1.5f), weight(c), weight(c), weight(c, 0.2f, 2.0f)}, out);
    if (c_.chance()) attr(n, "epsilon", 1e-3f);
    return out;
  }

  std::string activation(const std::string& x) {
    const std::string out = fresh("act");
    switch (c_.pick(5)) {
      case 0: node("Relu", {x}, out); break;
      case 1: {  // ReLU6
        if (opset_ < 11) {
          onnx::NodeProto* n = node("Clip", {x}, out);
          attr(n, "min", 0.0f), attr(n, "max", 6.0f);
        } else {
          onnx::TensorProto* lo = g_->add_initializer();
          lo->set_name(fresh("lo")), lo->set_data_type(onnx::TensorProto::FLOAT), lo->add_float_data(0.0f);
          onnx::TensorProto* hi = g_->add_initializer();
          hi->set_name(fresh("hi")), hi->set_data_type(onnx::TensorProto::FLOAT), hi->add_float_data(6.0f);
          node("Clip", {x, lo->name(), hi->name()}, out);
        }
        break;
      }
      case 2: attr(node("LeakyRelu", {x}, out), "alpha", 0.1f); break;
      case 3: {  // SiLU as exporters spell it
        const std::string s = fresh("sig");
        node("Sigmoid", {x}, s);
        node("Mul", {x, s}, out);
        break;
      }
      default: node("Tanh", {x}, out);
    }
    return out;
  }

  void conv_bn_activation() {
    Dims out;
    std::string v = conv(value_, shape_, c_.small(1, 12), out, true);
    if (c_.chance()) v = batchnorm(v, out[1]);
    if (c_.chance()) v = activation(v);
    value_ = v, shape_ = out;
  }

  void squeeze_excitation() {
    const int64_t c = shape_[1], r = std::max<int64_t>(1, c / 2);
    const std::string pooled = fresh("gap");
    node("GlobalAveragePool", {value_}, pooled);
    const std::string a = fresh("se"), b = fresh("se"), s = fresh("se"), out = fresh("scaled");
    node("Conv", {pooled, weight({r, c, 1, 1}), weight({r})}, a);
    node("Relu", {a}, b);
    node("Conv", {b, weight({c, r, 1, 1}), weight({c})}, s);
    const std::string gate = fresh("gate");
    node("Sigmoid", {s}, gate);
    node("Mul", {value_, gate}, out);
    value_ = out;
  }

  void prelu() {
    const int64_t c = shape_[1];
    const std::vector<Dims> slopes = {{c, 1, 1}, {1}, {1, c, 1, 1}, {shape_[3]}};
    const std::string out = fresh("prelu");
    node("PRelu", {value_, weight(slopes[static_cast<size_t>(c_.pick(4))], -0.3f, 0.3f)}, out);
    value_ = out;
  }

  void channel_shuffle() {
    const int64_t c = shape_[1];
    const int64_t g = c % 2 == 0 ? 2 : c % 3 == 0 ? 3 : 1;
    const std::string a = fresh("shuf"), b = fresh("shuf"), out = fresh("shuf");
    node("Reshape", {value_, ints({shape_[0], g, c / g, shape_[2], shape_[3]})}, a);
    attr(node("Transpose", {a}, b), "perm", Dims{0, 2, 1, 3, 4});
    node("Reshape", {b, ints({shape_[0], c, shape_[2], shape_[3]})}, out);
    value_ = out;
  }

  // YOLOv5's Focus: the four phase-shifted half-resolution slices, concatenated on channels.
  void focus() {
    if (shape_[2] % 2 || shape_[3] % 2 || opset_ < 10) return;  // strided Slice is opset 10's
    std::vector<std::string> parts;
    for (int64_t dy : {0, 1})
      for (int64_t dx : {0, 1}) parts.push_back(slice(value_, {dy, dx}, {shape_[2], shape_[3]}, {2, 3}, {2, 2}));
    const std::string out = fresh("focus");
    attr(node("Concat", parts, out), "axis", int64_t{1});
    value_ = out;
    shape_ = {shape_[0], 4 * shape_[1], shape_[2] / 2, shape_[3] / 2};
  }

  std::string slice(const std::string& x, const Dims& starts, const Dims& ends, const Dims& axes, const Dims& steps) {
    const std::string out = fresh("slice");
    if (opset_ < 10) {  // attributes, and steps of 1 (the only callers with others need opset 10)
      onnx::NodeProto* n = node("Slice", {x}, out);
      attr(n, "starts", starts), attr(n, "ends", ends), attr(n, "axes", axes);
      return out;
    }
    node("Slice", {x, ints(starts), ints(ends), ints(axes), ints(steps)}, out);
    return out;
  }

  // torch 1.13 shares equal weights through Identity: two convs read one initializer.
  void shared_weights() {
    const int64_t c = shape_[1];
    const std::string w = weight({c, c, 1, 1}), b = weight({c});
    const std::string wa = fresh("wid"), wb = fresh("wid"), bb = fresh("bid");
    node("Identity", {w}, wa);
    node("Identity", {w}, wb);
    node("Identity", {b}, bb);
    const std::string a = fresh("conv"), mid = fresh("act"), out = fresh("conv");
    node("Conv", {value_, wa, bb}, a);
    node("Relu", {a}, mid);
    node("Conv", {mid, wb, bb}, out);
    value_ = out;
  }

  // Two convs side by side concatenated on channels (GoogLeNet's branches; the planner
  // writes both straight into the Concat's buffer).
  void concat_of_convs() {
    Dims sa;
    const std::string a = conv(value_, shape_, c_.small(1, 8), sa, false);
    // The second branch has the first's plane: a 1x1 conv of x where the first kept the plane,
    // else a 1x1 conv of the first.
    const bool same_plane = sa[2] == shape_[2] && sa[3] == shape_[3];
    const std::string b = fresh("conv");
    if (same_plane) node("Conv", {value_, weight({4, shape_[1], 1, 1}), weight({4})}, b);
    else node("Conv", {a, weight({4, sa[1], 1, 1})}, b);
    const std::string out = fresh("cat");
    attr(node("Concat", {a, b}, out), "axis", int64_t{1});
    value_ = out, shape_ = {sa[0], sa[1] + 4, sa[2], sa[3]};
  }

  void residual_add() {
    const std::string out = fresh("add");
    if (c_.chance()) {
      // A same-shape conv (3x3 padded, stride 1) added to its input.
      const std::string y = fresh("conv");
      const int64_t c = shape_[1];
      onnx::NodeProto* n = node("Conv", {value_, weight({c, c, 3, 3}, -0.2f, 0.2f), weight({c})}, y);
      attr(n, "pads", Dims{1, 1, 1, 1});
      node("Add", {c_.chance() ? y : value_, c_.chance() ? value_ : y}, out);
    } else {  // a broadcast bias of each exporter's shape
      const std::vector<Dims> biases = {{shape_[1], 1, 1}, {1, shape_[1], 1, 1}, {shape_[3]}, {}};
      const Dims b = biases[static_cast<size_t>(c_.pick(4))];
      node(c_.chance() ? "Add" : "Mul", {value_, weight(b)}, out);
    }
    value_ = out;
  }

  // Opset-9 and opset-13 spellings of Slice, Pad and upsampling.
  void slice_pad_resize() {
    switch (c_.pick(3)) {
      case 0: {
        const int64_t h = shape_[2];
        const int64_t b = c_.small(0, h / 2), e = c_.small(b + 1, h);
        value_ = slice(value_, {b}, {e}, {2}, {1});
        shape_[2] = e - b;
        return;
      }
      case 1: {
        const int64_t p = c_.small(0, 2), q = c_.small(1, 2);
        const std::string out = fresh("pad");
        const Dims pads = {0, 0, p, q, 0, 0, q, p};
        const std::string mode = c_.chance() ? "constant" : "reflect";
        if (mode == "reflect" && (shape_[2] <= q + p || shape_[3] <= q + p)) return;
        if (opset_ < 11) {
          onnx::NodeProto* n = node("Pad", {value_}, out);
          attr(n, "pads", pads), attr(n, "mode", mode);
        } else {
          attr(node("Pad", {value_, ints(pads)}, out), "mode", mode);
        }
        value_ = out;
        shape_[2] += p + q, shape_[3] += p + q;
        return;
      }
      default: {
        const std::string out = fresh("up");
        onnx::TensorProto* s = g_->add_initializer();
        s->set_name(fresh("scales")), s->set_data_type(onnx::TensorProto::FLOAT), s->add_dims(4);
        for (float v : {1.0f, 1.0f, 2.0f, 2.0f}) s->add_float_data(v);
        const std::string mode = c_.chance() ? "nearest" : "linear";
        if (opset_ < 10) attr(node("Upsample", {value_, s->name()}, out), "mode", mode);
        else attr(node("Resize", {value_, "", s->name()}, out), "mode", mode);
        value_ = out;
        shape_[2] *= 2, shape_[3] *= 2;
      }
    }
  }

  // A classifier head: Flatten (or a global pool) then Gemm, and BatchNorm on the [N, C] rows.
  void bn_after_flatten() {
    const std::string flat = fresh("flat");
    if (c_.chance()) {
      const std::string pooled = fresh("gap");
      node("GlobalAveragePool", {value_}, pooled);
      node("Flatten", {pooled}, flat);
      shape_ = {shape_[0], shape_[1]};
    } else {
      node("Flatten", {value_}, flat);
      shape_ = {shape_[0], shape_[1] * shape_[2] * shape_[3]};
    }
    value_ = flat;
    if (shape_[1] > 256) return;
    if (c_.chance()) value_ = batchnorm(value_, shape_[1]);
    gemm();
    if (c_.chance()) value_ = batchnorm(value_, shape_[1]);
  }

  void gemm() {
    const int64_t m = shape_[0], k = shape_[1], n = c_.small(1, 12);
    const bool trans_b = c_.chance(), trans_a = c_.pick(4) == 0;
    std::string a = value_;
    if (trans_a) {  // A stored transposed, as some exporters do
      a = fresh("t");
      attr(node("Transpose", {value_}, a), "perm", Dims{1, 0});
    }
    const std::vector<Dims> cs = {{n}, {1, n}, {m, n}, {1}};
    const std::string out = fresh("gemm");
    onnx::NodeProto* g = node("Gemm", {a, weight(trans_b ? Dims{n, k} : Dims{k, n}), weight(cs[static_cast<size_t>(c_.pick(4))])}, out);
    if (trans_a) attr(g, "transA", int64_t{1});
    if (trans_b) attr(g, "transB", int64_t{1});
    if (c_.chance()) attr(g, "alpha", 0.5f);
    if (c_.chance()) attr(g, "beta", c_.chance() ? 2.0f : 0.0f);
    value_ = out;
    shape_ = {m, n};
  }

  // Idioms on [N, F] values: a Gemm, BatchNorm on 3-D through Unsqueeze, Softmax.
  void flat_idiom() {
    switch (c_.pick(3)) {
      case 0: return gemm();
      case 1: {  // [N, F] -> [N, F, 1] -> BatchNorm over F (a 1-D conv's head) -> back
        const std::string u = fresh("unsq"), b = fresh("sq");
        if (opset_ < 13) attr(node("Unsqueeze", {value_}, u), "axes", Dims{2});
        else node("Unsqueeze", {value_, ints({2})}, u);
        const std::string n = batchnorm(u, shape_[1]);
        if (opset_ < 13) attr(node("Squeeze", {n}, b), "axes", Dims{2});
        else node("Squeeze", {n, ints({2})}, b);
        value_ = b;
        return;
      }
      default: return softmax();
    }
  }

  void softmax() {
    const std::string out = fresh("softmax");
    const int64_t rank = static_cast<int64_t>(shape_.size());
    attr(node(c_.chance() ? "Softmax" : "LogSoftmax", {value_}, out), "axis", c_.small(-rank, rank - 1));
    value_ = out;
  }

  Choices& c_;
  int opset_ = 13;
  onnx::ModelProto model_;
  onnx::GraphProto* g_;
  std::string value_;
  Dims shape_;
  int serial_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Choices choices(data, size);
  IdiomBuilder builder(choices);
  const int idioms = 1 + choices.pick(5);
  for (int i = 0; i < idioms && !choices.done(); ++i) builder.add_idiom();
  const std::string model = builder.finish();
  const std::string difference = grove::fuzz::compare_plan_with_reference(model, 1 + static_cast<int>(size % 3));
  if (!difference.empty()) {
    std::fprintf(stderr, "fuzz_idioms: the optimized plan differs from the reference: %s\n", difference.c_str());
    if (const char* dir = std::getenv("GROVE_FUZZ_MODEL_OUT")) {
      std::FILE* f = std::fopen(dir, "wb");
      if (f) std::fwrite(model.data(), 1, model.size(), f), std::fclose(f);
    }
    std::abort();
  }
  return 0;
}
