// Views (plan/plan_views.cpp): reshapes share their input's buffer through one no-work tile, and
// convs write a Concat's inputs into its buffer (slices);
// results stay those of the reference, serially in random orders and on the engine, and
// buffers are neither copied nor released early.
#include <gtest/gtest.h>

#include "plan_test_util.h"
#include "onnx/import.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace grove {
namespace {

using namespace grove::test;

PlanOptions tiles(int k) {
  PlanOptions o;
  o.tiles_per_op = k;
  o.threads = 3;
  return o;
}

std::vector<std::string> view_ops(const Plan& p) {
  std::vector<std::string> ops;
  for (int32_t n = 0; n < static_cast<int32_t>(p.graph.nodes.size()); ++n)
    if (is_view_node(p, n)) ops.push_back(p.graph.nodes[n].name);
  return ops;
}

// x[2,6,8] -> Relu -> Reshape [12,8] -> Unsqueeze -> Transpose (moves a unit dim) -> Sigmoid
//   -> y; x -> Reshape -> Tanh -> z (a view of a graph input); Relu -> Flatten -> f (an
//   output: copied); Relu -> Transpose (a real one) -> t.
TestModel views_model() {
  OnnxBuilder b(13);
  b.input("x", kF32, {2, 6, 8});
  b.initializer_i64("s12x8", {2}, {12, 8});
  b.initializer_i64("axes0", {1}, {0});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Reshape", {"a", "s12x8"}, {"r"}, "reshape");
  b.node("Unsqueeze", {"r", "axes0"}, {"u"}, "unsqueeze");
  OnnxBuilder::attr_ints(b.node("Transpose", {"u"}, {"tu"}, "unit_transpose"), "perm", {1, 0, 2});
  b.node("Sigmoid", {"tu"}, {"y"}, "sigmoid");
  b.node("Reshape", {"x", "s12x8"}, {"xr"}, "input_reshape");
  b.node("Tanh", {"xr"}, {"z"}, "tanh");
  b.node("Flatten", {"a"}, {"f"}, "flatten");
  OnnxBuilder::attr_ints(b.node("Transpose", {"a"}, {"t"}, "real_transpose"), "perm", {0, 2, 1});
  b.output("y", kF32, {12, 1, 8}).output("z", kF32, {12, 8}).output("f", kF32, {2, 48}).output("t", kF32, {2, 8, 6});
  return {"views", b.bytes(), {{"x", seeded_tensor({2, 6, 8}, 5)}}};
}

// Tiles run Sigmoid/Tanh on the vectorised kernels (kernels/vmath.h), the reference in
// scalar libm: a few ulps apart. Wrong or stale view data would be off by far more.
constexpr double kVectorMathTolerance = 1e-6;

TEST(PlannedRun, ViewsAreNoWorkTilesWithReferenceResults) {
  TestModel m = views_model();
  Model model = load_test_model(m);
  TensorMap want = model.run_reference(m.inputs);
  for (int k : {0, 1, 4, 7}) {
    auto plan = make_plan(bound_graph(model), tiles(k));
    EXPECT_EQ(view_ops(*plan), (std::vector<std::string>{"reshape", "unsqueeze", "unit_transpose", "input_reshape"}));
    for (int32_t n = 0; n < static_cast<int32_t>(plan->graph.nodes.size()); ++n)
      if (is_view_node(*plan, n)) EXPECT_EQ(plan->tiles.tile_count[n], 1);
    for (uint32_t seed = 0; seed < 5; ++seed) {
      PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
      run_serial(run, seed);
      expect_close(run.outputs(), want, kVectorMathTolerance, "k=" + std::to_string(k));
    }
    Engine engine(EngineOptions{.threads = 3});
    for (int i = 0; i < 5; ++i) {
      auto run = std::make_shared<PlannedRun>(plan, m.inputs, PlannedRunOptions{true});
      run_job(engine, run);
      expect_close(run->outputs(), want, kVectorMathTolerance, "engine k=" + std::to_string(k));
    }
  }
}

TEST(PlannedRun, ViewsShareTheirBaseBuffer) {
  // x -> Relu a -> Reshape -> Reshape r2 -> Sigmoid y; w = a + r2; one tile each. With views
  // r1 and r2 are a's buffer: at most a, y and w live (copies would add r2, then 4 buffers).
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 64, 128}).output("y", kF32, {64, 128}).output("w", kF32, {1, 64, 128});
  b.initializer_i64("s1", {3}, {64, 8, 16});
  b.initializer_i64("s2", {2}, {64, 128});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Reshape", {"a", "s1"}, {"r1"}, "reshape1");
  b.node("Reshape", {"r1", "s2"}, {"r2"}, "reshape2");
  b.node("Sigmoid", {"r2"}, {"y"}, "sigmoid");
  b.node("Add", {"a", "r2"}, {"w"}, "add");
  TestModel m{"shared_buffer", b.bytes(), {{"x", seeded_tensor({1, 64, 128}, 6)}}};
  Model model = load_test_model(m);
  auto plan = make_plan(bound_graph(model), tiles(1));
  ASSERT_EQ(view_ops(*plan).size(), 2u);
  const int64_t bytes = 64 * 128 * 4;
  for (uint32_t seed = 0; seed < 5; ++seed) {
    PlannedRun run(plan, m.inputs);
    run_serial(run, seed);
    EXPECT_EQ(run.peak_activation_bytes(), 3 * bytes);
    EXPECT_EQ(run.activation_bytes(), 2 * bytes);  // the outputs: a went with its last view and reader
    expect_close(run.outputs(), model.run_reference(m.inputs), kVectorMathTolerance, "shared buffer");
  }
}

