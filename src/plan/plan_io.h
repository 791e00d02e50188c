#pragma once
// Saving a TileGraph and loading it back. The file says what it was planned for (grove's
// version, the model's hash, the bound input shapes and the plan options), so that a file
// planned for another model, other shapes or another grove is refused with a clear Error
// rather than silently giving wrong dependencies.
//
// Format (all integers little-endian, every array preceded by its u64 element count):
//   "GROVETG1", u32 length + grove version, u64 bytes that follow (checksum included),
//   u64 model hash, u32 input count + per input (name, u32 rank, i64 dims),
//   i32 threads, i32 tiles_per_op, i64 min_tile_flops, u8 schedule (0 aspen, 1 barrier),
//   the TileGraph arrays (node, region as per-tile u32 rank + i64 begin/end pairs, n_parents,
//   depth, child_begin, children, sources, first_tile, tile_count),
//   u64 FNV-1a of every byte before it.
#include <cstdint>
#include <string>

#include "graph/graph.h"
#include "plan/plan.h"

namespace grove {

// Keep in step with project(grove VERSION ...) in CMakeLists.txt: a TileGraph file records it
// and is refused by any other version (the planner's rules may have changed).
inline constexpr const char* kGroveVersion = "0.1.0";

// A stable 64-bit FNV-1a, as 16 hex digits, over everything that decides a plan: opsets,
// inputs/outputs, nodes (op type, domain, name, inputs, outputs, attributes, decisions), the bound dtype
// and shape of every value, and the initializers (name, dtype, shape and every byte). The
// bytes are hashed too, since a model with other weights is another model; one byte at a
// time this costs about 1 ns per byte (~0.5 s for 500 MB), paid only when saving or loading.
std::string model_hash(const Graph& graph);

// Writes plan.tiles and what they were planned for (plan.graph, plan.options) to `path`.
// Throws Error naming the file when it cannot be written.
void save_tile_graph(const std::string& path, const Plan& plan);

// Reads a file written by save_tile_graph and checks it against `expected_for`, a plan of the
// model it is meant for: grove version, model hash, bound input shapes and plan options must
// match, and every array must be consistent (sizes, index ranges, CSR offsets, parent counts).
// A mismatched, corrupt or truncated file is an Error naming the file and what differs; no
// allocation exceeds the file's size.
TileGraph load_tile_graph(const std::string& path, const Plan& expected_for);

// The first difference between two TileGraphs ("children[12]: 5 vs 7"); empty when equal.
std::string tile_graph_difference(const TileGraph& a, const TileGraph& b);

}  // namespace grove
