// The tile runtime end to end: a Session's outputs equal the reference executor's at 1, 2, 3
// and 8 workers in both schedules, are bit-identical across many runs, stay the same when
// models co-execute, and misuse gives errors instead of hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "runtime/machine_probes.h"
#include "runtime/session.h"
#include "onnx/import.h"
#include "graph_test_util.h"
#include "tiny_models.h"

using namespace grove;

namespace {
using test::relative_error;

Tensor pseudo_random_tensor(Shape shape, uint32_t seed) {
  Tensor t(DType::f32, shape);
  auto v = test::pseudo_random(static_cast<size_t>(t.numel()), seed, 1.f);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

struct Case {
  std::string name;
  std::string bytes;
  TensorMap inputs;
};

std::vector<Case> cases() {
  Tensor mask(DType::f32, {1, 1, 1, 12});
  for (int i = 9; i < 12; ++i) mask.data<float>()[i] = -1e9f;  // the last tokens are padding
  return {
      {"residual_cnn", test::residual_cnn_bytes(), {{"x", pseudo_random_tensor({1, 8, 16, 16}, 1)}}},
      {"transformer", test::transformer_bytes(), {{"h", pseudo_random_tensor({1, 12, 32}, 2)}, {"mask", mask}}},
  };
}

bool bit_identical(const TensorMap& a, const TensorMap& b) {
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.bytes() != t.bytes() || std::memcmp(it->second.raw(), t.raw(), t.bytes()) != 0)
      return false;
  }
  return a.size() == b.size();
}

}  // namespace

TEST(Session, TiledEqualsReferenceAtEveryWorkerCountAndSchedule) {
  for (const Case& c : cases()) {
    Model reference_model = model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx"));
    TensorMap want = reference_model.run_reference(c.inputs);
    for (int threads : {1, 2, 3, 8})
      for (Schedule schedule : {Schedule::aspen, Schedule::barrier})
        for (int tiles_per_op : {0, 5}) {
          Engine engine({.threads = threads, .pin = false});
          Session session = make_session(engine, model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx")),
                                         {.schedule = schedule, .tiles_per_op = tiles_per_op}, {.poison_buffers = true});
          RunStats stats;
          TensorMap got = session.run(c.inputs, &stats);
          EXPECT_FALSE(stats.used_reference);
          EXPECT_GT(stats.peak_activation_bytes, 0);
          for (const auto& [name, t] : want)
            EXPECT_LT(relative_error(got.at(name), t), 1e-5)
                << c.name << " " << name << " threads=" << threads << " barrier=" << (schedule == Schedule::barrier)
                << " tiles_per_op=" << tiles_per_op;
        }
  }
}

