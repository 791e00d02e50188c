#pragma once
// Shape binding: fixes every dynamic input dimension, then walks the graph once giving each
// value a dtype and static shape. Nodes whose inputs are all constant (including Shape of a
// value whose shape is now known) are evaluated with the reference implementation and
// become initializers, so the Shape->Gather->Unsqueeze->Concat->Reshape chains of
// dynamic-axes exports vanish.
#include <map>
#include <string>

#include "graph/graph.h"
#include "graph/limits.h"

namespace grove {

// Parses "x=1x3x224x224" into ("x", {1,3,224,224}); throws a clear Error on bad syntax.
std::pair<std::string, Shape> parse_shape_binding(const std::string& text);

// Chooses each input's shape: `shapes` where given (checked against the declared rank and
// fixed dims), else the declared shape when it is fully static. Throws naming the input
// and its symbolic dims when neither works.
ShapeMap resolve_input_shapes(const Graph& graph, const ShapeMap& shapes);

// Binds `graph` in place to the resolved input shapes: fills graph.values and
// graph.bound_inputs and folds constant nodes into initializers. The bytes of weights, inputs
// and every node's outputs are charged to limits.max_memory as each node's shapes are
// inferred, before it is folded: a model whose declared tensors exceed it is an Error naming
// the node.
void bind_shapes(Graph& graph, const ShapeMap& shapes, const Limits& limits = {});

}  // namespace grove
