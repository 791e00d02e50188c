// Runs stopped by their CancelToken (grove/cancel.h) on every path a Session takes: a planned
// run's tiles, the segments and iterations of a Loop (an endless one ends at the deadline,
// long before Limits::max_loop_iterations), the reference executor, and submitted runs on the
// session's own threads, whose session then goes away without waiting for minutes. Runs with
// tokens that do not stop give the same outputs as runs without. One of
// grove_concurrent_unit_tests' files (ThreadSanitizer, scripts/test.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "grove/grove.h"
#include "onnx/import.h"
#include "runtime/session.h"
#include "slow_models.h"

using namespace grove;
using namespace std::chrono_literals;

namespace {

using CancelTestClock = std::chrono::steady_clock;

double cancel_test_seconds_since(CancelTestClock::time_point t) {
  return std::chrono::duration<double>(CancelTestClock::now() - t).count();
}

TensorMap endless_loop_inputs() {
  return {{"x", Tensor::from<float>({2}, std::vector<float>{1, 2})}, {"s0", Tensor::from<float>({2}, std::vector<float>{0, 0})}};
}

TensorMap matmul_chain_inputs(int size) {
  std::vector<float> x(static_cast<size_t>(size) * static_cast<size_t>(size));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  return {{"x", Tensor::from<float>({size, size}, x)}};
}

// Expects `f` to throw the cancelled Error with every one of `words` in its message.
template <class F>
void expect_cancelled(F&& f, std::initializer_list<const char*> words) {
  try {
    f();
    ADD_FAILURE() << "the run was not cancelled";
  } catch (const Error& e) {
    EXPECT_TRUE(e.cancelled()) << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
    for (const char* w : words) EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' not in: " << what;
  }
}

double seconds_until_engine_idle(const Engine& engine) {
  const auto start = CancelTestClock::now();
  while (engine.stats().jobs_in_flight != 0 && CancelTestClock::now() - start < 5s) std::this_thread::sleep_for(100us);
  return cancel_test_seconds_since(start);
}

}  // namespace

TEST(Cancellation, AnEndlessLoopEndsAtTheDeadlineOnTheTileRuntime) {
  Engine engine({.threads = 2, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(test::endless_loop_model(), "endless.onnx")));
  const auto start = CancelTestClock::now();
  expect_cancelled([&] { session.run(endless_loop_inputs(), nullptr, CancelToken::after(0.3)); },
                   {"endless.onnx", "node 'forever' (Loop)", "run cancelled: deadline of 0.3 s passed"});
  const double took = cancel_test_seconds_since(start);
  EXPECT_GT(took, 0.29);
  EXPECT_LT(took, 3.0) << "the Loop went on past its deadline";
  EXPECT_LT(seconds_until_engine_idle(engine), 1.0);
}

TEST(Cancellation, AnEndlessLoopEndsAtTheDeadlineOnTheReferenceExecutor) {
  Model model = model_from_graph(load_onnx_bytes(test::endless_loop_model(), "endless.onnx"));
  const auto start = CancelTestClock::now();
  expect_cancelled([&] { model.run_reference(endless_loop_inputs(), CancelToken::after(0.2)); },
                   {"node 'forever' (Loop)", "deadline of 0.2 s passed"});
  EXPECT_LT(cancel_test_seconds_since(start), 3.0);
}

// A submitted Loop runs on a thread of the session's; the session, dropped at once, waits
// for it only until its deadline, and the future holds the cancelled Error.
TEST(Cancellation, ADroppedSessionWaitsForItsEndlessRunOnlyUntilTheDeadline) {
  Engine engine({.threads = 2, .pin = false});
  std::future<TensorMap> a, b;
  CancelToken manual = CancelToken::manual();
  const auto start = CancelTestClock::now();
  {
    Session session(engine, model_from_graph(load_onnx_bytes(test::endless_loop_model(), "endless.onnx")));
    a = session.submit(endless_loop_inputs(), CancelToken::after(0.3));
    b = session.submit(endless_loop_inputs(), manual);
    std::this_thread::sleep_for(50ms);
    manual.cancel("the caller gave up");
  }
  const double took = cancel_test_seconds_since(start);
  EXPECT_LT(took, 3.0) << "~Session waited past the runs' deadline";
  ASSERT_EQ(a.wait_for(0s), std::future_status::ready);
  expect_cancelled([&] { a.get(); }, {"deadline of 0.3 s passed"});
  expect_cancelled([&] { b.get(); }, {"run cancelled: the caller gave up"});
  EXPECT_LT(seconds_until_engine_idle(engine), 1.0);
}

