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
    if (!schema) continue;  // an op newer than the model's opset: the op's own rule decides
    auto check = [&](size_t count, int min, int max, const char* what) {
    if (beyond_known) max = std::numeric_limits<int>::max();
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
}

}  // namespace grove
