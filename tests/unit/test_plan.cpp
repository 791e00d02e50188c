// The planner: tile grids, dependencies against a brute-force O(tiles^2) oracle, depth,
// critical path, the barrier schedule and the buffer plan.
#include <tuple>

#include "graph/node_decisions.h"
#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "ops/tiling.h"
#include "passes/flops.h"
#include "runtime/session.h"
#include "plan_test_util.h"

using namespace grove;
using namespace grove::test;

namespace {

using EdgeSet = std::set<std::pair<int32_t, int32_t>>;

EdgeSet planned_edges(const TileGraph& tg) {
  EdgeSet e;
  for (int32_t t = 0; t < tg.size(); ++t)
    for (int64_t c = tg.child_begin[t]; c < tg.child_begin[t + 1]; ++c) e.insert({t, tg.children[c]});
  return e;
}

// Edge s -> t iff some input region that tile t needs intersects the region of tile s of
// that input's producer: every pair of tiles tried.
EdgeSet oracle_edges(const Plan& plan) {
  const Graph& g = plan.graph;
  const TileGraph& tg = plan.tiles;
  EdgeSet e;
  for (int32_t t = 0; t < tg.size(); ++t) {
    int32_t n = tg.node[t];
    if (n < 0) continue;
    const Node& node = g.nodes[n];
    std::vector<ValueInfo> in, out;
    for (const auto& name : node.inputs) {
      ValueInfo i;
      if (name.empty()) i.present = false;
      else {
        i = g.values.at(name);
        auto it = g.initializers.find(name);
        i.data = it == g.initializers.end() ? nullptr : &it->second;
      }
      in.push_back(i);
    }
    for (const auto& name : node.outputs) out.push_back(name.empty() ? ValueInfo{} : g.values.at(name));
    std::vector<Region> need(in.size());
    if (plan.rules[n]) plan.rules[n]->needs(node, in, out, tg.region[t], need);
    else
      for (size_t i = 0; i < in.size(); ++i) need[i] = in[i].present ? full_region(in[i].shape) : Region{};
    for (size_t i = 0; i < in.size(); ++i) {
      int32_t v = plan.node_inputs[n][i];
      if (v < 0 || plan.values[v].producer < 0) continue;
      if (need[i].empty() && !in[i].shape.empty()) continue;
      int32_t p = plan.values[v].producer;
      for (int32_t s = tg.first_tile[p]; s < tg.first_tile[p] + tg.tile_count[p]; ++s) {
        // A one-tile producer's tile covers all of each of its outputs.
        Region have = tg.tile_count[p] == 1 ? full_region(in[i].shape) : tg.region[s];
        if (intersects(need[i], have)) e.insert({s, t});
      }
    }
  }
  return e;
}

// Tiles of each node cover its output exactly once.
void expect_partition(const Plan& plan) {
  const TileGraph& tg = plan.tiles;
  for (size_t n = 0; n < plan.graph.nodes.size(); ++n) {
    const Node& node = plan.graph.nodes[n];
    if (node.outputs.empty() || node.outputs[0].empty()) continue;
    const Shape& shape = plan.graph.values.at(node.outputs[0]).shape;
    std::vector<int> hits(static_cast<size_t>(numel(shape)), 0);
    for (int32_t t = tg.first_tile[n]; t < tg.first_tile[n] + tg.tile_count[n]; ++t) {
      ASSERT_EQ(tg.node[t], static_cast<int32_t>(n));
      const Region& r = tg.region[t];
      ASSERT_EQ(r.size(), shape.size());
      std::vector<int64_t> idx(r.size());
      if (volume(r) == 0) continue;
      for (size_t d = 0; d < r.size(); ++d) idx[d] = r[d].begin;
      while (true) {
        int64_t off = 0;
        for (size_t d = 0; d < r.size(); ++d) off = off * shape[d] + idx[d];
        ++hits[off];
        size_t d = r.size();
        while (d-- > 0) {
          if (++idx[d] < r[d].end) break;
          idx[d] = r[d].begin;
        }
        if (d == static_cast<size_t>(-1)) break;
      }
    }
    for (int h : hits) ASSERT_EQ(h, 1) << node.describe();
  }
}

// n_parents, depth and sources agree with the child lists.
void expect_consistent(const TileGraph& tg) {
  std::vector<int32_t> parents(tg.size(), 0), depth(tg.size(), 0);
  for (int32_t t = 0; t < tg.size(); ++t)
    for (int64_t c = tg.child_begin[t]; c < tg.child_begin[t + 1]; ++c) {
      int32_t child = tg.children[c];
      ASSERT_GT(child, t);
      if (c > tg.child_begin[t]) ASSERT_GT(child, tg.children[c - 1]) << "duplicate or unsorted children";
      ++parents[child];
      depth[child] = std::max(depth[child], tg.depth[t] + 1);
    }
  std::vector<int32_t> sources;
  for (int32_t t = 0; t < tg.size(); ++t) {
    EXPECT_EQ(parents[t], tg.n_parents[t]) << "tile " << t;
    EXPECT_EQ(depth[t], tg.depth[t]) << "tile " << t;
    if (parents[t] == 0) sources.push_back(t);
  }
  EXPECT_EQ(sources, tg.sources);
}

PlanOptions with_test_rules(int tiles_per_op, Schedule schedule = Schedule::aspen) {
  PlanOptions o;
  o.tiles_per_op = tiles_per_op;
  o.debug.rule_lookup = test_rule;
  o.schedule = schedule;
  return o;
}

}  // namespace

