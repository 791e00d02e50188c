#pragma once
// 64-bit FNV-1a hashes of a graph, for keys that must change when the model does: a saved
// TileGraph names the exact model it was planned for (plan_io.h: weights included), a tuning
// record the model's structure (tune/record.h: weights by dtype and shape only, so a retrained
// model of one architecture keeps its record).
#include <cstdint>
#include <cstddef>

#include "graph/graph.h"

namespace grove {

// Opsets, inputs and outputs, every node (op, name, edges, attributes, decisions), value dtypes and
// shapes, initializers: by their bytes when `weights`, else by dtype and shape.
uint64_t graph_hash(const Graph& g, bool weights);

// FNV-1a of plain bytes (checksums, short keys).
uint64_t bytes_hash(const void* data, size_t n);

}  // namespace grove
