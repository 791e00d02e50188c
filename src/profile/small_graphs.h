#pragma once
// The one-op models the profiles time (a sampled conv, a layout change), built in memory:
// opset 13, one float input "x", one output "y".
#include <string>
#include <string_view>
#include <vector>

#include "grove/model.h"

namespace grove::profile {

// A graph named `name` with input x of `shape` and output y declared; the caller adds the nodes.
Graph one_input_graph(const std::string& name, const Shape& shape);

// A node of the default domain at opset 13.
Node opset13_node(const std::string& name, std::string_view op_type, std::vector<std::string> inputs,
                  std::vector<std::string> outputs);

// Sets an ints attribute.
void set_ints(Node& node, const std::string& key, std::vector<int64_t> values);

}  // namespace grove::profile