// Each tile always runs the same code on the same data, so no schedule may change a bit.
// Under -DGROVE_ADVERSARIAL=ON the engine also injects random delays and pop/steal orders.
TEST(Session, ThousandRunsAreBitIdentical) {
  for (const Case& c : cases()) {
    Engine engine({.threads = 3, .pin = false});
    Session session(engine, model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx")), {.tiles_per_op = 6});
    TensorMap first = session.run(c.inputs);
    int differing = 0;
    for (int i = 0; i < 1000; ++i) differing += !bit_identical(session.run(c.inputs), first);
    EXPECT_EQ(differing, 0) << c.name;
  }
}

// The machine's measurements belong to the engine: a second session of the same model plans
// with the first one's, so the two choose alike and give the same bits (measured apart, a
// probe can answer differently on a loaded machine and move a conv to another primitive).
TEST(Session, SessionsOfOneEngineShareTheMachineProbes) {
  const Case c = cases()[0];
  Engine engine({.threads = 2, .pin = false});
  Session first(engine, model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx")));
  const TensorMap want = first.run(c.inputs);
  MachineProbes& probes = machine_probes(engine);
  {
    std::lock_guard<std::mutex> lock(probes.mutex);
    ASSERT_GT(probes.transpose_flops, 0) << "the first plan measured it";
    ASSERT_TRUE(probes.winograd_nhwc.has_value());
    probes.transpose_flops = 12345;  // a value no measurement gives: the second plan must take it
  }
  Session second(engine, model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx")));
  const auto plan = plan_for(second, {{"x", Shape{1, 8, 16, 16}}});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->options.machine.transpose_flops, 12345);
  Engine other({.threads = 2, .pin = false});
  Session apart(other, model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx")));
  EXPECT_NE(plan_for(apart, {{"x", Shape{1, 8, 16, 16}}})->options.machine.transpose_flops, 12345) << "another engine takes its own: the stored file's values, not this engine's";
}

// Activation buffers come from the session's pool: warm runs take almost no new blocks, the
// pool stays bounded and all blocks come back. Outputs the caller still holds are not handed
// to the next run.
TEST(Session, WarmRunsReuseActivationBuffers) {
  for (const Case& c : cases())
    for (int threads : {1, 2}) {
      Engine engine({.threads = threads, .pin = false});
      Session session(engine, model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx")));
      TensorMap first = session.run(c.inputs);
      TensorMap first_copy;
      for (const auto& [name, t] : first) first_copy[name] = t.clone();
      EXPECT_GT(session.buffer_stats().fresh_blocks, 0) << c.name;
      TensorMap other_inputs;
      for (const auto& [name, t] : c.inputs) other_inputs[name] = name == "mask" ? t : pseudo_random_tensor(t.shape(), 99);
      session.run(other_inputs);  // takes new blocks for the outputs `first` still holds
      BufferPool::Stats warm = session.buffer_stats();
      for (int i = 0; i < 20; ++i) session.run(other_inputs);
      BufferPool::Stats later = session.buffer_stats();
      // Over 20 warm runs, fewer new blocks than one run takes (a heap run would take 20
      // runs' worth). Not exactly none: the schedule (random under -DGROVE_ADVERSARIAL=ON, and
      // at 2 threads) changes which sizes are free at once.
      const int64_t taken = (later.fresh_blocks + later.reused_blocks) - (warm.fresh_blocks + warm.reused_blocks);
      EXPECT_LT((later.fresh_blocks - warm.fresh_blocks) * 20, taken) << c.name << " threads=" << threads;
      EXPECT_GT(later.reused_blocks, 0) << c.name;
      EXPECT_LE(later.free_bytes, 2 * later.high_water_bytes) << c.name;
      EXPECT_TRUE(bit_identical(first, first_copy)) << c.name << " threads=" << threads;
      first.clear();
      EXPECT_EQ(session.buffer_stats().in_use_bytes, 0) << c.name;
      session.release_free_buffers();
      EXPECT_EQ(session.buffer_stats().free_bytes, 0) << c.name;
      EXPECT_TRUE(bit_identical(session.run(c.inputs), first_copy)) << c.name;  // fresh blocks again
    }
}

TEST(Session, TwoModelsCoExecuteWithTheSameOutputsAsAlone) {
  std::vector<Case> cs = cases();
  Engine engine({.threads = 2, .pin = false});
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<TensorMap> alone;
  for (const Case& c : cs) {
    sessions.push_back(std::make_unique<Session>(engine, model_from_graph(load_onnx_bytes(c.bytes, c.name + ".onnx"))));
    alone.push_back(sessions.back()->run(c.inputs));
  }
  std::vector<std::pair<size_t, std::future<TensorMap>>> pending;
  for (int round = 0; round < 4; ++round)
    for (size_t m = 0; m < cs.size(); ++m) pending.emplace_back(m, sessions[m]->submit(cs[m].inputs));
  for (auto& [m, f] : pending) EXPECT_TRUE(bit_identical(f.get(), alone[m])) << cs[m].name;
}

TEST(Session, WrongInputsAreErrorsNotHangs) {
  Engine engine({.threads = 2, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(test::residual_cnn_bytes(), "cnn.onnx")));
  EXPECT_THROW(session.run({{"x", Tensor(DType::f32, {1, 8, 16, 15})}}), Error);  // declared 16
  EXPECT_THROW(session.run({{"x", Tensor(DType::f32, {1, 8, 16})}}), Error);      // wrong rank
  EXPECT_THROW(session.run({{"x", Tensor(DType::i64, {1, 8, 16, 16})}}), Error);  // wrong dtype
  EXPECT_THROW(session.run({{"y", Tensor(DType::f32, {1, 8, 16, 16})}}), Error);  // wrong name
  EXPECT_THROW(session.submit({}), Error);                                         // missing input
  // Still usable afterwards.
  EXPECT_EQ(session.run(cases()[0].inputs).at("logits").shape(), (Shape{1, 10}));
}

TEST(Session, ASlowWorkerChangesTimingNotResults) {
  // EngineDebugOptions::slow_worker (uneven cores): worker 0 stretches its tiles; outputs stay
  // bit-identical to a normal engine's, and the fast workers take the larger share of tiles.
  Case c = cases()[0];
  Engine normal({.threads = 2, .pin = false});
  TensorMap want = Session(normal, model_from_graph(load_onnx_bytes(c.bytes, "t.onnx"))).run(c.inputs);
  Engine uneven = make_engine({.threads = 3, .pin = false}, {.slow_worker = 4.0});
  Session session(uneven, model_from_graph(load_onnx_bytes(c.bytes, "t.onnx")), SessionOptions{.tiles_per_op = 6});
  std::vector<std::future<TensorMap>> pending;
  for (int i = 0; i < 8; ++i) pending.push_back(session.submit(c.inputs));
  for (auto& f : pending) EXPECT_TRUE(bit_identical(f.get(), want));
}

TEST(Session, ThousandRunsUnderRandomResizesGiveIdenticalOutputs) {
  // Elastic workers (Engine::set_workers) while runs are in flight: no run lost, none wrong.
  Case c = cases()[0];
  Engine engine({.threads = 2, .max_threads = 3, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(c.bytes, "t.onnx")), SessionOptions{.tiles_per_op = 3});
  TensorMap want = session.run(c.inputs);
  std::atomic<bool> stop{false};
  std::thread resizer([&] {
    std::mt19937 rng(5);
    while (!stop.load()) {
      engine.set_workers(1 + static_cast<int>(rng() % 3));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
    }
  });
  int wrong = 0;
  for (int round = 0; round < 250; ++round) {
    std::vector<std::future<TensorMap>> pending;
    for (int i = 0; i < 3; ++i) pending.push_back(session.submit(c.inputs));
    wrong += !bit_identical(session.run(c.inputs), want);
    for (auto& f : pending) wrong += !bit_identical(f.get(), want);
  }
  stop = true;
  resizer.join();
  EXPECT_EQ(wrong, 0);
}

TEST(Session, DestroyingTheEngineWaitsForRunsInFlight) {
  Case c = cases()[1];
  std::vector<std::future<TensorMap>> pending;
  TensorMap want;
  {
    Engine engine({.threads = 2, .pin = false});
    Session session(engine, model_from_graph(load_onnx_bytes(c.bytes, "t.onnx")));
    want = session.run(c.inputs);
    for (int i = 0; i < 16; ++i) pending.push_back(session.submit(c.inputs));
  }  // engine and session gone with runs possibly still queued
  for (auto& f : pending) EXPECT_TRUE(bit_identical(f.get(), want));
}

namespace grove {
namespace {

// y = Relu(x) on x [N, 4].
std::string dynamic_relu_bytes() {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 4}).output("y", onnx::TensorProto::FLOAT, {-1, 4});
  b.node("Relu", {"x"}, {"y"}, "relu");
  return b.bytes();
}

TEST(Session, AlternatingShapesReuseTheirPlans) {
  Engine engine({.threads = 2});
  Session session(engine, model_from_graph(load_onnx_bytes(dynamic_relu_bytes(), "dyn.onnx")), {.cached_plans = 2});
  auto a = plan_for(session, {{"x", {2, 4}}});
  auto b = plan_for(session, {{"x", {3, 4}}});
  ASSERT_TRUE(a && b);
  EXPECT_NE(a, b);
  EXPECT_EQ(plan_for(session, {{"x", {2, 4}}}), a);  // cached, not re-planned
  EXPECT_EQ(plan_for(session, {{"x", {3, 4}}}), b);
  // Runs of each shape give the right rows, in any order.
  for (int64_t rows : {2, 3, 2, 5, 3}) {
    std::vector<float> x(static_cast<size_t>(rows * 4));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 5.0f;
    TensorMap out = session.run({{"x", Tensor::from<float>({rows, 4}, x)}});
    ASSERT_EQ(out.at("y").shape(), (Shape{rows, 4}));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(out.at("y").data<float>()[i], std::max(x[i], 0.0f));
  }
  // Three shapes seen since: the cache of two evicted [2, 4].
  EXPECT_NE(plan_for(session, {{"x", {2, 4}}}), a);
}

}  // namespace
}  // namespace grove
