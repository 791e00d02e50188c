#include "serve/live_timeline.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

namespace grove::serve {

std::string record_timeline(Engine& engine, double window_s, int max_jobs) {
  using nlohmann::json;
  const int workers = engine.max_threads();
  engine.start_trace();
  std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
  // The trace's own JSON carries each tile's label (its node): read back rather than
  // re-deriving labels here.
  const json trace = json::parse(engine.stop_trace_json());
  const double window_us = window_s * 1e6;
  std::vector<double> busy_us(static_cast<size_t>(workers), 0);
  std::set<int64_t> jobs;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const int worker = e.value("tid", -1);
    if (worker >= 0 && worker < workers) busy_us[static_cast<size_t>(worker)] += e.value("dur", 0.0);
    jobs.insert(e["args"].value("job", int64_t{-1}));
  }
  // The last jobs: ids grow in submission order.
  std::set<int64_t> shown;
  for (auto it = jobs.rbegin(); it != jobs.rend() && static_cast<int>(shown.size()) < max_jobs; ++it) shown.insert(*it);
  json tiles = json::array();
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const int64_t job = e["args"].value("job", int64_t{-1});
    if (!shown.count(job)) continue;
    tiles.push_back({e.value("tid", -1), job, e.value("ts", 0.0), e.value("dur", 0.0), e.value("name", "")});
  }
  json busy = json::array();
  for (double b : busy_us) busy.push_back(std::min(1.0, b / window_us));
  return json{{"window_us", window_us}, {"workers", workers}, {"busy", busy},
              {"jobs", static_cast<int64_t>(jobs.size())}, {"tiles", tiles}}
      .dump();
}

}  // namespace grove::serve