// A planned run (one job of many tiles) cancelled from another thread while the caller works
// on its tiles: it stops within about a tile's time and the engine has nothing left in flight.
TEST(Cancellation, APlannedRunCancelledFromAnotherThreadStopsAndLeavesNothingInFlight) {
  constexpr int kSize = 512;
  Engine engine({.threads = 2, .pin = false});
  // Over a second even at a 2-core AVX-512 peak; 100 layers (27 GFLOP) in the sanitizer builds,
  // whose GEMM microkernels run without ASan (src/kernels/kernels.cmake): far past the 20 ms
  // into the run at which the test cancels it.
  const int layers = kSanitizedBuild ? 100 : 1000;
  Session session(engine, model_from_graph(load_onnx_bytes(test::slow_matmul_chain_model(layers, kSize), "chain.onnx")));
  const TensorMap in = matmul_chain_inputs(kSize);
  plan_for(session, {{"x", {kSize, kSize}}});  // planning is not what this test times
  CancelToken token = CancelToken::manual();
  CancelTestClock::time_point cancelled_at;
  std::thread canceller([&] {
    // 20 ms into the run, however long the set-up before it took.
    const auto give_up = CancelTestClock::now() + 10s;
    while (engine.stats().jobs_in_flight == 0 && CancelTestClock::now() < give_up) std::this_thread::sleep_for(100us);
    std::this_thread::sleep_for(20ms);
    cancelled_at = CancelTestClock::now();
    token.cancel("stopped by the test");
  });
  const auto start = CancelTestClock::now();
  expect_cancelled([&] { session.run(in, nullptr, token); }, {"run cancelled: stopped by the test"});
  const double took = cancel_test_seconds_since(start);
  canceller.join();
  EXPECT_LT(cancel_test_seconds_since(cancelled_at), took);  // cancel() came before the end
  EXPECT_LT(took, 2.0 * test::kSanitizerSlack);
  // The run's job left the engine's count before its error reached this thread.
  EXPECT_EQ(engine.stats().jobs_in_flight, 0);
}

// Tokens that never stop, or only long after the run, change no output.
TEST(Cancellation, RunsWithLiveTokensGiveTheSameOutputs) {
  constexpr int kSize = 32;
  Engine engine({.threads = 2, .pin = false});
  Session chain(engine, model_from_graph(load_onnx_bytes(test::slow_matmul_chain_model(4, kSize), "chain.onnx")));
  const TensorMap in = matmul_chain_inputs(kSize);
  const Tensor want = chain.run(in).at("y");
  for (const CancelToken& token : {CancelToken(), CancelToken::manual(), CancelToken::after(3600)}) {
    const Tensor got = chain.run(in, nullptr, token).at("y");
    const Tensor submitted = chain.submit(in, token).get().at("y");
    ASSERT_EQ(got.numel(), want.numel());
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
      EXPECT_EQ(submitted.data<float>()[i], want.data<float>()[i]) << i;
    }
  }
  // A Loop with a live token runs to its iteration limit as before.
  Session loop(engine, model_from_graph(load_onnx_bytes(test::endless_loop_model(), "endless.onnx"), {}, Limits{.max_loop_iterations = 20}));
  try {
    loop.run(endless_loop_inputs(), nullptr, CancelToken::after(3600));
    ADD_FAILURE() << "the Loop ran past max_loop_iterations";
  } catch (const Error& e) {
    EXPECT_FALSE(e.cancelled()) << e.what();
    EXPECT_NE(std::string(e.what()).find("ran 20 iterations"), std::string::npos) << e.what();
  }
}
