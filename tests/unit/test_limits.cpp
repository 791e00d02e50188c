// Limits on what a model may make grove allocate (graph/limits.h): checked shape arithmetic,
// the memory limit at binding (before constant folding allocates) and in the reference
// executor (shapes that depend on input values), and its override.
#include <gtest/gtest.h>

#include "runtime/session.h"
#include "onnx/import.h"
#include "onnx_builder.h"

using namespace grove;
using grove::test::OnnxBuilder;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "no error";
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
}

// y = ConstantOfShape(shape) + x, with `shape` an initializer (folded at bind) or an input
// (its values known only at run time).
std::string constant_of_shape_model(bool shape_is_input, std::vector<int64_t> shape) {
  OnnxBuilder b;
  if (shape_is_input) b.input("shape", kInt64, {2});
  else b.initializer_i64("shape", {static_cast<int64_t>(shape.size())}, shape);
  b.input("x", kFloat, {-1}).output("y", kFloat, {-1, -1});
  b.node("ConstantOfShape", {"shape"}, {"c"}, "fill");
  b.node("Add", {"c", "x"}, {"y"}, "add");
  return b.bytes();
}

}  // namespace

TEST(Limits, ShapeArithmeticIsChecked) {
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(numel({2, 3, 4}), 24);
  EXPECT_EQ(numel({int64_t{1} << 40, 0}), 0);  // empty
  // Empty, but the other dims' product overflows: kernels multiply runs of dims, so an error.
  expect_error(error_of([] { numel({0, int64_t{1} << 40, int64_t{1} << 40}); }), {"too many elements"});
  expect_error(error_of([] { numel({int64_t{1} << 32, int64_t{1} << 32}); }), {"too many elements"});
  expect_error(error_of([] { numel({int64_t{1} << 31, int64_t{1} << 31}); }), {"too many elements"});  // 2^62: its bytes overflow
  expect_error(error_of([] { numel({4, -1}); }), {"negative"});
  expect_error(error_of([] { Tensor(DType::f32, {int64_t{1} << 33, int64_t{1} << 33}); }), {"too many elements"});
  EXPECT_EQ(checked_mul(int64_t{1} << 31, 4), int64_t{1} << 33);
  expect_error(error_of([] { checked_mul(INT64_MAX / 2, 3); }), {"overflows"});
  expect_error(error_of([] { checked_mul(-1, 3); }), {"overflows"});
}

TEST(Limits, FoldingAHugeConstantIsAnErrorBeforeItAllocates) {
  // 2^40 floats (4 TiB), from a 100-byte model: bind would fold it into an initializer.
  std::string bytes = constant_of_shape_model(false, {int64_t{1} << 20, int64_t{1} << 20});
  expect_error(error_of([&] { model_from_graph(load_onnx_bytes(bytes, "fill.onnx"), {{"x", {1}}}); }),
               {"fill.onnx", "node 'fill' (ConstantOfShape)", "memory limit", "--max-memory"});
}

TEST(Limits, DeclaredActivationsAreChargedAtBind) {
  std::string bytes = constant_of_shape_model(false, {16, 16});  // c and y: 1 KiB each
  Graph g = load_onnx_bytes(bytes, "small.onnx");
  const int64_t need = 16 + 4 + 1024 + 1024;  // shape initializer, x, c, y
  Model fits = model_from_graph(g, {{"x", {1}}}, {.max_memory = need});
  EXPECT_EQ(bound_graph(fits).declared_bytes, need);
  expect_error(error_of([&] { model_from_graph(g, {{"x", {1}}}, {.max_memory = need - 1}); }),
               {"small.onnx", "node 'add' (Add)", "memory limit"});
  // An input shape from the caller counts too.
  expect_error(error_of([&] { model_from_graph(load_onnx_bytes(bytes, "in.onnx"), {{"x", {1 << 20}}}, {.max_memory = 1 << 20}); }),
               {"in.onnx", "input 'x'", "memory limit"});
}