TEST(Plan, DependenciesMatchBruteForceOracle) {
  for (const TestModel& m : all_test_models()) {
    Model model = load_test_model(m);
    for (TileRuleLookup rules : {test_rule, static_cast<TileRuleLookup>(nullptr)})
    for (int k : {1, 2, 3, 5, 8, 17, 64, 10000}) {
      PlanOptions o = with_test_rules(k);
      o.debug.rule_lookup = rules;  // the rules written here, then src/ops' own
      auto plan = make_plan(bound_graph(model), o);
      SCOPED_TRACE(m.name + " tiles_per_op=" + std::to_string(k) + (rules ? " test rules" : " builtin rules"));
      if (k == 17) EXPECT_GT(plan->tiles.tile_count[0], 1) << "the first op was not cut";
      expect_partition(*plan);
      expect_consistent(plan->tiles);
      EXPECT_EQ(planned_edges(plan->tiles), oracle_edges(*plan));
      EXPECT_EQ(plan->tiles.edge_count(), static_cast<int64_t>(planned_edges(plan->tiles).size()));
    }
  }
}

TEST(Plan, ConvTileReadsOnlyNearbyRowsOfItsProducer) {
  Model model = load_test_model(residual());
  auto plan = make_plan(bound_graph(model), with_test_rules(12));
  const TileGraph& tg = plan->tiles;
  // conv1's 12x12 output is cut into 12 one-row tiles; a 3x3 conv2 tile reads rows r-1..r+1
  // of relu1, whose one-row tiles are aligned: at most 3 parents.
  ASSERT_EQ(tg.tile_count[0], 12);
  EXPECT_EQ(tile_grid(*plan, 0), (Shape{1, 1, 12, 1}));
  for (int32_t t = tg.first_tile[2]; t < tg.first_tile[2] + tg.tile_count[2]; ++t) {
    EXPECT_LE(tg.n_parents[t], 3);
    EXPECT_GE(tg.n_parents[t], 2);
  }
  EXPECT_EQ(tg.depth[tg.first_tile[2]], 2);
}

// DagView::place: each tile's place is the middle of its first cut dim, so one-row tiles of
// conv1 and conv2 over the same rows share a place, places grow down the rows, and a whole op
// (one tile) is at 0.
TEST(Plan, TilePlacesFollowTheirRows) {
  Model model = load_test_model(residual());
  auto plan = make_plan(bound_graph(model), with_test_rules(12));
  const TileGraph& tg = plan->tiles;
  ASSERT_EQ(tg.place.size(), static_cast<size_t>(tg.size()));
  ASSERT_EQ(tg.tile_count[0], 12);
  ASSERT_EQ(tg.tile_count[2], 12);
  for (int32_t i = 0; i < 12; ++i) {
    EXPECT_EQ(tg.place[tg.first_tile[0] + i], static_cast<uint16_t>((2 * i + 1) * 65536 / 24)) << i;
    EXPECT_EQ(tg.place[tg.first_tile[2] + i], tg.place[tg.first_tile[0] + i]) << i;
  }
  auto whole = make_plan(bound_graph(model), with_test_rules(1));
  for (uint16_t p : whole->tiles.place) EXPECT_EQ(p, 0);
}

TEST(Plan, GridPrefersRowsThenChannelsAndHonoursBlocks) {
  Model model = load_test_model(conv_chain());
  // conv1 output [1,4,10,8]: 6 tiles asked: rows in 5 pieces of 2, then channels in 2.
  auto plan = make_plan(bound_graph(model), with_test_rules(6));
  EXPECT_EQ(plan->tile_extent[0], (Shape{1, 2, 2, 8}));
  EXPECT_EQ(tile_grid(*plan, 0), (Shape{1, 2, 5, 1}));
  EXPECT_EQ(plan->tiles.tile_count[0], 10);

  // Tanh's rule only cuts dim 1 in multiples of 3 and dim 2 in multiples of 4: [2,9,24].
  Model mm = load_test_model(matmul_chain());
  auto p2 = make_plan(bound_graph(mm), with_test_rules(1000));
  int32_t tanh = -1;
  for (size_t n = 0; n < p2->graph.nodes.size(); ++n)
    if (p2->graph.nodes[n].op_type == "Tanh") tanh = static_cast<int32_t>(n);
  ASSERT_GE(tanh, 0);
  EXPECT_EQ(p2->tile_extent[tanh], (Shape{1, 3, 4}));
  EXPECT_EQ(p2->tiles.tile_count[tanh], 2 * 3 * 6);
  auto p3 = make_plan(bound_graph(mm), with_test_rules(5));  // 9 rows in blocks of 3: at most 3 pieces
  EXPECT_EQ(p3->tile_extent[tanh], (Shape{1, 3, 24}));
  // Softmax never cuts its last dim.
  for (size_t n = 0; n < p2->graph.nodes.size(); ++n)
    if (p2->graph.nodes[n].op_type == "Softmax") EXPECT_EQ(p2->tile_extent[n].back(), 8);
}

