// The trace is valid Chrome trace JSON with one slice per tile run while tracing was on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "runtime/trace.h"
#include "test_dags.h"

namespace grove::test {
namespace {

class LabelledJob : public CheckingJob {
 public:
  using CheckingJob::CheckingJob;
  std::string tile_label(int32_t tile) const override {
    if (tile == 3) throw std::runtime_error("no label");
    return "op \"x\"\\\n #" + std::to_string(tile);  // characters JSON must escape
  }
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

TEST(Trace, JsonQuoteEscapes) {
  EXPECT_EQ(json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(nlohmann::json::parse(json_quote("tab\there")).get<std::string>(), "tab\there");
}

}  // namespace
}  // namespace grove::test
