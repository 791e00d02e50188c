#include "profile/small_graphs.h"

namespace grove::profile {

Graph one_input_graph(const std::string& name, const Shape& shape) {
  Graph g;
  g.name = name;
  g.opsets[""] = 13;
  ValueDecl x{"x", DType::f32, {}, true};
  for (int64_t d : shape) x.dims.push_back(Dim{d, ""});
  g.inputs.push_back(x);
  g.outputs.push_back(ValueDecl{"y", DType::f32, {}, false});
  return g;
}

Node opset13_node(const std::string& name, std::string_view op_type, std::vector<std::string> inputs,
                  std::vector<std::string> outputs) {
  Node n;
  n.name = name;
  n.op_type = std::string(op_type);
  n.opset = 13;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

void set_ints(Node& node, const std::string& key, std::vector<int64_t> values) {
  Attribute& a = node.attrs[key];
  a.kind = Attribute::Kind::ints;
  a.ints = std::move(values);
}

}  // namespace grove::profile
