// If, Loop and Scan (ops/control_flow/control_flow.h): the reference executor, and the tile runtime
// through the Session (an If with a constant condition inlined at bind, anything else run in
// segments, runtime/segmented_graph.h), must give the hand-computed values; bad control flow
// is a one-line error naming the node.
#include <gtest/gtest.h>

#include <future>

#include "grove/grove.h"
#include "onnx/import.h"
#include "onnx_builder.h"
#include "runtime/session.h"

using namespace grove;
using grove::test::OnnxBuilder;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kBool = onnx::TensorProto::BOOL;
constexpr int kInt64 = onnx::TensorProto::INT64;

void attach(onnx::NodeProto& node, const std::string& name, OnnxBuilder& body) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body.proto().graph();
}

// Outputs of the reference executor, and of the tile runtime at 1 and 2 workers.
std::vector<TensorMap> run_everywhere(const Graph& g, const TensorMap& inputs, std::vector<RunStats>* stats = nullptr) {
  std::vector<TensorMap> results{model_from_graph(g).run_reference(inputs)};
  for (int threads : {1, 2}) {
    Engine engine({.threads = threads, .pin = false});
    Session session(engine, model_from_graph(g));
    RunStats s;
    for (int again = 0; again < 2; ++again) results.push_back(session.run(inputs, &s));  // the second run uses cached plans
    if (stats) stats->push_back(s);
  }
  return results;
}

void expect_values(const Tensor& t, std::vector<float> want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(t.data<float>()[i], want[i]) << "element " << i;
}

std::string run_error(const Graph& g, const TensorMap& inputs) {
  try {
    Engine engine({.threads = 2, .pin = false});
    Session session(engine, model_from_graph(g));
    session.run(inputs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// y = If(c) then xx * 3 else xx - x, with xx = x + x made outside and x read from the outer scope.
Graph if_model() {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).input("c", kBool, {}).output("y", kFloat, {2});
  b.node("Add", {"x", "x"}, {"xx"}, "double");
  OnnxBuilder then_b, else_b;
  then_b.initializer_f32("three", {}, {3});
  then_b.node("Mul", {"xx", "three"}, {"t"}, "times3");
  then_b.output("t", kFloat, {2});
  else_b.node("Sub", {"xx", "x"}, {"e"}, "minus");
  else_b.output("e", kFloat, {2});
  auto& node = b.node("If", {"c"}, {"y"}, "choose");
  attach(node, "then_branch", then_b);
  attach(node, "else_branch", else_b);
  return load_onnx_bytes(b.bytes(), "if.onnx");
}

}  // namespace

TEST(ControlFlow, IfRunsTheBranchItsConditionPicksOnEveryExecutor) {
  const Graph g = if_model();
  for (bool c : {true, false}) {
    TensorMap in{{"x", Tensor::from<float>({2}, std::vector<float>{1, -2})}, {"c", Tensor::scalar<bool>(c)}};
    std::vector<RunStats> stats;
    for (const TensorMap& out : run_everywhere(g, in, &stats))
      expect_values(out.at("y"), c ? std::vector<float>{6, -12} : std::vector<float>{1, -2});
    for (const RunStats& s : stats) EXPECT_GT(s.segment_runs, 0) << "a runtime condition runs in segments";
  }
}

TEST(ControlFlow, IfWithAConstantConditionIsInlinedIntoOneTileGraph) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.initializer_bool("yes", {}, {true});
  OnnxBuilder then_b, else_b;
  then_b.node("Relu", {"x"}, {"t"}, "relu");
  then_b.output("t", kFloat, {2});
  else_b.node("Neg", {"x"}, {"e"}, "neg");
  else_b.output("e", kFloat, {2});
  auto& node = b.node("If", {"yes"}, {"y"}, "choose");
  attach(node, "then_branch", then_b);
  attach(node, "else_branch", else_b);
  const Graph g = load_onnx_bytes(b.bytes(), "const_if.onnx");
  TensorMap in{{"x", Tensor::from<float>({2}, std::vector<float>{1, -2})}};
  std::vector<RunStats> stats;
  for (const TensorMap& out : run_everywhere(g, in, &stats)) expect_values(out.at("y"), {1, 0});
  for (const RunStats& s : stats) EXPECT_EQ(s.segment_runs, 0) << "the whole model should be one TileGraph";
  Engine engine({.threads = 1, .pin = false});
  Session session(engine, model_from_graph(g));
  EXPECT_NE(plan_for(session, {{"x", {2}}}), nullptr);
}

