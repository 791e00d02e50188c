#pragma once
// ONNX import: protobuf (Debian's libonnx-dev classes) -> grove::Graph.
// Handles initializers in raw_data and typed fields, external data files beside the model,
// float16 initializers (up-converted to float32) and Constant nodes (turned into
// initializers). Unsupported ops are reported all at once, before anything runs.
#include <string>
#include <string_view>

#include "graph/graph.h"
#include "graph/limits.h"

namespace grove {

// Loads and converts a model file. Throws Error naming the file for unreadable, truncated or
// corrupt files, external data outside the model's directory or missing, sizes over
// `limits`, and unsupported ops (docs/security.md).
Graph load_onnx(const std::string& path, const Limits& limits = {});

// The same from bytes in memory; `path` is used in messages and to find external data.
Graph load_onnx_bytes(std::string_view bytes, const std::string& path, const Limits& limits = {});

// Reads a serialized TensorProto file (the ONNX test data format: input_0.pb, output_0.pb).
Tensor load_tensor_pb(const std::string& path);
// The same for a value declared as `decl`: a TensorProto, SequenceProto or OptionalProto file.
Value load_value_pb(const std::string& path, const ValueDecl& decl);

// Throws one Error listing every op type the registry lacks, with its node count and names.
void check_supported_ops(const Graph& graph);

}  // namespace grove
