#pragma once
// The oracle for tile rules: cut a node's output into several grids along the dims its rule
// allows, run every tile, and compare the assembled output with the node's reference. Each
// tile (an even sample of them, edges included, where a grid has many) also runs on inputs
// poisoned outside the regions `needs` named (NaN, then a huge value, flipped bools), so a
// `needs` that misses an element the tile reads fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "ops/evaluate.h"
#include "ops/tile_util.h"
#include "ops/tiling.h"
#include "op_test_util.h"

namespace grove::tiletest {

using optest::NodeBuilder;

// Deterministic values in [lo, hi).
inline Tensor random_f32(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(DType::f32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

inline Tensor random_bool(Shape shape, uint32_t seed) {
  Tensor t(DType::boolean, std::move(shape));
  std::mt19937 rng(seed);
  for (bool& v : t.span<bool>()) v = (rng() & 1) != 0;
  return t;
}

// Tile boundaries along one dim of `extent` for tiles of `size` (the last one smaller).
inline std::vector<Range> cut_dim(int64_t extent, int64_t size) {
  std::vector<Range> tiles;
  if (size <= 0 || size >= extent) return {{0, extent}};
  for (int64_t b = 0; b < extent; b += size) tiles.push_back({b, std::min(extent, b + size)});
  return tiles;
}

// Every tile of the grid that cuts dim d into tiles of sizes[d].
inline std::vector<Region> grid(const Shape& shape, const std::vector<int64_t>& sizes) {
  std::vector<Region> tiles = {Region{}};
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<Region> next;
    for (const Region& t : tiles)
      for (const Range& r : cut_dim(shape[d], sizes[d])) {
        Region n = t;
        n.push_back(r);
        next.push_back(n);
      }
    tiles = next;
  }
  return tiles;
}

// The tile sizes to try: the finest grid, a coarser one with remainders, random multiples of
// the blocks, and one whole tile.
inline std::vector<std::vector<int64_t>> grids_for(const Shape& shape, const std::vector<int64_t>& blocks) {
  std::vector<std::vector<int64_t>> grids(5, std::vector<int64_t>(shape.size(), 0));
  std::mt19937 rng(7);
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t b = blocks[d];
    if (b == 0) continue;
    grids[0][d] = b;
    grids[1][d] = 2 * b;
    grids[2][d] = 3 * b;
    const int64_t most = std::max<int64_t>(1, shape[d] / b);
    grids[3][d] = b * (1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(most)));
  }
  return grids;  // grids[4] stays all-zero: one whole tile
}

inline bool close(double got, double want, double tol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (tol == 0) return got == want;
  return std::fabs(got - want) <= tol * (1 + std::fabs(want));
}

// A copy of `t` where every element outside `r` (an empty Region: all of them, unless t is a
// scalar) holds `poison`; bools outside are flipped; other dtypes are left as they are.
inline Tensor poisoned(const Tensor& t, const Region& r, double poison) {
  const bool whole_scalar = t.rank() == 0;
  const bool read = whole_scalar || (r.size() == t.shape().size() && volume(r) > 0);
  if (t.dtype() == DType::f32) {
    Tensor p(DType::f32, t.shape());
    for (float& v : p.span<float>()) v = static_cast<float>(poison);
    if (read) tiling::insert_region(p, r, tiling::extract_region(t, r));
    return p;
  }
  if (t.dtype() == DType::bf16) {
    Tensor p(DType::bf16, t.shape());
    auto* bits = reinterpret_cast<uint16_t*>(p.raw());
    std::fill(bits, bits + p.numel(), kernels::bf16_bits(static_cast<float>(poison)));
    if (read) tiling::insert_region(p, r, tiling::extract_region(t, r));
    return p;
  }
  if (t.dtype() == DType::boolean) {
    Tensor p = t.clone();
    for (bool& v : p.span<bool>()) v = !v;
    if (read) tiling::insert_region(p, r, tiling::extract_region(t, r));
    return p;
  }
  return t;
}

struct TileStats {
  size_t grids = 0, tiles = 0, poisoned_tiles = 0;
};

