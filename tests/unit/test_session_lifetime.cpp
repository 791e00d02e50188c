// A Session dropped while runs it submitted are still pending: runs that work on a thread of
// their own (a segmented model's chain of segments, the reference executor for shapes that
// depend on input values) read the session, so they must never outlive it. Each future must
// then give the right outputs. Run under AddressSanitizer and ThreadSanitizer by
// scripts/test.sh (this file is one of grove_concurrent_unit_tests').
#include <gtest/gtest.h>

#include <future>
#include <optional>

#include "grove/grove.h"
#include "onnx/import.h"
#include "onnx_builder.h"
#include "runtime/model.h"

using namespace grove;
using grove::test::OnnxBuilder;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kBool = onnx::TensorProto::BOOL;
constexpr int kInt64 = onnx::TensorProto::INT64;

void attach_graph(onnx::NodeProto& node, const std::string& name, OnnxBuilder& body) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body.proto().graph();
}

// y = If(c) then (x + x) * 3 else (x + x) - x: the condition is an input, so it runs in segments.
Graph lifetime_if_model() {
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
  attach_graph(node, "then_branch", then_b);
  attach_graph(node, "else_branch", else_b);
  return load_onnx_bytes(b.bytes(), "if.onnx");
}

// s = s0 + m * x: a Loop of m iterations, each one planned job, so a run of many iterations
// is still going when the test drops its session.
Graph lifetime_loop_model() {
  OnnxBuilder b;
  b.input("m", kInt64, {}).input("x", kFloat, {2}).input("s0", kFloat, {2});
  b.output("s", kFloat, {2});
  OnnxBuilder body;
  body.input("i", kInt64, {}).input("cond_in", kBool, {}).input("s_in", kFloat, {2});
  body.node("Add", {"s_in", "x"}, {"s_out"}, "step");
  body.node("Identity", {"cond_in"}, {"cond_out"}, "keep");
  body.output("cond_out", kBool, {}).output("s_out", kFloat, {2});
  auto& node = b.node("Loop", {"m", "", "s0"}, {"s"}, "repeat");
  attach_graph(node, "body", body);
  return load_onnx_bytes(b.bytes(), "loop.onnx");
}

// y = Reshape(x, shape): y's shape is the value of an input, so no plan is made ahead and
// the reference executor runs it.
Graph lifetime_reshape_model() {
  OnnxBuilder b;
  b.input("x", kFloat, {6}).input("shape", kInt64, {2}).output("y", kFloat, {-1, -1});
  b.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  return load_onnx_bytes(b.bytes(), "reshape.onnx");
}

void expect_floats(const Tensor& t, const std::vector<float>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(t.data<float>()[i], want[i]) << "element " << i;
}

TensorMap loop_inputs(int64_t m, float step) {
  return {{"m", Tensor::scalar<int64_t>(m)},
          {"x", Tensor::from<float>({2}, std::vector<float>{1, step})},
          {"s0", Tensor::from<float>({2}, std::vector<float>{0, 5})}};
}

}  // namespace

TEST(SessionLifetime, SegmentedRunsOfADroppedSessionStillGiveTheirOutputs) {
  Engine engine({.threads = 2, .pin = false});
  std::vector<std::future<TensorMap>> ifs, loops;
  {
    Session if_session(engine, model_from_graph(lifetime_if_model()));
    Session loop_session(engine, model_from_graph(lifetime_loop_model()));
    for (int i = 0; i < 6; ++i) {
      loops.push_back(loop_session.submit(loop_inputs(200, static_cast<float>(i))));
      ifs.push_back(if_session.submit({{"x", Tensor::from<float>({2}, std::vector<float>{1, static_cast<float>(i)})},
                                       {"c", Tensor::scalar<bool>(i % 2 == 0)}}));
    }
  }  // both sessions go here, their runs (200 segment jobs each for the Loop) still pending
  for (int i = 0; i < 6; ++i) {
    const float v = static_cast<float>(i);
    expect_floats(loops[static_cast<size_t>(i)].get().at("s"), {200, 5 + 200 * v});
    expect_floats(ifs[static_cast<size_t>(i)].get().at("y"), i % 2 == 0 ? std::vector<float>{6, 6 * v}
                                                                         : std::vector<float>{1, v});
  }
}

TEST(SessionLifetime, ReferenceRunsOfADroppedSessionStillGiveTheirOutputs) {
  Engine engine({.threads = 2, .pin = false});
  const TensorMap in{{"x", Tensor::from<float>({6}, std::vector<float>{0, 1, 2, 3, 4, 5})},
                     {"shape", Tensor::from<int64_t>({2}, std::vector<int64_t>{3, 2})}};
  std::vector<std::future<TensorMap>> futures;
  {
    Session session(engine, model_from_graph(lifetime_reshape_model()));
    RunStats stats;
    session.run(in, &stats);
    ASSERT_TRUE(stats.used_reference) << "the test needs a model only the reference executor runs";
    for (int i = 0; i < 6; ++i) futures.push_back(session.submit(in));
  }
  for (auto& f : futures) {
    TensorMap out = f.get();
    EXPECT_EQ(out.at("y").shape(), (Shape{3, 2}));
    expect_floats(out.at("y"), {0, 1, 2, 3, 4, 5});
  }
}

// Assigning over a session replaces its state: the old state's pending runs finish first.
TEST(SessionLifetime, MoveAssigningOverASessionWithPendingRunsKeepsThemWhole) {
  Engine engine({.threads = 2, .pin = false});
  std::optional<Session> session;
  session.emplace(engine, model_from_graph(lifetime_loop_model()));
  std::vector<std::future<TensorMap>> futures;
  for (int i = 0; i < 4; ++i) futures.push_back(session->submit(loop_inputs(200, static_cast<float>(i))));
  *session = Session(engine, model_from_graph(lifetime_if_model()));
  std::future<TensorMap> after = session->submit(
      {{"x", Tensor::from<float>({2}, std::vector<float>{1, 2})}, {"c", Tensor::scalar<bool>(false)}});
  session.reset();
  for (int i = 0; i < 4; ++i)
    expect_floats(futures[static_cast<size_t>(i)].get().at("s"), {200, 5 + 200 * static_cast<float>(i)});
  expect_floats(after.get().at("y"), {1, 2});
}

// A run that fails after its session is gone reports its error through the future.
TEST(SessionLifetime, AFailingRunOfADroppedSessionThrowsItsErrorFromTheFuture) {
  Engine engine({.threads = 2, .pin = false});
  Limits limits;
  limits.max_loop_iterations = 50;
  std::future<TensorMap> pending;
  {
    Session session(engine, model_from_graph(lifetime_loop_model(), {}, limits));
    pending = session.submit(loop_inputs(400, 1));
  }
  try {
    pending.get();
    ADD_FAILURE() << "a Loop ran past max_loop_iterations";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'repeat' (Loop)"), std::string::npos) << e.what();
  }
}