TEST(Plan, OneTilePerOpAndOpsWithoutRules) {
  Model model = load_test_model(concat_reshape());
  auto plan = make_plan(bound_graph(model), with_test_rules(1));
  for (int32_t c : plan->tiles.tile_count) EXPECT_EQ(c, 1);
  // A chain of whole ops: the critical path is all the work, as in the graph.
  auto big = make_plan(bound_graph(model), with_test_rules(50));
  for (size_t n = 0; n < big->graph.nodes.size(); ++n)
    if (big->graph.nodes[n].op_type == "Reshape" || big->graph.nodes[n].op_type == "Split")
      EXPECT_EQ(big->tiles.tile_count[n], 1) << big->graph.nodes[n].describe();
}

TEST(Plan, ReportsTheBytesOfPackedWeights) {
  Model with_weights = model_from_graph(load_onnx_bytes([&] {
    OnnxBuilder m;
    m.input("x", kF32, {1, 64, 256}).output("y", kF32, {1, 64, 200});
    weight(m, "w", {256, 200}, 1);
    m.node("MatMul", {"x", "w"}, {"y"}, "weights");
    return m.bytes();
  }(), "weights.onnx"));
  Model without_weights = model_from_graph(load_onnx_bytes([&] {
    OnnxBuilder m;
    m.input("x", kF32, {1, 64, 256}).input("v", kF32, {1, 256, 200}).output("y", kF32, {1, 64, 200});
    m.node("MatMul", {"x", "v"}, {"y"}, "activations");
    return m.bytes();
  }(), "activations.onnx"));
  PlanOptions o;
  o.threads = 2;
  // The packed panels hold every weight (columns rounded up to whole panels).
  EXPECT_GE(make_plan(bound_graph(with_weights), o)->prepared_bytes, int64_t{256 * 200 * 4});
  EXPECT_EQ(make_plan(bound_graph(without_weights), o)->prepared_bytes, 0);
}

// Nodes that read one weight the same way share its packed panels (a 1000-layer chain over one
// 512x512 matrix packed it 1000 times: 1 GB, 4 s of planning); a different weight, or the
// same one read another way (a Gemm with transB beside one without), gets its own.
TEST(Plan, NodesReadingOneWeightTheSameWayShareItsPackedPanels) {
  Model model = model_from_graph(load_onnx_bytes([&] {
    OnnxBuilder m;
    m.input("x", kF32, {32, 64}).output("y", kF32, {32, 64});
    weight(m, "w", {64, 64}, 1);
    weight(m, "v", {64, 64}, 2);
    m.node("MatMul", {"x", "w"}, {"h0"}, "first");
    m.node("MatMul", {"h0", "w"}, {"h1"}, "again");
    m.node("MatMul", {"h1", "v"}, {"h2"}, "other_weight");
    m.node("Gemm", {"h2", "w"}, {"h3"}, "plain");
    auto& gemm = m.node("Gemm", {"h3", "w"}, {"y"}, "transposed");
    auto* a = gemm.add_attribute();
    a->set_name("transB");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
    return m.bytes();
  }(), "shared.onnx"));
  PlanOptions o;
  o.threads = 2;
  auto plan = make_plan(bound_graph(model), o);
  auto prepared = [&](const std::string& name) {
    for (size_t n = 0; n < plan->graph.nodes.size(); ++n)
      if (plan->graph.nodes[n].name == name) return plan->prepared[n].get();
    ADD_FAILURE() << "no node " << name;
    return static_cast<const void*>(nullptr);
  };
  ASSERT_NE(prepared("first"), nullptr);
  EXPECT_EQ(prepared("again"), prepared("first"));
  EXPECT_NE(prepared("other_weight"), prepared("first"));
  ASSERT_NE(prepared("plain"), nullptr);
  EXPECT_NE(prepared("transposed"), prepared("plain"));
  EXPECT_NE(prepared("transposed"), nullptr);
  // Counted once: four packings of 64x64 (panels round the columns up), not five.
  EXPECT_LT(plan->prepared_bytes, int64_t{5 * 64 * 64 * 4});
  std::map<std::string, Tensor> inputs{{"x", seeded_tensor({32, 64}, 3)}};
  PlannedRun run(plan, inputs, PlannedRunOptions{true});
  run_serial(run, 1);
  // Five 64-deep products of values in [-1, 1] reach thousands and cancel: the error bound is
  // relative to the largest output, not to each element.
  const std::vector<double> got = run.outputs().at("y").to_f64(), want = model.run_reference(inputs).at("y").to_f64();
  double largest = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    largest = std::max(largest, std::abs(want[i]));
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  EXPECT_LE(worst, 1e-5 * largest) << "largest |y| " << largest;
}