// Tiles per grid that also run on poisoned inputs (the rest run once, into the assembled output).
constexpr size_t kPoisonedTiles = 24;

// Whether the element at row-major index `flat` of `shape` lies in `r`.
inline bool in_region(size_t flat, const Shape& shape, const Region& r) {
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t extent = shape[d], at = static_cast<int64_t>(flat) % std::max<int64_t>(extent, 1);
    if (at < r[d].begin || at >= r[d].end) return false;
    flat = static_cast<size_t>(static_cast<int64_t>(flat) / std::max<int64_t>(extent, 1));
  }
  return true;
}

// `inputs`: an empty Tensor marks a missing optional input. `tol` 0 asks for exact results.
// `finer_blocks`, when given, replaces the rule's block sizes: a tile must be right for any
// region, also ones the planner would not cut (unaligned channel ranges of a Conv).
// `shared`, when given, is the worker scratch the tiles run with, carried over from other
// calls: on an engine one worker's scratch serves every node of an op type, so a tile must not
// read what a node of another shape left there.
inline TileStats check_tiling(const Node& node, const std::vector<Tensor>& inputs, double tol,
                              const std::vector<int64_t>* finer_blocks = nullptr, TileScratch* shared = nullptr) {
  TileStats stats;
  std::vector<const Tensor*> in;
  std::vector<ValueInfo> infos;
  for (const Tensor& t : inputs) {
    in.push_back(t.empty() ? nullptr : &t);
    infos.push_back(t.empty() ? ValueInfo{DType::undefined, {}, nullptr, false} : ValueInfo{t.dtype(), t.shape(), &t, true});
  }
  const Tensor ref = evaluate_node(node, in).at(0);
  const std::vector<ValueInfo> out_infos = infer_node(node, infos);
  const TileRule* rule = find_tile_rule(node);
  EXPECT_NE(rule, nullptr) << node.op_type;
  if (!rule) return stats;
  const std::vector<int64_t> blocks = finer_blocks ? *finer_blocks : rule->cuttable(node, infos, out_infos);
  EXPECT_EQ(blocks.size(), ref.shape().size());
  if (blocks.size() != ref.shape().size()) return stats;
  // Marks what no tile wrote (float32 and bfloat16 outputs; -12345 is -12352 in bf16).
  const double sentinel = ref.dtype() == DType::bf16 ? kernels::bf16_value(kernels::bf16_bits(-12345.0f)) : -12345.0;
  const bool marked = ref.dtype() == DType::f32 || ref.dtype() == DType::bf16;
  auto fill = [&](Tensor& t) {
    if (t.dtype() == DType::f32) for (float& v : t.span<float>()) v = static_cast<float>(sentinel);
    if (t.dtype() == DType::bf16) {
      auto* bits = reinterpret_cast<uint16_t*>(t.raw());
      std::fill(bits, bits + t.numel(), kernels::bf16_bits(static_cast<float>(sentinel)));
    }
  };
  const std::vector<double> want = ref.to_f64();
  // With a prepare step, every grid runs twice: with nothing prepared (no input constant)
  // and with every present input constant, so both kernel paths meet the same checks.
  std::vector<std::vector<const Tensor*>> constant_sets = {std::vector<const Tensor*>(in.size(), nullptr)};
  if (rule->prepare) constant_sets.push_back(in);
  // One worker's scratch for every tile, as on an engine: a tile must not depend on what the
  // tiles before it (other grids, other regions, other calls' nodes) left in it.
  TileScratch own;
  TileScratch& scratch = shared ? *shared : own;
  for (const auto& constants : constant_sets)
  for (const auto& sizes : grids_for(ref.shape(), blocks)) {
    const std::shared_ptr<const void> prepared_holder = rule->prepare ? rule->prepare(node, infos, constants) : nullptr;
    const void* prepared = prepared_holder.get();
    Tensor assembled(ref.dtype(), ref.shape());
    fill(assembled);
    ++stats.grids;
    const std::vector<Region> tiles = grid(ref.shape(), sizes);
    // Each poisoned run copies the inputs and scans the whole output, so a grid of many tiles
    // poisons an evenly spread sample that keeps the first and last tile (the edges);
    // every tile still runs into `assembled`, which is checked whole below.
    const size_t poison_every = std::max<size_t>(1, (tiles.size() + kPoisonedTiles - 1) / kPoisonedTiles);
    for (size_t ti = 0; ti < tiles.size(); ++ti) {
      const Region& tile = tiles[ti];
      ++stats.tiles;
      std::vector<Region> needs(inputs.size());
      rule->needs(node, infos, out_infos, tile, needs);
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].empty() || needs[i].empty()) continue;
        EXPECT_EQ(needs[i].size(), inputs[i].shape().size()) << node.op_type << " input " << i << " tile " << region_str(tile);
        for (size_t d = 0; d < needs[i].size() && d < inputs[i].shape().size(); ++d)
          EXPECT_TRUE(needs[i][d].begin >= 0 && needs[i][d].end <= inputs[i].shape()[d] &&
                      needs[i][d].begin <= needs[i][d].end)
              << node.op_type << " input " << i << " needs " << region_str(needs[i]) << " outside " << shape_str(inputs[i].shape());
      }
      std::vector<Tensor*> outs = {&assembled};
      rule->run_tile(node, in, outs, tile, prepared, scratch);
      if (ti % poison_every != 0 && ti + 1 != tiles.size()) continue;
      ++stats.poisoned_tiles;
      for (double poison : {std::nan(""), 1e30}) {
        std::vector<Tensor> bad;
        bad.reserve(inputs.size());
        std::vector<const Tensor*> bad_in;
        for (size_t i = 0; i < inputs.size(); ++i) {
          bad.push_back(inputs[i].empty() ? Tensor() : poisoned(inputs[i], needs[i], poison));
          bad_in.push_back(inputs[i].empty() ? nullptr : &bad.back());
        }
        Tensor alone(ref.dtype(), ref.shape());
        fill(alone);
        std::vector<Tensor*> alone_out = {&alone};
        rule->run_tile(node, bad_in, alone_out, tile, prepared, scratch);
        // The tile equals the reference inside its region and writes nothing outside it.
        const std::vector<double> got = alone.to_f64();
        int failures = 0;
        for (size_t k = 0; k < got.size() && failures < 3; ++k) {
          const bool inside = in_region(k, ref.shape(), tile);
          bool ok = inside ? close(got[k], want[k], tol) : (!marked || got[k] == sentinel);
          if (!ok) {
            ++failures;
            ADD_FAILURE() << node.op_type << " tile " << region_str(tile) << " (poison " << poison << ") element " << k
                          << ": got " << got[k] << ", want " << (inside ? want[k] : sentinel);
          }
        }
        if (failures) return stats;
      }
    }
    const std::vector<double> got = assembled.to_f64();
    for (size_t k = 0; k < got.size(); ++k)
      if (!close(got[k], want[k], tol)) {
        ADD_FAILURE() << node.op_type << " assembled element " << k << ": got " << got[k] << ", want " << want[k];
        return stats;
      }
  }
  return stats;
}

// The regions `needs` gives for one output region.
inline std::vector<Region> needs_of(const Node& node, const std::vector<Tensor>& inputs, const Region& out_region) {
  std::vector<ValueInfo> infos;
  for (const Tensor& t : inputs)
    infos.push_back(t.empty() ? ValueInfo{DType::undefined, {}, nullptr, false} : ValueInfo{t.dtype(), t.shape(), &t, true});
  std::vector<ValueInfo> out_infos = infer_node(node, infos);
  std::vector<Region> needs(inputs.size());
  find_tile_rule(node)->needs(node, infos, out_infos, out_region, needs);
  return needs;
}

inline std::vector<int64_t> cuttable_of(const Node& node, const std::vector<Tensor>& inputs) {
  std::vector<ValueInfo> infos;
  for (const Tensor& t : inputs)
    infos.push_back(t.empty() ? ValueInfo{DType::undefined, {}, nullptr, false} : ValueInfo{t.dtype(), t.shape(), &t, true});
  return find_tile_rule(node)->cuttable(node, infos, infer_node(node, infos));
}

}  // namespace grove::tiletest