// s' = s + x per iteration (x from the outer scope), every s' stacked as a scan output.
TEST(ControlFlow, LoopCarriesStateAndStacksScanOutputs) {
  OnnxBuilder b;
  b.input("m", kInt64, {}).input("x", kFloat, {2}).input("s0", kFloat, {2});
  b.output("s", kFloat, {2}).output("all", kFloat, {-1, 2});
  OnnxBuilder body;
  body.input("i", kInt64, {}).input("cond_in", kBool, {}).input("s_in", kFloat, {2});
  body.node("Add", {"s_in", "x"}, {"s_out"}, "step");
  body.node("Identity", {"cond_in"}, {"cond_out"}, "keep");
  body.node("Identity", {"s_out"}, {"scan"}, "record");
  body.output("cond_out", kBool, {}).output("s_out", kFloat, {2}).output("scan", kFloat, {2});
  auto& node = b.node("Loop", {"m", "", "s0"}, {"s", "all"}, "repeat");
  attach(node, "body", body);
  const Graph g = load_onnx_bytes(b.bytes(), "loop.onnx");
  TensorMap in{{"m", Tensor::scalar<int64_t>(3)},
               {"x", Tensor::from<float>({2}, std::vector<float>{1, 10})},
               {"s0", Tensor::from<float>({2}, std::vector<float>{0, 5})}};
  std::vector<RunStats> stats;
  for (const TensorMap& out : run_everywhere(g, in, &stats)) {
    expect_values(out.at("s"), {3, 35});
    EXPECT_EQ(out.at("all").shape(), (Shape{3, 2}));
    expect_values(out.at("all"), {1, 15, 2, 25, 3, 35});
  }
  for (const RunStats& s : stats) EXPECT_GE(s.segment_runs, 3) << "one body run per iteration";

  in["m"] = Tensor::scalar<int64_t>(0);  // no iteration: the initial state, an empty stack
  for (const TensorMap& out : run_everywhere(g, in)) {
    expect_values(out.at("s"), {0, 5});
    EXPECT_EQ(out.at("all").numel(), 0);
  }
}

TEST(ControlFlow, ScanSlicesItsInputsAndStacksItsOutputs) {
  OnnxBuilder b(11);
  b.input("s0", kFloat, {2}).input("xs", kFloat, {3, 2});
  b.output("s", kFloat, {2}).output("ys", kFloat, {3, 2});
  OnnxBuilder body(11);
  body.input("s_in", kFloat, {2}).input("x", kFloat, {2});
  body.node("Add", {"s_in", "x"}, {"s_out"}, "sum");
  body.node("Identity", {"s_out"}, {"y"}, "emit");
  body.output("s_out", kFloat, {2}).output("y", kFloat, {2});
  auto& node = b.node("Scan", {"s0", "xs"}, {"s", "ys"}, "running_sum");
  OnnxBuilder::attr_int(node, "num_scan_inputs", 1);
  OnnxBuilder::attr_ints(node, "scan_input_directions", {1});  // last row first
  attach(node, "body", body);
  const Graph g = load_onnx_bytes(b.bytes(), "scan.onnx");
  TensorMap in{{"s0", Tensor::from<float>({2}, std::vector<float>{0, 0})},
               {"xs", Tensor::from<float>({3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6})}};
  for (const TensorMap& out : run_everywhere(g, in)) {
    expect_values(out.at("s"), {9, 12});
    expect_values(out.at("ys"), {5, 6, 8, 10, 9, 12});
  }
}