// A session's plans for other input shapes share the packed weights of its MatMuls and Gemms,
// fused epilogues included (whose FLOP counts differ with the shape): a decoder planned for 8
// cache capacities held 8 copies of its weights. Every shape still computes the reference.
TEST(Plan, PlansOfOtherShapesShareTheSessionsPackedWeights) {
  OnnxBuilder m;
  m.input("x", kF32, {-1, 64}).output("y", kF32, {-1, 48});
  weight(m, "w", {64, 48}, 1);
  weight(m, "bias", {48}, 2);
  weight(m, "v", {48, 48}, 3);
  m.node("MatMul", {"x", "w"}, {"h"}, "project");
  m.node("Add", {"h", "bias"}, {"hb"}, "bias_add");  // fused into the MatMul's epilogue
  m.node("Relu", {"hb"}, {"r"}, "relu");
  m.node("Gemm", {"r", "v"}, {"y"}, "gemm");
  Engine engine({.threads = 2});
  Session session(engine, model_from_graph(load_onnx_bytes(m.bytes(), "shapes.onnx")));
  std::map<int64_t, std::shared_ptr<const Plan>> plans;
  for (int64_t rows : {1, 5, 33}) {
    plans[rows] = plan_for(session, {{"x", {rows, 64}}});
    ASSERT_NE(plans[rows], nullptr);
    const TensorMap inputs{{"x", seeded_tensor({rows, 64}, static_cast<uint64_t>(rows))}};
    const std::vector<double> got = session.run(inputs).at("y").to_f64();
    const std::vector<double> want = session.model().run_reference(inputs).at("y").to_f64();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << rows;
  }
  auto prepared = [](const Plan& plan, const std::string& op) {
    for (size_t n = 0; n < plan.graph.nodes.size(); ++n)
      if (plan.graph.nodes[n].op_type == op) return plan.prepared[n].get();
    ADD_FAILURE() << "no " << op;
    return static_cast<const void*>(nullptr);
  };
  for (const char* op : {"MatMul", "Gemm"}) {
    ASSERT_NE(prepared(*plans[1], op), nullptr) << op;
    EXPECT_EQ(prepared(*plans[5], op), prepared(*plans[1], op)) << op;
    EXPECT_EQ(prepared(*plans[33], op), prepared(*plans[1], op)) << op;
  }
  EXPECT_TRUE(has_fused_epilogue(plans[1]->graph.nodes[0])) << "the test means a MatMul with a fused bias";
  // Another session packs its own.
  Session other(engine, model_from_graph(load_onnx_bytes(m.bytes(), "shapes.onnx")));
  EXPECT_NE(prepared(*plan_for(other, {{"x", {5, 64}}}), "MatMul"), prepared(*plans[5], "MatMul"));
}

TEST(Plan, AutoTilingGivesTinyOpsOneTileAndBigOpsEnoughForEveryCore) {
  OnnxBuilder b;
  b.input("x", kF32, {1, 256, 256}).output("y", kF32, {1, 256, 256}).output("z", kF32, {1, 8, 8});
  weight(b, "w", {256, 256}, 1);
  b.node("MatMul", {"x", "w"}, {"y"}, "big");  // 33.5 MFLOP
  b.input("s", kF32, {1, 8, 8});
  b.node("Relu", {"s"}, {"z"}, "tiny");
  b.output("r", kF32, {1, 256, 256});
  b.node("Relu", {"y"}, {"r"}, "cheap_after_big");
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "auto.onnx"));
  PlanOptions o;
  o.debug.rule_lookup = test_rule;
  o.threads = 2;
  auto plan = make_plan(bound_graph(model), o);
  EXPECT_EQ(plan->tiles.tile_count[0], 2 * kAutoTilesPerThread);
  EXPECT_EQ(plan->tile_extent[0], (Shape{1, 256 / (2 * kAutoTilesPerThread), 256}));
  EXPECT_EQ(plan->tiles.tile_count[1], 1);
  // 65536 FLOPs alone would be one tile, but it follows the MatMul's grid: one parent each.
  EXPECT_EQ(plan->tiles.tile_count[2], 2 * kAutoTilesPerThread);
  for (int32_t t = plan->tiles.first_tile[2]; t < plan->tiles.first_tile[2] + 2 * kAutoTilesPerThread; ++t)
    EXPECT_EQ(plan->tiles.n_parents[t], 1);
  o.threads = 64;  // 128 wanted, but no tile under 1 MFLOP: 32
  EXPECT_EQ(make_plan(bound_graph(model), o)->tiles.tile_count[0], 32);
  o.min_tile_flops = 16 << 20;
  EXPECT_EQ(make_plan(bound_graph(model), o)->tiles.tile_count[0], 2);
}

