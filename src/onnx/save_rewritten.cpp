#include "onnx/save_rewritten.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "graph/error.h"
#include "onnx/graph_reads.h"

namespace grove {
namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

void fill_proto(onnx::TensorProto& tp, const std::string& name, const Tensor& t) {
  tp.Clear();
  tp.set_name(name);
  tp.set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.shape()) tp.add_dims(d);
  tp.set_raw_data(std::string(reinterpret_cast<const char*>(t.raw()), t.bytes()));
}

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open");
  std::ostringstream bytes;
  bytes << f.rdbuf();
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes.str())) throw Error(path + ": not an ONNX model (protobuf parse failed)");
  for (const auto& t : model.graph().initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      throw Error(path + ": initializer '" + t.name() + "' has external data; rewriting weights needs them in the file");
    if (t.data_type() == onnx::TensorProto::FLOAT16 || t.data_type() == onnx::TensorProto::BFLOAT16)
      throw Error(path + ": initializer '" + t.name() + "' is a 16-bit float; rewriting weights supports float32 models");
  }
  return model;
}

}  // namespace

void save_rewritten(const std::string& source_path, const Graph& imported, const Graph& rewritten,
                    const std::string& out_path) {
  onnx::ModelProto model = read_model(source_path);
  onnx::GraphProto& g = *model.mutable_graph();

  // The initializers the rewrite changed or added.
  std::set<std::string> written;
  for (const auto& [name, t] : rewritten.initializers) {
    auto before = imported.initializers.find(name);
    if (before == imported.initializers.end() || !same_tensor(before->second, t)) written.insert(name);
  }

  // Nodes are matched by their first output: import sorts them, and names them when unnamed.
  std::map<std::string, onnx::NodeProto*> by_output;
  for (auto& n : *g.mutable_node())
    if (n.output_size() > 0) by_output[n.output(0)] = &n;
  for (const Node& n : rewritten.nodes) {
    auto it = n.outputs.empty() ? by_output.end() : by_output.find(n.outputs[0]);
    if (it == by_output.end() || it->second->input_size() != static_cast<int>(n.inputs.size()))
      throw Error(source_path + ": " + n.describe() + " of the rewritten graph is not a node of the file");
    onnx::NodeProto& p = *it->second;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (p.input(static_cast<int>(i)) != n.inputs[i]) p.set_input(static_cast<int>(i), n.inputs[i]);
    if (!n.has_attr("group")) continue;
    onnx::AttributeProto* group = nullptr;
    for (auto& a : *p.mutable_attribute())
      if (a.name() == "group") group = &a;
    if (!group) {
      group = p.add_attribute();
      group->set_name("group");
      group->set_type(onnx::AttributeProto::INT);
    }
    group->set_i(n.attr_int("group", 1));
  }

  // A Constant (or an Identity the rewrite folded) whose output is now a written initializer
  // makes way for it.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (auto& n : *g.mutable_node()) {
    bool replaced = n.output_size() > 0;
    for (const auto& out : n.output()) replaced &= written.count(out) > 0;
    if (!replaced) *kept.Add() = std::move(n);
  }
  g.mutable_node()->Swap(&kept);

  std::map<std::string, onnx::TensorProto*> initializers;
  for (auto& t : *g.mutable_initializer()) initializers[t.name()] = &t;
  for (const std::string& name : written) {
    auto it = initializers.find(name);
    fill_proto(it != initializers.end() ? *it->second : *g.add_initializer(), name, rewritten.initializers.at(name));
  }
  // Initializers the rewrite dropped, once nothing reads them.
  std::set<std::string> read;
  collect_reads(g, read);
  for (const auto& o : g.output()) read.insert(o.name());
  for (const auto& i : g.input()) read.insert(i.name());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept_initializers;
  for (auto& t : *g.mutable_initializer()) {
    const bool dropped = !rewritten.initializers.count(t.name()) && !read.count(t.name());
    if (!dropped) *kept_initializers.Add() = std::move(t);
  }
  g.mutable_initializer()->Swap(&kept_initializers);
  g.clear_value_info();

  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out) || !out.flush()) throw Error("cannot write '" + out_path + "'");
}

}  // namespace grove