TEST(ControlFlow, BadControlFlowIsAnErrorNamingTheNode) {
  // Branches that disagree with the node on the number of outputs: an error at load.
  OnnxBuilder b;
  b.input("c", kBool, {}).output("y", kFloat, {1});
  OnnxBuilder then_b, else_b;
  then_b.initializer_f32("one", {1}, {1});
  then_b.node("Identity", {"one"}, {"t"}, "t");
  then_b.output("t", kFloat, {1});
  else_b.initializer_f32("two", {1}, {2});
  else_b.node("Identity", {"two"}, {"e1"}, "e1");
  else_b.node("Identity", {"two"}, {"e2"}, "e2");
  else_b.output("e1", kFloat, {1}).output("e2", kFloat, {1});
  auto& node = b.node("If", {"c"}, {"y"}, "choose");
  attach(node, "then_branch", then_b);
  attach(node, "else_branch", else_b);
  try {
    load_onnx_bytes(b.bytes(), "if.onnx");
    ADD_FAILURE() << "an If whose branches disagree on their outputs loaded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("if.onnx: node 'choose' (If)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("else_branch gives 2 outputs"), std::string::npos) << msg;
  }

  // A Loop with a negative trip count and no condition, and one with neither.
  OnnxBuilder l;
  l.input("m", kInt64, {}).input("s0", kFloat, {1}).output("s", kFloat, {1});
  OnnxBuilder body;
  body.input("i", kInt64, {}).input("cond_in", kBool, {}).input("s_in", kFloat, {1});
  body.node("Identity", {"cond_in"}, {"cond_out"}, "keep");
  body.node("Identity", {"s_in"}, {"s_out"}, "same");
  body.output("cond_out", kBool, {}).output("s_out", kFloat, {1});
  auto& loop = l.node("Loop", {"m", "", "s0"}, {"s"}, "repeat");
  attach(loop, "body", body);
  const Graph lg = load_onnx_bytes(l.bytes(), "loop.onnx");
  const TensorMap in{{"m", Tensor::scalar<int64_t>(-1)}, {"s0", Tensor::from<float>({1}, std::vector<float>{1})}};
  std::string msg = run_error(lg, in);
  EXPECT_NE(msg.find("node 'repeat' (Loop)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("trip count M is -1"), std::string::npos) << msg;
  try {
    model_from_graph(lg).run_reference(in);
    ADD_FAILURE() << "the reference executor ran a Loop with a negative trip count";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'repeat' (Loop)"), std::string::npos) << e.what();
  }

  // A trip count the limit does not allow: an error after max_loop_iterations, not a hang.
  {
    TensorMap many = in;
    many["m"] = Tensor::scalar<int64_t>(INT64_MAX);
    Engine engine({.threads = 1, .pin = false});
    Session session(engine, model_from_graph(lg, {}, Limits{.max_loop_iterations = 50}));
    try {
      session.run(many);
      ADD_FAILURE() << "a Loop ran past max_loop_iterations";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("node 'repeat' (Loop): ran 50 iterations"), std::string::npos) << e.what();
    }
  }

  OnnxBuilder w;
  w.input("s0", kFloat, {1}).output("s", kFloat, {1});
  auto& forever = w.node("Loop", {"", "", "s0"}, {"s"}, "forever");
  attach(forever, "body", body);
  const Graph wg = load_onnx_bytes(w.bytes(), "forever.onnx");
  msg = run_error(wg, {{"s0", Tensor::from<float>({1}, std::vector<float>{1})}});
  EXPECT_NE(msg.find("node 'forever' (Loop)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("would never end"), std::string::npos) << msg;
}

// Several requests of a segmented model at once: each segment's and branch's Session is made
// once, under its lock, and shared (run under ThreadSanitizer by scripts/test.sh).
TEST(ControlFlow, ConcurrentRunsOfASegmentedModelShareItsSessions) {
  const Graph g = if_model();
  Engine engine({.threads = 2, .pin = false});
  Session session(engine, model_from_graph(g));
  std::vector<std::future<TensorMap>> futures;
  for (int i = 0; i < 24; ++i)
    futures.push_back(session.submit({{"x", Tensor::from<float>({2}, std::vector<float>{1, static_cast<float>(i)})},
                                      {"c", Tensor::scalar<bool>(i % 2 == 0)}}));
  for (int i = 0; i < 24; ++i) {
    const float v = static_cast<float>(i);
    expect_values(futures[static_cast<size_t>(i)].get().at("y"), i % 2 == 0 ? std::vector<float>{6, 6 * v}
                                                                             : std::vector<float>{1, v});
  }
}

namespace {

// A Loop whose body emits the 1,024-float x (4 KiB) as a scan output on every iteration, m
// iterations: its stacked output grows with m, which only the trip count's value decides.
Graph accumulating_loop_model() {
  OnnxBuilder b;
  b.input("m", kInt64, {}).input("x", kFloat, {1024}).output("all", kFloat, {-1, 1024});
  OnnxBuilder body;
  body.input("i", kInt64, {}).input("cond_in", kBool, {});
  body.node("Identity", {"cond_in"}, {"cond_out"}, "keep");
  body.node("Identity", {"x"}, {"scan"}, "record");
  body.output("cond_out", kBool, {}).output("scan", kFloat, {1024});
  auto& node = b.node("Loop", {"m", ""}, {"all"}, "accumulate");
  attach(node, "body", body);
  return load_onnx_bytes(b.bytes(), "accumulate.onnx");
}

// The iteration count a collected-outputs error names ("... over N iterations need ..."), or -1.
int64_t collected_iterations(const std::string& msg) {
  const size_t at = msg.find("collected over ");
  if (at == std::string::npos) return -1;
  return std::stoll(msg.substr(at + 15));
}

}  // namespace

// Scan outputs are charged to the run's memory limit iteration by iteration: a Loop that
// would stack 4 MiB under a 1 MiB limit stops within the limit's worth of iterations (8 KiB an
// iteration: the part and its place in the stack: at most 128), on the reference executor and
// on the tile runtime, with an error naming the node, the bytes and the limit.
TEST(ControlFlow, LoopScanOutputsAreChargedToTheMemoryLimitAsTheyGrow) {
  const Graph g = accumulating_loop_model();
  constexpr int64_t kLimit = int64_t{1} << 20;
  const Limits limits{.max_memory = kLimit};
  TensorMap in{{"m", Tensor::scalar<int64_t>(1000)}, {"x", Tensor::from<float>({1024}, std::vector<float>(1024, 0.5f))}};
  auto check = [&](const std::string& msg, const char* where) {
    EXPECT_NE(msg.find("accumulate.onnx: node 'accumulate' (Loop): its outputs collected over "), std::string::npos)
        << where << ": " << msg;
    EXPECT_NE(msg.find("over the memory limit of 1048576 bytes"), std::string::npos) << where << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << where << ": one line";
    const int64_t iterations = collected_iterations(msg);
    EXPECT_GT(iterations, 0) << where << ": " << msg;
    EXPECT_LE(iterations, 128) << where << ": it ran past the limit's worth of iterations: " << msg;
  };
  try {
    model_from_graph(g, {}, limits).run_reference(in);
    ADD_FAILURE() << "the reference executor stacked 4 MiB of scan outputs under a 1 MiB limit";
  } catch (const Error& e) {
    check(e.what(), "reference");
  }
  for (int threads : {1, 2}) {
    Engine engine({.threads = threads, .pin = false});
    Session session(engine, model_from_graph(g, {}, limits));
    try {
      session.run(in);
      ADD_FAILURE() << "the tile runtime stacked 4 MiB of scan outputs under a 1 MiB limit";
    } catch (const Error& e) {
      check(e.what(), threads == 1 ? "tiles, 1 worker" : "tiles, 2 workers");
    }
    // Within the limit the same Loop runs: 50 iterations stack 200 KiB.
    in["m"] = Tensor::scalar<int64_t>(50);
    EXPECT_EQ(session.run(in).at("all").shape(), (Shape{50, 1024}));
    in["m"] = Tensor::scalar<int64_t>(1000);
  }
}

// Scan's stacked outputs are charged the same way: 1,000 rows of 1,024 floats (4 MB) scanned
// under a 6 MiB limit, which holds the input but not its 4 MB of rows plus the 4 MB stack.
TEST(ControlFlow, ScanOutputsAreChargedToTheMemoryLimitAsTheyGrow) {
  OnnxBuilder b(11);
  b.input("xs", kFloat, {1000, 1024}).output("ys", kFloat, {1000, 1024});
  OnnxBuilder body(11);
  body.input("x", kFloat, {1024});
  body.node("Identity", {"x"}, {"y"}, "emit");
  body.output("y", kFloat, {1024});
  auto& node = b.node("Scan", {"xs"}, {"ys"}, "rows");
  OnnxBuilder::attr_int(node, "num_scan_inputs", 1);
  attach(node, "body", body);
  const Graph g = load_onnx_bytes(b.bytes(), "scan_rows.onnx");
  constexpr int64_t kLimit = int64_t{6} << 20;
  const Limits limits{.max_memory = kLimit};
  const TensorMap in{{"xs", Tensor::from<float>({1000, 1024}, std::vector<float>(1024 * 1000, 1.0f))}};
  auto check = [&](const std::string& msg, const char* where) {
    EXPECT_NE(msg.find("scan_rows.onnx: node 'rows' (Scan): its outputs collected over "), std::string::npos)
        << where << ": " << msg;
    EXPECT_NE(msg.find("over the memory limit of 6291456 bytes"), std::string::npos) << where << ": " << msg;
    const int64_t iterations = collected_iterations(msg);
    EXPECT_GT(iterations, 0) << where << ": " << msg;
    EXPECT_LT(iterations, 1000) << where << ": " << msg;
  };
  try {
    model_from_graph(g, {}, limits).run_reference(in);
    ADD_FAILURE() << "the reference executor stacked 8 MiB of scan outputs under a 6 MiB limit";
  } catch (const Error& e) {
    check(e.what(), "reference");
  }
  Engine engine({.threads = 2, .pin = false});
  Session session(engine, model_from_graph(g, {}, limits));
  try {
    session.run(in);
    ADD_FAILURE() << "the tile runtime stacked 8 MiB of scan outputs under a 6 MiB limit";
  } catch (const Error& e) {
    check(e.what(), "tiles");
  }
}

namespace {

// A Loop inside a Loop: the outer one runs m times, collecting the 4 KiB x each time; its body
// runs an inner Loop n times that also collects x, and keeps only their maximum. Alone, each
// level's collected outputs fit under 1 MiB (110 x 8 KiB, 48 x 8 KiB); together, late in the
// outer Loop, they do not, so the inner Loop must see what the outer one already holds.
Graph nested_accumulating_loops_model() {
  OnnxBuilder b;
  b.input("m", kInt64, {}).input("n", kInt64, {}).input("x", kFloat, {1024}).input("acc0", kFloat, {1024});
  b.output("acc", kFloat, {1024}).output("all", kFloat, {-1, 1024});
  OnnxBuilder inner;
  inner.input("j", kInt64, {}).input("inner_cond_in", kBool, {});
  inner.node("Identity", {"inner_cond_in"}, {"inner_cond_out"}, "inner_keep");
  inner.node("Identity", {"x"}, {"inner_scan"}, "inner_record");
  inner.output("inner_cond_out", kBool, {}).output("inner_scan", kFloat, {1024});
  OnnxBuilder outer;
  outer.input("i", kInt64, {}).input("cond_in", kBool, {}).input("acc_in", kFloat, {1024});
  outer.node("Identity", {"cond_in"}, {"cond_out"}, "outer_keep");
  attach(outer.node("Loop", {"n", ""}, {"inner_all"}, "inner"), "body", inner);
  auto& biggest = outer.node("ReduceMax", {"inner_all"}, {"r"}, "biggest");
  OnnxBuilder::attr_ints(biggest, "axes", {0});
  OnnxBuilder::attr_int(biggest, "keepdims", 0);
  outer.node("Add", {"acc_in", "r"}, {"acc_out"}, "accumulate");
  outer.node("Identity", {"x"}, {"outer_scan"}, "outer_record");
  outer.output("cond_out", kBool, {}).output("acc_out", kFloat, {1024}).output("outer_scan", kFloat, {1024});
  attach(b.node("Loop", {"m", "", "acc0"}, {"acc", "all"}, "outer"), "body", outer);
  return load_onnx_bytes(b.bytes(), "nested.onnx");
}

}  // namespace

// Nested Loops share one memory limit: the inner Loop charges what it collects on top of what
// the outer one has collected so far, on the reference executor and on the tile runtime.
TEST(ControlFlow, ANestedLoopChargesItsOutputsOnTopOfTheOuterLoops) {
  const Graph g = nested_accumulating_loops_model();
  const Limits limits{.max_memory = int64_t{1} << 20};
  auto inputs = [](int64_t m) {
    return TensorMap{{"m", Tensor::scalar<int64_t>(m)},
                     {"n", Tensor::scalar<int64_t>(48)},
                     {"x", Tensor::from<float>({1024}, std::vector<float>(1024, 0.5f))},
                     {"acc0", Tensor::from<float>({1024}, std::vector<float>(1024, 0.0f))}};
  };
  auto check = [&](const std::string& msg, const char* where) {
    EXPECT_NE(msg.find("node 'inner' (Loop): its outputs collected over "), std::string::npos) << where << ": " << msg;
    EXPECT_NE(msg.find("over the memory limit of 1048576 bytes"), std::string::npos) << where << ": " << msg;
  };
  try {
    model_from_graph(g, {}, limits).run_reference(inputs(110));
    ADD_FAILURE() << "the reference executor's nested Loops held past 1 MiB";
  } catch (const Error& e) {
    check(e.what(), "reference");
  }
  EXPECT_EQ(model_from_graph(g, {}, limits).run_reference(inputs(20)).at("all").shape(), (Shape{20, 1024}));
  for (int threads : {1, 2}) {
    Engine engine({.threads = threads, .pin = false});
    Session session(engine, model_from_graph(g, {}, limits));
    try {
      session.run(inputs(110));
      ADD_FAILURE() << "the tile runtime's nested Loops held past 1 MiB";
    } catch (const Error& e) {
      check(e.what(), threads == 1 ? "tiles, 1 worker" : "tiles, 2 workers");
    }
    const TensorMap out = session.run(inputs(20));
    EXPECT_EQ(out.at("all").shape(), (Shape{20, 1024}));
    EXPECT_FLOAT_EQ(out.at("acc").data<float>()[0], 10.0f);  // 20 x 0.5
  }
}
