#include "onnx/check_arity.h"

#include <onnx/defs/schema.h>

#include <limits>

#include "graph/error.h"

namespace grove {

void check_node_arity(const Graph& g) {
  auto opset = g.opsets.find("");
  if (opset == g.opsets.end()) opset = g.opsets.find("ai.onnx");
  const int version = opset == g.opsets.end() ? 1 : opset->second;
  // Past the newest opset this ONNX library knows, the schema found is an older version's, and
  // a newer version may take more inputs (ReduceMean's axes input from 18): check only minimums.
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const bool beyond_known = known.count("") && version > known.at("").second;
  for (const Node& n : g.nodes) {
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type, version, "");
    // An op newer than the model's opset (a fuzzed model without opset_import holding a
    // LayerNormalization): its newest schema still says how many inputs and outputs the op's
    // rule may index; only the minimums are checked then.
    const bool newer_op = !schema;
    if (newer_op) schema = onnx::OpSchemaRegistry::Schema(n.op_type, std::numeric_limits<int>::max(), "");
    if (!schema) continue;  // not an ONNX op at all: the registry reports it
    auto check = [&](size_t count, int min, int max, const char* what) {
      if (beyond_known || newer_op) max = std::numeric_limits<int>::max();
      if (static_cast<int64_t>(count) >= min && static_cast<int64_t>(count) <= max) return;
      std::string range = min == max ? std::to_string(min)
                                     : std::to_string(min) + " to " + (max == std::numeric_limits<int>::max()
                                                                           ? std::string("any number")
                                                                           : std::to_string(max));
      throw Error(g.path + ": " + n.describe() + ": has " + std::to_string(count) + " " + what + ", opset " +
                  std::to_string(version) + " allows " + range);
    };
    check(n.inputs.size(), schema->min_input(), schema->max_input(), "inputs");
    check(n.outputs.size(), schema->min_output(), schema->max_output(), "outputs");
  }
  for (const Node& n : g.nodes)
    for (const auto& [key, a] : n.attrs)
      if (a.g) check_node_arity(*a.g);
}

}  // namespace grove