TEST(Plan, CheapOpsOnSmallPlanesAreCutAlongChannelsNotRows) {
  // Two rows of a 7x7 float plane are 56 bytes: row tiles of every channel would share cache
  // lines with the next tile's, which another core writes. A cheap op is cut along channels
  // there, and along rows where a plane's row pieces are long (a 64x64 plane).
  auto extent_of = [](Shape shape, int tiles_per_op) {
    OnnxBuilder b;
    b.input("x", kF32, shape).output("y", kF32, shape);
    b.node("Relu", {"x"}, {"y"}, "relu");
    Model model = model_from_graph(load_onnx_bytes(b.bytes(), "relu.onnx"));
    PlanOptions o;
    o.threads = 2;
    o.min_tile_flops = 1;
    o.tiles_per_op = tiles_per_op;
    return make_plan(bound_graph(model), o)->tile_extent[0];
  };
  EXPECT_EQ(extent_of({1, 2048, 7, 7}, 0), (Shape{1, 1024, 7, 7}));
  EXPECT_EQ(extent_of({1, 8, 64, 64}, 0), (Shape{1, 8, 32, 64}));
  // A 1x1x7x7 tensor has no channels to cut: rows after all.
  EXPECT_EQ(extent_of({1, 1, 7, 7}, 0), (Shape{1, 1, 4, 7}));
  // A tile count given in the options keeps the rows-first order.
  EXPECT_EQ(extent_of({1, 2048, 7, 7}, 4), (Shape{1, 2048, 2, 7}));
}

TEST(Plan, ABatchThatSplitsEvenlyOverTheThreadsIsCutByImagesFirst) {
  // Each core then takes whole images through every layer: a conv tile reads only the rows its
  // own core wrote for the same images. Batch 1, a batch that does not split evenly, and a
  // tile count given in the options cut rows first.
  auto extent_of = [](Shape shape, int threads, int tiles_per_op) {
    OnnxBuilder b;
    b.input("x", kF32, shape).output("y", kF32, {shape[0], 16, shape[2], shape[3]});
    weight(b, "w", {16, shape[1], 3, 3}, 1);
    OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
    Model model = model_from_graph(load_onnx_bytes(b.bytes(), "conv.onnx"));
    PlanOptions o;
    o.threads = threads;
    o.min_tile_flops = 1;
    o.tiles_per_op = tiles_per_op;
    auto plan = make_plan(bound_graph(model), o);
    for (size_t n = 0; n < plan->graph.nodes.size(); ++n)
      if (plan->graph.nodes[n].name == "conv") return plan->tile_extent[n];
    ADD_FAILURE() << "no node named conv in the plan";
    return Shape(shape.size(), 0);
  };
  EXPECT_EQ(extent_of({4, 8, 16, 16}, 2, 0)[0], 2);
  EXPECT_EQ(extent_of({8, 8, 16, 16}, 4, 0)[0], 2);
  EXPECT_EQ(extent_of({2, 8, 16, 16}, 4, 0)[0], 2);  // fewer images than threads: rows first
  EXPECT_EQ(extent_of({3, 8, 16, 16}, 2, 0)[0], 3);
  EXPECT_EQ(extent_of({1, 8, 16, 16}, 2, 0)[0], 1);
  EXPECT_EQ(extent_of({4, 8, 16, 16}, 2, 2)[0], 4);
  // Every image's rows whole where it is cut by images (rank 4 [N, C, H, W] or channels-last).
  const Shape by_images = extent_of({4, 8, 16, 16}, 2, 0);
  EXPECT_EQ(by_images[by_images.size() - 2] * by_images[by_images.size() - 1] * by_images[1], 16 * 16 * 16)
      << shape_str(by_images);
}

TEST(Plan, TailAwareTileCountsKeepGridsThatRepeatNothing) {
  // 7 rows cut by the fixed rule into 4 tiles (2, 2, 2, 1 rows) at 4 threads leave a tail,
  // which the barrier-free schedule fills with the next ops' tiles: a MatMul row cut repeats
  // nothing, so the grid stays, under either schedule (the barrier twin keeps the tiles).
  auto tiles_of = [](int64_t rows, TileCounts counts, Schedule schedule) {
    OnnxBuilder b;
    b.input("x", kF32, {1, rows, 1024}).output("y", kF32, {1, rows, 512});
    weight(b, "w", {1024, 512}, 1);
    b.node("MatMul", {"x", "w"}, {"y"}, "mm");  // 7.3 MFLOP: enough for 4 tiles
    Model model = model_from_graph(load_onnx_bytes(b.bytes(), "tail.onnx"));
    PlanOptions o;
    o.debug.rule_lookup = test_rule;
    o.threads = 4;
    o.tile_counts = counts;
    o.schedule = schedule;
    return make_plan(bound_graph(model), o)->tiles.tile_count[0];
  };
  EXPECT_EQ(tiles_of(7, TileCounts::fixed, Schedule::aspen), 4);
  EXPECT_EQ(tiles_of(7, TileCounts::tail_aware, Schedule::aspen), 4);
  EXPECT_EQ(tiles_of(7, TileCounts::tail_aware, Schedule::barrier), 4);
}

