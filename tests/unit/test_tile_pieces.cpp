// Tiles in pieces on real plans (TileRule::pieces, Job::pieces): a decode step's weight
// streams (MatMul and Gemm of at most kernels::kFewRows rows against constant weights) run in
// runs of whole panels, in any order and on any workers, bit for bit as their tiles run
// whole; other products, and plans for one thread, have no pieces.
#include <algorithm>
#include <random>

#include "kernels/gemm.h"
#include "plan_test_util.h"
#include "runtime/engine.h"
#include "runtime/help_board.h"
#include "runtime/planned_run.h"

using namespace grove;
using namespace grove::test;

namespace {

struct ProductCase {
  std::string name;
  Model model;
  TensorMap inputs;
};

// y = x . w, x [1, rows, k], w [k, n] constant.
ProductCase matmul_case(int64_t rows, int64_t k, int64_t n, uint32_t seed) {
  Model model = model_from_graph(load_onnx_bytes([&] {
    OnnxBuilder m;
    m.input("x", kF32, {1, rows, k}).output("y", kF32, {1, rows, n});
    weight(m, "w", {k, n}, seed);
    m.node("MatMul", {"x", "w"}, {"y"}, "stream");
    return m.bytes();
  }(), "matmul.onnx"));
  return {"MatMul rows " + std::to_string(rows) + " k " + std::to_string(k) + " n " + std::to_string(n), std::move(model),
          {{"x", seeded_tensor({1, rows, k}, seed + 1)}}};
}

// y = x . w^T + c, x [rows, k], w [n, k] and c [n] constant (a classifier head).
ProductCase gemm_case(int64_t rows, int64_t k, int64_t n, uint32_t seed) {
  Model model = model_from_graph(load_onnx_bytes([&] {
    OnnxBuilder m;
    m.input("x", kF32, {rows, k}).output("y", kF32, {rows, n});
    weight(m, "w", {n, k}, seed);
    weight(m, "c", {n}, seed + 2);
    auto& g = m.node("Gemm", {"x", "w", "c"}, {"y"}, "head");
    auto* a = g.add_attribute();
    a->set_name("transB");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
    return m.bytes();
  }(), "gemm.onnx"));
  return {"Gemm rows " + std::to_string(rows) + " k " + std::to_string(k) + " n " + std::to_string(n), std::move(model),
          {{"x", seeded_tensor({rows, k}, seed + 1)}}};
}

PlanOptions with_pieces(int threads, int64_t piece_bytes, Precision precision = Precision::fp32) {
  PlanOptions o;
  o.threads = threads;
  o.piece_bytes = piece_bytes;
  o.precision = precision;
  return o;
}

// Every tile in a random order that respects the DAG, a tile with pieces as begin, runs of its
// pieces in a random order, end.
TensorMap run_in_random_pieces(std::shared_ptr<const Plan> plan, const TensorMap& inputs, uint32_t seed, int& most) {
  PlannedRun run(std::move(plan), inputs, PlannedRunOptions{true});
  DagView dag = run.dag();
  std::vector<int32_t> waiting(dag.n_parents.begin(), dag.n_parents.end());
  std::vector<int32_t> ready(dag.sources.begin(), dag.sources.end());
  std::mt19937 rng(seed);
  while (!ready.empty()) {
    const size_t pick = std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng);
    const int32_t t = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    const int pieces = run.pieces(t);
    most = std::max(most, pieces);
    if (pieces > 1) {  // runs of 1-3 consecutive pieces, in a random order
      std::vector<std::pair<int, int>> runs;
      for (int p = 0; p < pieces;) {
        const int end = std::min(pieces, p + 1 + static_cast<int>(rng() % 3));
        runs.emplace_back(p, end);
        p = end;
      }
      std::shuffle(runs.begin(), runs.end(), rng);
      run.begin_pieces(t, 0);
      for (auto [first, end] : runs) run.run_pieces(t, first, end, pieces, static_cast<int>(rng() % 2));
      run.end_pieces(t, 0);
    } else {
      run.run_tile(t, 0);
    }
    for (int64_t c = dag.child_begin[t]; c < dag.child_begin[t + 1]; ++c)
      if (--waiting[dag.children[c]] == 0) ready.push_back(dag.children[c]);
  }
  return run.outputs();
}

TensorMap run_whole(std::shared_ptr<const Plan> plan, const TensorMap& inputs) {
  PlannedRun run(std::move(plan), inputs, PlannedRunOptions{true});
  run_serial(run, 7);
  return run.outputs();
}

void expect_identical(const TensorMap& got, const TensorMap& want, const std::string& what) {
  const Tensor &g = got.at("y"), &w = want.at("y");
  ASSERT_EQ(g.shape(), w.shape()) << what;
  const auto gs = g.span<float>(), ws = w.span<float>();
  for (size_t i = 0; i < gs.size(); ++i)
    if (gs[i] != ws[i]) {
      ADD_FAILURE() << what << ": element " << i << " is " << gs[i] << " in pieces, " << ws[i] << " whole";
      return;
    }
}

}  // namespace