// A server reserves memory for a run without a plan from what such runs measured
// (largest_unplanned_peak): the reference executor counts its inputs and live values.
TEST(Limits, ReferenceExecutorMeasuresItsPeak) {
  Engine engine({.threads = 1, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(constant_of_shape_model(true, {}), "dyn.onnx")));
  auto run = [&](int64_t rows, int64_t cols) {
    RunStats stats;
    session.run({{"shape", Tensor::from<int64_t>({2}, std::vector<int64_t>{rows, cols})},
                 {"x", Tensor::from<float>({1}, std::vector<float>{1.f})}},
                &stats);
    EXPECT_TRUE(stats.used_reference);
    return stats.peak_activation_bytes;
  };
  EXPECT_EQ(largest_unplanned_peak(session), 0);
  // x (4 bytes), c and y side by side while Add runs: the shape input (16 bytes) is dropped
  // once ConstantOfShape has read it.
  const int64_t big = 4 + 2 * 64 * 64 * 4;
  EXPECT_EQ(run(64, 64), big);
  EXPECT_EQ(largest_unplanned_peak(session), big);
  EXPECT_EQ(run(4, 8), 4 + 2 * 4 * 8 * 4);
  EXPECT_EQ(largest_unplanned_peak(session), big);  // the most any run held
}

TEST(Limits, ReferenceExecutorChecksShapesThatDependOnInputValues) {
  std::string bytes = constant_of_shape_model(true, {});
  Engine engine({.threads = 1, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(bytes, "dyn.onnx"), {}, {.max_memory = 1 << 20}));
  auto inputs = [](int64_t rows, int64_t cols) {
    return TensorMap{{"shape", Tensor::from<int64_t>({2}, std::vector<int64_t>{rows, cols})},
                     {"x", Tensor::from<float>({1}, std::vector<float>{1.f})}};
  };
  RunStats stats;
  TensorMap out = session.run(inputs(4, 8), &stats);
  EXPECT_TRUE(stats.used_reference);
  EXPECT_EQ(out.at("y").shape(), (Shape{4, 8}));
  expect_error(error_of([&] { session.run(inputs(1024, 1024)); }),
               {"dyn.onnx", "node 'fill' (ConstantOfShape)", "memory limit"});
  // 2^40 elements under the default limit: still an error, not an allocation.
  Session roomy(engine, model_from_graph(load_onnx_bytes(bytes, "dyn.onnx")));
  expect_error(error_of([&] { roomy.run(inputs(int64_t{1} << 20, int64_t{1} << 20)); }), {"memory limit"});
  // Failed runs leave the session usable.
  EXPECT_EQ(session.run(inputs(2, 3)).at("y").shape(), (Shape{2, 3}));
}

namespace {
// y = MatMul(Relu(x), w): x [8, 512], w [512, 1024]. Every MatMul tile reads all of K, so
// with many tiles per op each depends on many Relu tiles. N is wide enough for 32 MatMul
// tiles even with the widest microkernel (a tile is at least one register tile wide).
std::string relu_matmul_model() {
  OnnxBuilder b;
  b.input("x", kFloat, {8, 512}).output("y", kFloat, {8, 1024});
  b.initializer_f32("w", {512, 1024}, std::vector<float>(512 * 1024, 0.5f));
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("MatMul", {"r", "w"}, {"y"}, "matmul");
  return b.bytes();
}
}  // namespace

TEST(Limits, PlanTilesAndEdgesAreBounded) {
  Model model = model_from_graph(load_onnx_bytes(relu_matmul_model(), "mm.onnx"));
  PlanOptions o;
  o.tiles_per_op = 64;
  auto plan = make_plan(bound_graph(model), o);
  const int64_t tiles = plan->tiles.size(), edges = static_cast<int64_t>(plan->tiles.children.size());
  ASSERT_GT(edges, kMaxEdgesPerTile * tiles) << "the model no longer makes many edges per tile";
  o.max_tiles = tiles - 1;
  expect_error(error_of([&] { make_plan(bound_graph(model), o); }), {"(MatMul)", "tiles, over the limit", "--max-tiles"});
  o.max_tiles = tiles;  // the tiles fit, their edges do not
  expect_error(error_of([&] { make_plan(bound_graph(model), o); }), {"(MatMul)", "tile dependencies", "--max-tiles"});
  o.max_tiles = edges / kMaxEdgesPerTile + 1;
  EXPECT_NO_THROW(make_plan(bound_graph(model), o));
  // Through a Session: Limits::max_tiles reaches the planner.
  Engine engine({.threads = 2, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(relu_matmul_model(), "mm.onnx"), {}, {.max_tiles = 1}));
  expect_error(error_of([&] { session.run({{"x", Tensor(DType::f32, {8, 512})}}); }), {"mm.onnx", "--max-tiles"});
}