TEST(Plan, TailAwareCountsLeaveEmptyOutputsAlone) {
  // An output with a zero dim has no tile to price (it divided by zero, found by fuzz_model).
  OnnxBuilder b;
  b.input("x", kF32, {1, 0, 1024}).output("y", kF32, {1, 0, 512});
  weight(b, "w", {1024, 512}, 1);
  b.node("MatMul", {"x", "w"}, {"y"}, "mm");
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "empty.onnx"));
  PlanOptions o;
  o.threads = 2;
  o.tile_counts = TileCounts::tail_aware;
  EXPECT_NO_THROW(make_plan(bound_graph(model), o));
}

// One Conv with its real tile rule: x [1, c, plane, plane], k x k, c output channels.
std::shared_ptr<const Plan> conv_plan(int64_t c, int64_t plane, int64_t k, int threads, TileCounts counts,
                                      double move_flops = kDefaultMoveFlops, Schedule schedule = Schedule::aspen) {
  OnnxBuilder b;
  b.input("x", kF32, {1, c, plane, plane}).output("y", kF32, {1, c, plane, plane});
  weight(b, "w", {c, c, k, k}, 1);
  auto& conv = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  OnnxBuilder::attr_ints(conv, "pads", std::vector<int64_t>(4, k / 2));
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "conv.onnx"));
  PlanOptions o;
  o.threads = threads;
  o.tile_counts = counts;
  o.machine.move_flops = move_flops;
  o.schedule = schedule;
  o.conv_layout = ConvLayout::nchw;  // the NCHW Conv rule's grids (test_conv_nhwc.cpp has the other)
  return make_plan(bound_graph(model), o);
}

TEST(Plan, GemmConvChannelTilesStartOnRegisterTileColumns) {
  // A 7x7 plane cut for 16 threads runs out of rows: channels are cut too, in whole
  // register-tile columns (nr), so a tile of few pixels takes the plan-time packed W^T.
  const int64_t nr = int64_t(kernels::gemm_blocking(kernels::active_isa()).nr);
  auto plan = conv_plan(512, 7, 3, 16, TileCounts::fixed);
  ASSERT_GT(tile_grid(*plan, 0)[1], 1);
  EXPECT_EQ(plan->tile_extent[0][1] % nr, 0) << shape_str(plan->tile_extent[0]);
}

TEST(Plan, TailAwareCountsPriceTheWorkAFinerCutRepeats) {
  // Winograd on a 28x28 plane is cut by output channels only, and each channel tile
  // transforms the whole input again: for 16 threads the fixed rule's 16 tiles of 8 channels
  // repeat the transform 16 times. Priced, fewer tiles win, and fewer still when a moved
  // element costs more.
  auto fixed = conv_plan(128, 28, 3, 16, TileCounts::fixed);
  auto tail = conv_plan(128, 28, 3, 16, TileCounts::tail_aware, 32);
  auto dear = conv_plan(128, 28, 3, 16, TileCounts::tail_aware, 256);
  ASSERT_EQ(tile_grid(*fixed, 0), (Shape{1, 16, 1, 1}));
  EXPECT_LT(tail->tiles.tile_count[0], 16);
  EXPECT_GT(tail->tiles.tile_count[0], 1);
  EXPECT_LT(dear->tiles.tile_count[0], tail->tiles.tile_count[0]);
  // The barrier twin is cut alike.
  auto twin = conv_plan(128, 28, 3, 16, TileCounts::tail_aware, 32, Schedule::barrier);
  EXPECT_EQ(twin->tile_extent[0], tail->tile_extent[0]);
  // A plain 1x1 conv cut by rows into whole register tiles repeats nothing: the fixed grid
  // (4 tiles of 16 rows for 4 threads) stays.
  auto plain = conv_plan(64, 64, 1, 4, TileCounts::tail_aware, 256);
  EXPECT_EQ(tile_grid(*plain, 0), (Shape{1, 1, 4, 1}));
  EXPECT_EQ(tile_grid(*conv_plan(64, 64, 1, 4, TileCounts::fixed), 0), (Shape{1, 1, 4, 1}));
}

