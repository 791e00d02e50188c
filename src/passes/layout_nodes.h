#pragma once
// What the layout passes (layout_int8.cpp, layout_f32.cpp) add to a graph: the NHWC shape of
// an NCHW value, and the Transpose node between the two.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "ops/op_names.h"

namespace grove {

inline Shape nhwc_shape(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

// The name of the channels-last copy of an NCHW value, whichever node writes it.
inline std::string channels_last_name(const std::string& value) { return value + "/nhwc"; }

// perm {0, 2, 3, 1}: NCHW -> NHWC; {0, 3, 1, 2}: back.
inline Node transpose_node(const std::string& name, const std::string& from, const std::string& to,
                           std::vector<int64_t> perm) {
  Node t;
  t.name = name;
  t.op_type = kTranspose;
  t.opset = 13;
  t.inputs = {from};
  t.outputs = {to};
  t.attrs["perm"].kind = Attribute::Kind::ints;
  t.attrs["perm"].ints = std::move(perm);
  return t;
}

// The channels-last copy of the NCHW `value`: the one `twin` names, or a new "<value>/nhwc" made
// by a Transpose appended to `out` (and recorded in `twin`).
inline std::string channels_last_copy(Graph& g, const std::string& value, std::map<std::string, std::string>& twin,
                                      std::vector<Node>& out) {
  auto it = twin.find(value);
  if (it != twin.end()) return it->second;
  const std::string name = channels_last_name(value);
  const ValueInfo& v = g.values.at(value);
  g.values[name] = ValueInfo{v.dtype, nhwc_shape(v.shape), nullptr, true};
  out.push_back(transpose_node(name + "/Transpose", value, name, {0, 2, 3, 1}));
  twin[value] = name;
  return name;
}

}  // namespace grove