// The caller holds an output view's buffer alone: later runs through the same session (its
// buffer pool) must not write into the first run's outputs the caller still holds.
void expect_outputs_outlive_later_runs(const TestModel& m, Model& model, const TensorMap& second_inputs, int threads) {
  const TensorMap want_first = model.run_reference(m.inputs);
  const TensorMap want_second = model.run_reference(second_inputs);
  Engine engine(EngineOptions{.threads = threads});
  Session session(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")), {.tiles_per_op = threads});
  const TensorMap first = session.run(m.inputs);
  for (int i = 0; i < 3; ++i) expect_close(session.run(second_inputs), want_second, 0, "later run");
  expect_close(first, want_first, 0, "the first run's outputs, held across later runs");
}

// A graph output that relabels a value only it reads (GPT-2's logits Reshape of the LM head's
// Gemm) is a view: no copy. The caller holds that buffer alone: a later run through the same
// session (its buffer pool) must not write into the outputs the caller still holds.
TEST(PlannedRun, AnOutputReshapeOfAValueOnlyItReadsIsAView) {
  OnnxBuilder b(13);
  b.input("x", kF32, {4, 6, 8}).output("y", kF32, {24, 8});
  b.initializer_i64("s", {2}, {24, 8});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Reshape", {"a", "s"}, {"y"}, "reshape");
  TestModel m{"output_view", b.bytes(), {{"x", seeded_tensor({4, 6, 8}, 7)}}};
  Model model = load_test_model(m);
  auto plan = make_plan(bound_graph(model), tiles(3));
  EXPECT_EQ(view_ops(*plan), (std::vector<std::string>{"reshape"}));
  expect_outputs_outlive_later_runs(m, model, {{"x", seeded_tensor({4, 6, 8}, 8)}}, 3);
  // Read by another node as well, the value is not given to the caller: the output is copied.
  OnnxBuilder shared(13);
  shared.input("x", kF32, {4, 6, 8}).output("y", kF32, {24, 8}).output("z", kF32, {4, 6, 8});
  shared.initializer_i64("s", {2}, {24, 8});
  shared.node("Relu", {"x"}, {"a"}, "relu");
  shared.node("Reshape", {"a", "s"}, {"y"}, "reshape");
  shared.node("Sigmoid", {"a"}, {"z"}, "sigmoid");
  Model two = model_from_graph(load_onnx_bytes(shared.bytes(), "shared_output.onnx"));
  EXPECT_TRUE(view_ops(*make_plan(bound_graph(two), tiles(3))).empty());
}

// A chain of views ending in a graph output (a decoder step's new keys: Split -> Reshape ->
// Transpose moving the one new position) is views all the way when each link is read only by
// the next; a second reader of the middle link makes the output a copy again.
TEST(PlannedRun, AnOutputAtTheEndOfAChainOfViewsIsAView) {
  for (const bool middle_read : {false, true}) {
    OnnxBuilder b(13);
    b.input("x", kF32, {1, 1, 48}).output("y", kF32, {1, 6, 1, 8});
    if (middle_read) b.output("z", kF32, {1, 1, 6, 8});
    b.initializer_i64("s", {4}, {1, 1, 6, 8});
    b.node("Relu", {"x"}, {"a"}, "relu");
    b.node("Reshape", {"a", "s"}, {"r"}, "reshape");
    OnnxBuilder::attr_ints(b.node("Transpose", {"r"}, {"y"}, "transpose"), "perm", {0, 2, 1, 3});
    if (middle_read) b.node("Neg", {"r"}, {"z"}, "neg");
    TestModel m{"output_chain", b.bytes(), {{"x", seeded_tensor({1, 1, 48}, 9)}}};
    Model model = load_test_model(m);
    const std::vector<std::string> want_views =
        middle_read ? std::vector<std::string>{"reshape"} : std::vector<std::string>{"reshape", "transpose"};
    EXPECT_EQ(view_ops(*make_plan(bound_graph(model), tiles(2))), want_views) << "middle read " << middle_read;
    expect_outputs_outlive_later_runs(m, model, {{"x", seeded_tensor({1, 1, 48}, 10)}}, 2);
  }
  // A chain that starts at a graph input would give the caller its own input's buffer back.
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 1, 48}).output("y", kF32, {1, 6, 1, 8});
  b.initializer_i64("s", {4}, {1, 1, 6, 8});
  b.node("Reshape", {"x", "s"}, {"r"}, "reshape");
  OnnxBuilder::attr_ints(b.node("Transpose", {"r"}, {"y"}, "transpose"), "perm", {0, 2, 1, 3});
  Model from_input = model_from_graph(load_onnx_bytes(b.bytes(), "input_chain.onnx"));
  EXPECT_EQ(view_ops(*make_plan(bound_graph(from_input), tiles(2))), (std::vector<std::string>{"reshape"}));
}

