// A plan's runs alone on their caller or shared (runtime/alone_trial.h): its first runs take
// turns in blocks, shared first, each block's first run untimed; after AloneTrial::kTimedRuns
// timed runs of each the faster way runs every later run, alone only when it is at most
// kAloneAtMost of shared's median. A Session learns it from its own runs, whose outputs are the same bits
// either way.
#include <gtest/gtest.h>

#include <cstring>

#include "onnx/import.h"
#include "plan_test_util.h"
#include "runtime/alone_trial.h"
#include "runtime/session.h"

namespace grove {
namespace {

// Plays `trial` with runs that take `shared_ms` or `alone_ms` until it decides; returns the turns.
std::vector<AloneTrial::Turn> play(AloneTrial& trial, double shared_ms, double alone_ms) {
  std::vector<AloneTrial::Turn> turns;
  while (!trial.decided() && turns.size() < 1000) {
    turns.push_back(trial.next());
    trial.record(turns.back(), turns.back().alone ? alone_ms : shared_ms);
  }
  return turns;
}

TEST(AloneTrial, WaysTakeTurnsInBlocksFromSharedEachBlocksFirstRunUntimed) {
  AloneTrial trial(AloneTrial::Mode::learn);
  const std::vector<AloneTrial::Turn> turns = play(trial, 2.0, 1.0);
  size_t timed[2] = {0, 0};
  for (size_t i = 0; i < turns.size(); ++i) {
    EXPECT_EQ(turns[i].alone, (i / AloneTrial::kBlockRuns) % 2 == 1) << i;
    EXPECT_EQ(turns[i].timed, i % AloneTrial::kBlockRuns != 0) << i;
    timed[turns[i].alone] += turns[i].timed;
  }
  EXPECT_EQ(timed[0], 3 * size_t(AloneTrial::kBlockRuns - 1)) << "shared's third block completes before alone's";
  EXPECT_EQ(timed[1], size_t(AloneTrial::kTimedRuns)) << "decided at alone's 16th timed run";
  EXPECT_TRUE(trial.next().alone);
  EXPECT_FALSE(trial.next().timed) << "a decided trial times no more runs";
  EXPECT_EQ(trial.verdict(), "runs alone: 1.000 ms alone on the caller against 2.000 ms shared (medians of 16 runs each)");
}

// Alone must be clearly faster: at kAloneAtMost of shared's median or less.
TEST(AloneTrial, ATieStaysShared) {
  for (const auto& [alone_ms, alone] : std::vector<std::pair<double, bool>>{{0.96, false}, {0.95, true}, {1.2, false}}) {
    AloneTrial trial(AloneTrial::Mode::learn);
    play(trial, 1.0, alone_ms);
    EXPECT_EQ(trial.next().alone, alone) << alone_ms << " ms alone against 1 ms shared";
    EXPECT_EQ(decide_run_alone({1.0, 1.0, 1.0}, {alone_ms, alone_ms, 50.0}).alone, alone) << alone_ms;
  }
}

TEST(AloneTrial, AGivenModeIsNeverTimed) {
  for (const AloneTrial::Mode mode : {AloneTrial::Mode::alone, AloneTrial::Mode::shared}) {
    AloneTrial trial(mode);
    EXPECT_TRUE(trial.decided());
    for (int i = 0; i < 5; ++i) {
      const AloneTrial::Turn t = trial.next();
      EXPECT_EQ(t.alone, mode == AloneTrial::Mode::alone);
      EXPECT_FALSE(t.timed);
    }
    EXPECT_EQ(trial.verdict(), "");
  }
}

// x [1, 8, 6, 6] -> Conv 3x3 -> Relu -> Conv 1x1: tiny, so "auto" learns.
test::TestModel tiny_convs() {
  test::OnnxBuilder b(13);
  b.input("x", test::kF32, {1, 8, 6, 6}).output("y", test::kF32, {1, 4, 6, 6});
  test::weight(b, "w1", {8, 8, 3, 3}, 1);
  test::weight(b, "w2", {4, 8, 1, 1}, 2);
  test::OnnxBuilder::attr_ints(b.node("Conv", {"x", "w1"}, {"c"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"}, "relu");
  b.node("Conv", {"r", "w2"}, {"y"}, "conv2");
  return {"tiny_convs", b.bytes(), {{"x", test::seeded_tensor({1, 8, 6, 6}, 3)}}};
}

// Learning alternates the two ways on real runs: every run gives the same bits, the verdict
// comes after a known number of runs, and "on" and "off" give those bits too (the same
// plan); an unknown mode is an error.
TEST(AloneTrial, ASessionLearnsFromItsRunsAndEveryRunGivesTheSameBits) {
  const test::TestModel m = tiny_convs();
  ShapeMap shapes;
  for (const auto& [name, t] : m.inputs) shapes[name] = t.shape();
  Engine engine({.threads = 2, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")));
  const TensorMap first = session.run(m.inputs);
  test::expect_close(first, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")).run_reference(m.inputs), 1e-4,
               "first run");
  auto same = [&](const TensorMap& out, const std::string& what) {
    for (const auto& [name, t] : first) EXPECT_EQ(std::memcmp(t.raw(), out.at(name).raw(), t.bytes()), 0) << what;
  };
  int runs = 1;
  for (; run_alone_verdict(session).empty() && runs < 100; ++runs) same(session.run(m.inputs), "run " + std::to_string(runs));
  EXPECT_EQ(runs, 5 * AloneTrial::kBlockRuns + 3) << "runs before the verdict: shared's 3 blocks, alone's 16 timed";
  EXPECT_EQ(run_alone_verdict(session).rfind("runs ", 0), 0u) << run_alone_verdict(session);
  same(session.run(m.inputs), "a run after the verdict");
  for (const char* mode : {"on", "off"}) {
    Session given(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")), {.run_alone = mode});
    for (int run = 0; run < 3; ++run) same(given.run(m.inputs), std::string(mode) + " run " + std::to_string(run));
    EXPECT_EQ(run_alone_verdict(given), "") << mode;
  }
  // One thread learns too (alone, its caller skips the pool), on a plan of its own.
  Engine one({.threads = 1, .pin = false});
  Session one_thread(one, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")));
  for (int run = 0; run < 5 * AloneTrial::kBlockRuns + 3; ++run) one_thread.run(m.inputs);
  EXPECT_EQ(run_alone_verdict(one_thread).rfind("runs ", 0), 0u) << run_alone_verdict(one_thread);
  EXPECT_THROW(Session(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")), {.run_alone = "maybe"}),
               Error);
}

}  // namespace
}  // namespace grove
