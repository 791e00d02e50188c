// Structure-aware fuzz target: the input bytes are a script of choices that builds a small
// valid ONNX graph (op types from a list, inputs from earlier values or new constants,
// attributes, shapes), so mutations reach shape inference, planning and the kernels instead
// of dying in the protobuf parser.
#include <onnx/onnx_pb.h>

#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"

namespace {

using grove::fuzz::Choices;

struct OpSpec {
  const char* type;
  int float_inputs;        // inputs taken from earlier float values
  int int64_inputs;        // then this many small int64 constants (shapes, axes, indices)
  std::vector<const char*> attrs;  // integer or integer-list attributes it may get
};

const std::vector<OpSpec>& op_specs() {
  static const std::vector<OpSpec> specs = {
      {"Relu", 1, 0, {}}, {"Sigmoid", 1, 0, {}}, {"Tanh", 1, 0, {}}, {"Exp", 1, 0, {}},
      {"Sqrt", 1, 0, {}}, {"Erf", 1, 0, {}}, {"Neg", 1, 0, {}}, {"LeakyRelu", 1, 0, {}},
      {"Add", 2, 0, {}}, {"Mul", 2, 0, {}}, {"Sub", 2, 0, {}}, {"Div", 2, 0, {}}, {"Pow", 2, 0, {}},
      {"MatMul", 2, 0, {}}, {"Gemm", 3, 0, {"transA", "transB"}},
      {"Conv", 3, 0, {"group", "kernel_shape", "strides", "pads", "dilations"}},
      {"ConvTranspose", 2, 0, {"group", "strides", "pads", "output_padding"}},
      {"MaxPool", 1, 0, {"kernel_shape", "strides", "pads", "ceil_mode"}},
      {"AveragePool", 1, 0, {"kernel_shape", "strides", "pads", "count_include_pad"}},
      {"GlobalAveragePool", 1, 0, {}}, {"Softmax", 1, 0, {"axis"}},
      {"LayerNormalization", 3, 0, {"axis"}}, {"BatchNormalization", 5, 0, {}},
      {"Transpose", 1, 0, {"perm"}}, {"Flatten", 1, 0, {"axis"}}, {"Concat", 2, 0, {"axis"}},
      {"ReduceMean", 1, 0, {"axes", "keepdims"}}, {"ReduceSum", 1, 1, {"keepdims"}},
      {"ReduceMax", 1, 0, {"axes", "keepdims"}}, {"ArgMax", 1, 0, {"axis", "keepdims"}},
      {"Reshape", 1, 1, {}}, {"Expand", 1, 1, {}}, {"Unsqueeze", 1, 1, {}}, {"Squeeze", 1, 1, {}},
      {"Slice", 1, 3, {}}, {"Gather", 1, 1, {"axis"}}, {"Pad", 1, 1, {}}, {"Tile", 1, 1, {}},
      {"Split", 1, 0, {"axis"}}, {"CumSum", 1, 1, {}}, {"TopK", 1, 1, {"axis"}},
      {"Clip", 1, 0, {}}, {"DepthToSpace", 1, 0, {"blocksize"}}, {"Resize", 1, 0, {}},
  };
  return specs;
}

void set_shape(onnx::TensorProto* t, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) t->add_dims(d);
}

std::vector<int64_t> random_dims(Choices& c, int max_rank) {
  std::vector<int64_t> dims(static_cast<size_t>(c.pick(max_rank + 1)));
  for (int64_t& d : dims) d = c.small(1, 6);
  return dims;
}

class Builder {
 public:
  explicit Builder(Choices& c) : c_(c) {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(c.pick(2) ? 13 : 17);
    graph_ = model_.mutable_graph();
    onnx::ValueInfoProto* x = graph_->add_input();
    x->set_name("x");
    auto* type = x->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    std::vector<int64_t> dims = random_dims(c, 4);
    for (int64_t d : dims) type->mutable_shape()->add_dim()->set_dim_value(d);
    floats_.push_back("x");
  }

  void add_node() {
    const OpSpec& spec = op_specs()[static_cast<size_t>(c_.pick(static_cast<int>(op_specs().size())))];
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(spec.type);
    n->set_name("n" + std::to_string(graph_->node_size()));
    for (int i = 0; i < spec.float_inputs; ++i) n->add_input(c_.pick(3) ? earlier_float() : float_constant());
    for (int i = 0; i < spec.int64_inputs; ++i) n->add_input(int64_constant());
    for (const char* a : spec.attrs)
      if (c_.pick(2)) add_int_attribute(n, a);
    int outputs = std::string(spec.type) == "Split" || std::string(spec.type) == "TopK" ? 2 : 1;
    for (int i = 0; i < outputs; ++i) {
      std::string out = n->name() + "_" + std::to_string(i);
      n->add_output(out);
      if (i == 0) floats_.push_back(out);
    }
  }

  std::string finish() {
    graph_->add_output()->set_name(floats_.back());
    return model_.SerializeAsString();
  }

 private:
  std::string earlier_float() { return floats_[static_cast<size_t>(c_.pick(static_cast<int>(floats_.size())))]; }

  std::string float_constant() {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name("cf" + std::to_string(graph_->initializer_size()));
    t->set_data_type(onnx::TensorProto::FLOAT);
    std::vector<int64_t> dims = random_dims(c_, 4);
    set_shape(t, dims);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    for (int64_t i = 0; i < n; ++i) t->add_float_data(static_cast<float>(c_.small(-8, 8)) / 4.0f);
    return t->name();
  }

  std::string int64_constant() {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name("ci" + std::to_string(graph_->initializer_size()));
    t->set_data_type(onnx::TensorProto::INT64);
    int64_t n = c_.pick(5);
    set_shape(t, {n});
    for (int64_t i = 0; i < n; ++i) t->add_int64_data(c_.small(-3, 6));
    return t->name();
  }

  void add_int_attribute(onnx::NodeProto* n, const char* name) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    static const std::set<std::string> kLists = {"kernel_shape", "strides", "pads", "dilations",
                                                 "perm", "axes", "output_padding"};
    if (kLists.count(name)) {
      a->set_type(onnx::AttributeProto::INTS);
      int k = c_.pick(5);
      for (int i = 0; i < k; ++i) a->add_ints(c_.small(-2, 4));
    } else {
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(c_.small(-2, 4));
    }
  }

  Choices& c_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_;
  std::vector<std::string> floats_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Choices choices(data, size);
  Builder builder(choices);
  int nodes = 1 + choices.pick(6);
  for (int i = 0; i < nodes && !choices.done(); ++i) builder.add_node();
  grove::fuzz::load_plan_run(builder.finish());
  return 0;
}
