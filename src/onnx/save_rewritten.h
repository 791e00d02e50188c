#pragma once
// Writes a model whose weights a graph rewrite changed (`grove tail --apply`,
// dynamic/resize_layers.h): the ONNX file it was imported from, with the rewritten graph's
// initializers, node inputs and `group` attributes, and everything else (the other nodes,
// attributes, names, opsets, metadata) as the file has it. The file's value_info is dropped:
// the shapes it declares may be the old widths.
#include <string>

#include "graph/graph.h"

namespace grove {

// `imported` is load_onnx(source_path); `rewritten` came from it by changing initializers,
// renaming initializer inputs of nodes, setting `group`, and folding Identity nodes over
// initializers. Throws Error for files with external data or 16-bit float weights (the import
// widened those to float32), and when `out_path` cannot be written.
void save_rewritten(const std::string& source_path, const Graph& imported, const Graph& rewritten,
                    const std::string& out_path);

}  // namespace grove