// Generated products: pieces of one panel (piece_bytes 1), of a few, and the cap of
// kMaxTilePieces per tile (n of 5000 in single panels), in random orders, equal the tiles run
// whole bit for bit, and the reference within rounding.
TEST(TilePieces, DecodeProductsInPiecesEqualTheirTilesWhole) {
  std::mt19937 rng(11);
  std::vector<ProductCase> cases;
  for (int i = 0; i < 6; ++i) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % kernels::kFewRows), k = 8 + rng() % 120,
                  n = 40 + rng() % 900;
    cases.push_back(i % 2 ? gemm_case(rows, k, n, 100 + i) : matmul_case(rows, k, n, 100 + i));
  }
  cases.push_back(matmul_case(1, 64, 5000, 9));
  for (ProductCase& c : cases)
    for (int threads : {2, 3})
      for (int64_t piece_bytes : {int64_t{1}, int64_t{4096}}) {
        auto plan = make_plan(bound_graph(c.model), with_pieces(threads, piece_bytes));
        const std::string what = c.name + " threads " + std::to_string(threads) + " piece bytes " +
                                 std::to_string(piece_bytes);
        ASSERT_EQ(plan->pieces.size(), plan->graph.nodes.size()) << what;
        EXPECT_EQ(plan->pieces[0].dim, static_cast<int>(plan->graph.nodes[0].op_type == "Gemm" ? 1 : 2)) << what;
        const TensorMap whole = run_whole(plan, c.inputs);
        int most = 0;
        expect_identical(run_in_random_pieces(plan, c.inputs, 3, most), whole, what);
        EXPECT_GT(most, 1) << what;
        EXPECT_LE(most, kMaxTilePieces) << what;
        expect_close(whole, c.model.run_reference(c.inputs), 1e-5, what);
        // On an engine, where idle workers take pieces of running tiles.
        Engine engine({.threads = threads, .pin = false});
        auto job = std::make_shared<PlannedRun>(plan, c.inputs, PlannedRunOptions{true});
        run_job(engine, job);
        expect_identical(job->outputs(), whole, what + " on the engine");
      }
}

// The weights in bf16 (a decode step's --precision bf16): their pieces too equal the tiles
// whole bit for bit (where the CPU has no bf16 kernel the plan keeps fp32). Int8 weights run
// whole: in pieces their kernel's set-up per call cost more than the pieces gave.
TEST(TilePieces, Bf16WeightsInPiecesEqualTheirTilesWholeAndInt8WeightsRunWhole) {
  for (ProductCase c : {matmul_case(1, 200, 700, 21), gemm_case(3, 96, 900, 22)}) {
    auto plan = make_plan(bound_graph(c.model), with_pieces(2, 1, Precision::bf16));
    const std::string what = c.name + " bf16";
    const TensorMap whole = run_whole(plan, c.inputs);
    int most = 0;
    expect_identical(run_in_random_pieces(plan, c.inputs, 5, most), whole, what);
    EXPECT_GT(most, 1) << what;
    Engine engine({.threads = 2, .pin = false});
    auto job = std::make_shared<PlannedRun>(plan, c.inputs, PlannedRunOptions{true});
    run_job(engine, job);
    expect_identical(job->outputs(), whole, what + " on the engine");
    auto int8 = make_plan(bound_graph(c.model), with_pieces(2, 1, Precision::int8_weights));
    EXPECT_EQ(int8->graph.nodes[0].decisions.precision, NodePrecision::int8_weights) << c.name;
    EXPECT_EQ(int8->pieces[0].dim, -1) << c.name;
  }
}

// The cap splits a tile into at most kMaxTilePieces runs, still of whole panels.
TEST(TilePieces, ATileOfManyPanelsIsCappedAtTheMostPieces) {
  ProductCase c = matmul_case(1, 64, 5000, 9);
  auto plan = make_plan(bound_graph(c.model), with_pieces(2, 1));
  PlannedRun run(plan, c.inputs, PlannedRunOptions{true});
  for (int32_t t = 0; t < plan->tiles.size(); ++t) EXPECT_EQ(run.pieces(t), kMaxTilePieces) << t;
}

// More rows than a decode step's, activations as B, or one thread: tiles run whole.
TEST(TilePieces, OtherProductsAndOneThreadHaveNoPieces) {
  ProductCase rows = matmul_case(static_cast<int64_t>(kernels::kFewRows) + 1, 64, 600, 3);
  EXPECT_EQ(make_plan(bound_graph(rows.model), with_pieces(2, 1))->pieces[0].dim, -1);
  ProductCase one = matmul_case(1, 64, 600, 3);
  EXPECT_EQ(make_plan(bound_graph(one.model), with_pieces(1, 1))->pieces[0].dim, -1);
  Model activations = model_from_graph(load_onnx_bytes([&] {
    OnnxBuilder m;
    m.input("x", kF32, {1, 1, 64}).input("v", kF32, {1, 64, 600}).output("y", kF32, {1, 1, 600});
    m.node("MatMul", {"x", "v"}, {"y"}, "activations");
    return m.bytes();
  }(), "activations.onnx"));
  EXPECT_EQ(make_plan(bound_graph(activations), with_pieces(2, 1))->pieces[0].dim, -1);
}
