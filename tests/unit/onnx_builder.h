#pragma once
// Builds small ONNX models in memory for tests, with the protobuf classes from libonnx-dev,
// so tests need no Python and no files in the repo.
#include <onnx/onnx_pb.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace grove::test {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int opset = 13) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // dims: a number, or -1 for a symbolic dim named "N".
  OnnxBuilder& input(const std::string& name, int elem_type, std::vector<int64_t> dims) {
    fill(model_.mutable_graph()->add_input(), name, elem_type, dims);
    return *this;
  }
  OnnxBuilder& output(const std::string& name, int elem_type, std::vector<int64_t> dims) {
    fill(model_.mutable_graph()->add_output(), name, elem_type, dims);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::initializer_list<std::string> in,
                        std::initializer_list<std::string> out, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + std::to_string(model_.graph().node_size()) : name);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return *n;
  }
  onnx::TensorProto& initializer_f32(const std::string& name, std::vector<int64_t> dims, std::vector<float> values,
                                     bool raw = true) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    if (raw) t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    else
      for (float v : values) t->add_float_data(v);
    return *t;
  }
  // Any dtype from its little-endian bytes (raw_data).
  onnx::TensorProto& initializer_raw(const std::string& name, int elem_type, std::vector<int64_t> dims,
                                     const void* bytes, size_t size) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem_type);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(bytes), size));
    return *t;
  }
  onnx::TensorProto& initializer_i64(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_int64_data(v);
    return *t;
  }
  onnx::TensorProto& initializer_bool(const std::string& name, std::vector<int64_t> dims, std::vector<bool> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::BOOL);
    for (auto d : dims) t->add_dims(d);
    for (bool v : values) t->add_int32_data(v ? 1 : 0);
    return *t;
  }
  static void attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_ints(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

  onnx::ModelProto& proto() { return model_; }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  static void fill(onnx::ValueInfoProto* v, const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (auto d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0) dim->set_dim_param("N");
      else dim->set_dim_value(d);
    }
  }
  onnx::ModelProto model_;
};

}  // namespace grove::test