// On AMX a conv tile's products are priced apart (TileWork::amx_flops, at the session's
// measured amx_flop_cost), and the weights it streams count as moves, since the tile unit no
// longer hides them: cheaper products and dearer repeats give no more tiles than fp32 pricing.
TEST(Plan, AmxConvTilesPriceProductsApartAndTheWeightsTheyStream) {
  OnnxBuilder b;
  b.input("x", kF32, {1, 512, 7, 7}).output("y", kF32, {1, 512, 7, 7});
  weight(b, "w", {512, 512, 3, 3}, 1);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "conv.onnx"));
  Graph marked = bound_graph(model);
  marked.nodes[0].decisions.precision = NodePrecision::bf16_amx;
  for (const ConvLayout layout : {ConvLayout::nchw, ConvLayout::channels_last}) {
    SCOPED_TRACE(layout == ConvLayout::nchw ? "nchw" : "channels-last");
    PlanOptions o;
    o.threads = 2;
    o.tile_counts = TileCounts::tail_aware;
    o.conv_layout = layout;
    o.debug.prepare_weights = false;
    auto work = [&](const Graph& source) {
      auto plan = make_plan(source, o);
      for (const Node& n : plan->graph.nodes) {
        if (n.op_type != "Conv" && n.op_type != "ConvNhwc") continue;
        const std::vector<ValueInfo> in{plan->graph.values.at(n.inputs[0]), plan->graph.values.at(n.inputs[1])};
        const std::vector<ValueInfo> out{plan->graph.values.at(n.outputs[0])};
        return grove::find_tile_rule(n)->tile_work(n, in, out, out[0].shape);
      }
      ADD_FAILURE() << "no conv in the plan";
      return TileWork{};
    };
    const TileWork f32 = work(bound_graph(model)), amx = work(marked);
    EXPECT_GT(f32.flops, 0);
    EXPECT_EQ(f32.amx_flops, 0);
    EXPECT_EQ(amx.flops, 0);
    EXPECT_GT(amx.amx_flops, 0);
    // The tile's weights; channels-last, the AMX conv also runs as an implicit GEMM, which
    // copies its padded input rows (512 channels x 9 x 9) instead of the window block (49
    // pixels x k), as the float conv does too where its kernel reads A in place (the row path).
    const bool f32_rows = kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
    const double windows_saved =
        layout == ConvLayout::channels_last && !f32_rows ? 49.0 * 512 * 9 - 512.0 * 9 * 9 : 0;
    EXPECT_DOUBLE_EQ(amx.moves - f32.moves, 512.0 * 512 * 9 - windows_saved);
    auto conv_tiles = [&](double cost) {
      o.machine.amx_flop_cost = cost;
      auto plan = make_plan(marked, o);
      for (size_t n = 0; n < plan->graph.nodes.size(); ++n)
        if (plan->graph.nodes[n].op_type.rfind("Conv", 0) == 0) return plan->tiles.tile_count[n];
      return 0;
    };
    EXPECT_LE(conv_tiles(1.0 / 16), conv_tiles(1));
  }
}

// A 3x3 stem (3 -> 8 channels), a 3x3 conv of 4 groups, then a conv of `last_groups` groups
// and a `last_kernel` square kernel, all on 16x16; bound, not optimised: optimize() splits
// grouped convs like these into one conv per group (passes/split_grouped_convs.cpp), and the
// path cut is for the grouped convs it leaves grouped.
Graph stem_grouped_and(int64_t last_groups, int64_t last_kernel) {
  OnnxBuilder b;
  b.input("x", kF32, {1, 3, 16, 16}).output("y", kF32, {1, 8, 16, 16});
  weight(b, "w0", {8, 3, 3, 3}, 1);
  weight(b, "w1", {8, 2, 3, 3}, 2);
  weight(b, "w2", {8, 8 / last_groups, last_kernel, last_kernel}, 3);
  const std::tuple<const char*, const char*, const char*, int64_t> convs[] = {
      {"x", "w0", "a", 1}, {"a", "w1", "b", 4}, {"b", "w2", "y", last_groups}};
  for (const auto& [x, w, y, groups] : convs) {
    auto& conv = b.node("Conv", {x, w}, {y}, y);
    const int64_t pad = std::string(y) == "y" ? last_kernel / 2 : 1;
    OnnxBuilder::attr_ints(conv, "pads", {pad, pad, pad, pad});
    OnnxBuilder::attr_int(conv, "group", groups);
  }
  return unfused_graph({"paths", b.bytes(), {}});
}

TEST(Plan, ChainedGroupedConvsAreCutAlongTheirPaths) {
  // Stem, then two grouped convs (4 groups) feeding each other: planned for 4 threads, one
  // per path, the chain is cut by groups first, in whole groups, so each tile of the second
  // reads only its own path's tile of the first (DCCNN). For 2 threads, or for a grouped conv
  // followed by an ungrouped one, rows first as before.
  const Graph model = stem_grouped_and(4, 3);
  PlanOptions o;
  o.threads = 4;
  o.tiles_per_op = 4;
  auto plan = make_plan(model, o);
  const TileGraph& tg = plan->tiles;
  EXPECT_EQ(tile_grid(*plan, 0), (Shape{1, 1, 4, 1}));  // the stem: rows
  EXPECT_EQ(tile_grid(*plan, 1), (Shape{1, 4, 1, 1}));  // the paths: one group each
  EXPECT_EQ(tile_grid(*plan, 2), (Shape{1, 4, 1, 1}));
  for (int32_t t = tg.first_tile[2]; t < tg.first_tile[2] + tg.tile_count[2]; ++t) EXPECT_EQ(tg.n_parents[t], 1);
  EXPECT_EQ(planned_edges(tg), oracle_edges(*plan));
  PlanOptions two = o;
  two.threads = 2;
  EXPECT_EQ(tile_grid(*make_plan(model, two), 1), (Shape{1, 1, 4, 1}));
  EXPECT_EQ(tile_grid(*make_plan(stem_grouped_and(1, 1), o), 1), (Shape{1, 1, 4, 1}));
}

