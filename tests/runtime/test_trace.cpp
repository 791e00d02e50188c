// The trace is valid Chrome trace JSON with one slice per tile run while tracing was on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "runtime/trace.h"
#include "test_dags.h"

namespace grove::test {
namespace {

// Labels with characters JSON must escape; tile 3's label throws.
class EscapedNames : public TileNames {
 public:
  explicit EscapedNames(const TestDag& dag) : dag_(dag) {}
  std::string label(int32_t tile) const override {
    if (tile == 3) throw std::runtime_error("no label");
    return "op \"x\"\\\n #" + std::to_string(tile);
  }
  int32_t depth(int32_t tile) const override { return dag_.depth.at(static_cast<size_t>(tile)); }

 private:
  const TestDag& dag_;
};

class LabelledJob : public CheckingJob {
 public:
  LabelledJob(const TestDag& dag, int worker_slots) : CheckingJob(dag, worker_slots), dag_(dag) {}
  std::shared_ptr<const TileNames> tile_names() const override { return std::make_shared<EscapedNames>(dag_); }

 private:
  const TestDag& dag_;
};

TEST(Trace, ChromeJsonWithOneSlicePerTile) {
  TestDag dag = random_layered(4, 6, 7, 2);
  Engine engine(EngineOptions{.threads = 2});
  submit_job(engine, std::make_shared<LabelledJob>(dag, worker_slots(engine))).get();  // not traced
  engine.start_trace();
  submit_job(engine, std::make_shared<LabelledJob>(dag, worker_slots(engine))).get();
  run_job(engine, std::make_shared<LabelledJob>(dag, worker_slots(engine)));
  std::string text = engine.stop_trace_json();

  nlohmann::json trace = nlohmann::json::parse(text);  // throws on invalid JSON
  ASSERT_TRUE(trace.contains("traceEvents"));
  int slices = 0, names = 0;
  std::set<std::pair<int64_t, int32_t>> seen;  // (job, tile)
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M") {
      ++names;
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ++slices;
    int32_t tile = e["args"]["tile"];
    ASSERT_GE(tile, 0);
    ASSERT_LT(tile, dag.size());
    EXPECT_EQ(e["args"]["depth"], dag.depth[static_cast<size_t>(tile)]);
    EXPECT_EQ(e["name"], tile == 3 ? "3" : "op \"x\"\\\n #" + std::to_string(tile));
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    int tid = e["tid"];
    EXPECT_GE(tid, 0);
    EXPECT_LT(tid, worker_slots(engine));
    EXPECT_TRUE(seen.insert({e["args"]["job"].get<int64_t>(), tile}).second);
  }
  EXPECT_EQ(names, worker_slots(engine));
  EXPECT_EQ(slices, 2 * dag.size());

  // Off again: nothing more is recorded.
  submit_job(engine, std::make_shared<LabelledJob>(dag, worker_slots(engine))).get();
  engine.start_trace();
  nlohmann::json empty = nlohmann::json::parse(engine.stop_trace_json());
  for (const auto& e : empty["traceEvents"]) EXPECT_EQ(e["ph"], "M");
}

// A trace keeps its jobs' tile names, not the jobs: a traced job (and what it holds, a run's
// buffers and outputs) goes when it ends, and its tiles are still named when the trace stops.
TEST(Trace, ATracedJobIsReleasedWhenItEnds) {
  TestDag dag = random_layered(3, 5, 4, 1);
  Engine engine(EngineOptions{.threads = 2});
  engine.start_trace();
  std::weak_ptr<Job> traced;
  {
    auto job = std::make_shared<LabelledJob>(dag, worker_slots(engine));
    traced = job;
    run_job(engine, job);
  }
  EXPECT_TRUE(traced.expired()) << "the trace holds the job it traced";
  nlohmann::json trace = nlohmann::json::parse(engine.stop_trace_json());
  int named = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") named += e["name"].get<std::string>().rfind("op ", 0) == 0;
  EXPECT_EQ(named, dag.size() - 1);  // all but tile 3, whose label throws
}

// Jobs that name no tiles show their numbers and depths.
TEST(Trace, UnnamedTilesShowTheirNumbers) {
  TestDag dag = random_layered(3, 5, 4, 1);
  Engine engine(EngineOptions{.threads = 2});
  engine.start_trace();
  run_job(engine, std::make_shared<CheckingJob>(dag, worker_slots(engine)));
  nlohmann::json trace = nlohmann::json::parse(engine.stop_trace_json());
  int slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++slices;
    const int32_t tile = e["args"]["tile"];
    EXPECT_EQ(e["name"], std::to_string(tile));
    EXPECT_EQ(e["args"]["depth"], dag.depth[static_cast<size_t>(tile)]);
  }
  EXPECT_EQ(slices, dag.size());
}

TEST(Trace, JsonQuoteEscapes) {
  EXPECT_EQ(json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(nlohmann::json::parse(json_quote("tab\there")).get<std::string>(), "tab\there");
}

}  // namespace
}  // namespace grove::test