// Slices, the other way round (plan_views.cpp): a SqueezeNet fire module, channels-last, and a
// second Concat one of whose inputs has another reader. The first Concat's expands write straight into its buffer (slices, plan/plan_views.cpp) and the
// Concat copies nothing; the second copies as before. Either way the outputs are the
// reference's, in any tile order and with poisoned buffers, bit for bit those of a plan whose
// Concats copy, and the slices save the copies' memory.
// Against the reference: four convs deep, sums of 32 to 288 products whose float rounding
// differs by kernel (the scalar build's exceeds 1e-4 on a few outputs near zero); the copies
// are the sharp check.
constexpr double kConvTolerance = 1e-3;

TEST(PlannedRun, ConvsWriteAChannelsLastConcatsInputsIntoItsBuffer) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 12, 12}).output("z", kF32, {1, 64, 6, 6}).output("g", kF32, {1, 32, 6, 6});
  weight(b, "ws", {32, 32, 1, 1}, 1);
  weight(b, "w1", {32, 32, 1, 1}, 2);
  weight(b, "w3", {32, 32, 3, 3}, 3);
  weight(b, "wn", {32, 64, 1, 1}, 4);
  weight(b, "v1", {32, 32, 1, 1}, 5);
  weight(b, "v3", {32, 32, 3, 3}, 6);
  b.node("Conv", {"x", "ws"}, {"s"}, "squeeze");
  b.node("Relu", {"s"}, {"sr"}, "squeeze_relu");
  b.node("Conv", {"sr", "w1"}, {"e1"}, "expand1x1");
  OnnxBuilder::attr_ints(b.node("Conv", {"sr", "w3"}, {"e3"}, "expand3x3"), "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(b.node("Concat", {"e1", "e3"}, {"cat"}, "concat"), "axis", 1);
  auto& pool = b.node("MaxPool", {"cat"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  b.node("Conv", {"p", "wn"}, {"n"}, "next_squeeze");
  b.node("Conv", {"n", "v1"}, {"f1"}, "next_1x1");
  OnnxBuilder::attr_ints(b.node("Conv", {"n", "v3"}, {"f3"}, "next_3x3"), "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(b.node("Concat", {"f1", "f3"}, {"cat2"}, "concat_copied"), "axis", 1);
  b.node("Relu", {"cat2"}, {"z"}, "relu_z");
  b.node("Relu", {"f1"}, {"g"}, "another_reader");
  const TestModel m{"fires", b.bytes(), {{"x", seeded_tensor({1, 32, 12, 12}, 9)}}};
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  PlanOptions copies;
  copies.debug.concat_slices = false;
  for (int threads : {1, 3}) {
    PlanOptions options;
    options.threads = copies.threads = threads;
    auto plan = make_plan(bound_graph(model), options);
    auto copying = make_plan(bound_graph(model), copies);
    EXPECT_EQ(plan->channels_last_convs, 6);
    std::vector<std::string> gathered, slices;
    for (int32_t n = 0; n < static_cast<int32_t>(plan->graph.nodes.size()); ++n) {
      if (is_gathered_node(*plan, n)) gathered.push_back(plan->graph.nodes[n].name);
      EXPECT_FALSE(is_gathered_node(*copying, n));
    }
    for (const PlannedValue& v : plan->values)
      if (v.slice_of >= 0) slices.push_back(v.name + "@" + std::to_string(v.slice_offset));
    EXPECT_EQ(gathered, std::vector<std::string>{"concat"});
    EXPECT_EQ(slices, (std::vector<std::string>{"e1/nhwc@0", "e3/nhwc@32"}));  // the channels-last copies
    for (uint32_t seed : {1u, 2u, 3u}) {
      PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
      run_serial(run, seed);
      expect_close(run.outputs(), want, kConvTolerance, "slices, serial");
    }
    for (uint32_t seed : {1u, 2u}) {
      PlannedRun with(plan, m.inputs, PlannedRunOptions{true}), without(copying, m.inputs, PlannedRunOptions{true});
      run_serial(with, seed);
      run_serial(without, seed);
      expect_close(with.outputs(), without.outputs(), 0, "slices against copies");
      EXPECT_LT(with.peak_activation_bytes(), without.peak_activation_bytes());
    }
    Engine engine(EngineOptions{.threads = 3});
    for (int i = 0; i < 4; ++i) {
      auto run = std::make_shared<PlannedRun>(plan, m.inputs, PlannedRunOptions{true});
      run_job(engine, run);
      expect_close(run->outputs(), want, kConvTolerance, "slices on the engine");
    }
  }
}

}  // namespace
}  // namespace grove