TEST(Plan, CriticalPathAndDepth) {
  Model model = load_test_model(matmul_chain());
  auto whole = make_plan(bound_graph(model), with_test_rules(1));
  // mm1+bias -> sigmoid -> mm2 -> softmax is the longest chain; tanh hangs off bias1.
  int64_t chain = 0;
  for (const Node& n : whole->graph.nodes)
    if (n.op_type != "Tanh") chain += node_flops(whole->graph, n);
  EXPECT_EQ(whole->critical_path_flops, chain);
  // bias1 is fused into mm1 (its Add has one reader); a1 has two, so the Sigmoid stays.
  EXPECT_EQ(*std::max_element(whole->tiles.depth.begin(), whole->tiles.depth.end()), 3);
  auto cut = make_plan(bound_graph(model), with_test_rules(18));
  EXPECT_LT(cut->critical_path_flops, chain / 4);  // rows are independent all the way down
  EXPECT_EQ(cut->total_flops, whole->total_flops);
}

TEST(Plan, BarrierScheduleKeepsTilesAndChainsOps) {
  Model model = load_test_model(residual());
  auto aspen = make_plan(bound_graph(model), with_test_rules(7));
  auto barrier = make_plan(bound_graph(model), with_test_rules(7, Schedule::barrier));
  const TileGraph& a = aspen->tiles;
  const TileGraph& b = barrier->tiles;
  size_t nodes = bound_graph(model).nodes.size();
  ASSERT_EQ(b.size(), a.size() + static_cast<int32_t>(nodes) - 1);
  expect_consistent(b);
  for (size_t n = 0; n < nodes; ++n) {
    ASSERT_EQ(a.tile_count[n], b.tile_count[n]);
    for (int32_t i = 0; i < a.tile_count[n]; ++i) {
      int32_t tb = b.first_tile[n] + i;
      EXPECT_EQ(a.region[a.first_tile[n] + i], b.region[tb]);
      EXPECT_EQ(b.n_parents[tb], n == 0 ? 0 : 1);
      EXPECT_EQ(b.depth[tb], static_cast<int32_t>(2 * n));
    }
    if (n + 1 < nodes) {
      int32_t barrier_tile = b.first_tile[n] + b.tile_count[n];
      EXPECT_EQ(b.node[barrier_tile], -1);
      EXPECT_EQ(b.n_parents[barrier_tile], b.tile_count[n]);
      EXPECT_EQ(b.child_begin[barrier_tile + 1] - b.child_begin[barrier_tile], b.tile_count[n + 1]);
    }
  }
  int64_t chain_edges = 0;
  for (size_t n = 0; n + 1 < nodes; ++n) chain_edges += a.tile_count[n] + a.tile_count[n + 1];
  EXPECT_EQ(b.edge_count(), chain_edges);
}

TEST(Plan, BufferPlan) {
  Model model = load_test_model(residual());
  auto plan = make_plan(bound_graph(model), with_test_rules(4));
  std::map<std::string, PlannedValue> v;
  for (const auto& pv : plan->values) v[pv.name] = pv;
  ASSERT_EQ(v.size(), 7u);  // x, c1, r1, c2, s, y, z
  EXPECT_EQ(v["x"].producer, -1);
  EXPECT_EQ(v["x"].consumer_tiles, plan->tiles.tile_count[0] + plan->tiles.tile_count[3]);
  EXPECT_EQ(v["c1"].consumer_tiles, plan->tiles.tile_count[1] + plan->tiles.tile_count[5]);
  EXPECT_TRUE(v["y"].is_output);
  EXPECT_TRUE(v["z"].is_output);
  EXPECT_FALSE(v["c2"].is_output);
  EXPECT_EQ(v["c2"].shape, (Shape{1, 4, 12, 12}));
  for (int32_t in : plan->node_inputs[0]) EXPECT_TRUE(in == -1 || plan->values[in].name == "x");
  EXPECT_GT(tile_graph_bytes(plan->tiles), 0);
}

TEST(Plan, RejectsBadOptionsAndBadRules) {
  Model model = load_test_model(conv_chain());
  PlanOptions o = with_test_rules(4);
  o.threads = 0;
  EXPECT_THROW(make_plan(bound_graph(model), o), Error);
  o = with_test_rules(-1);
  EXPECT_THROW(make_plan(bound_graph(model), o), Error);
  o = with_test_rules(4);
  o.debug.rule_lookup = [](const Node& n) -> const TileRule* {
    static const TileRule wrong_rank{[](const Node&, std::span<const ValueInfo>, std::span<const ValueInfo>) {
                                       return std::vector<int64_t>{1};
                                     },
                                     test_window_needs, whole_then_copy};
    return n.op_type == "Conv" ? &wrong_rank : nullptr;
  };
  try {
    make_plan(bound_graph(model), o);
    FAIL() << "a rule with block sizes of the wrong rank was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'conv1' (Conv)"), std::string::npos) << e.what();
  }
  Graph unbound = load_onnx_bytes(conv_chain().bytes, "unbound.onnx");
  EXPECT_THROW(make_plan(unbound, with_test_rules(2)), Error);
}
