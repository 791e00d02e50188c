#pragma once
// Tile trace: while on, each worker appends (job, tile, start, end) to its own buffer; when
// off, the only cost is the branch on on(). Rendered as Chrome trace event JSON (one track
// per worker, one "X" slice per tile), which chrome://tracing and Perfetto open.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace grove {

class TileNames;
struct TileTiming;
struct JobState;

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Tracer(int tracks);

  bool on() const { return on_.load(std::memory_order_acquire); }
  // Clears what an earlier trace left and starts recording.
  void start();
  // Stops recording and renders everything recorded since start(). `track_names[i]` names
  // track i ("worker 0", ...). Labels come from the jobs' Job::tile_names, called here.
  std::string stop_json(const std::vector<std::string>& track_names);

  // Stops recording and returns what was recorded since start(), sorted by start time.
  std::vector<TileTiming> stop_timings();

  void record(int track, const JobState& job, int32_t tile, Clock::time_point start, Clock::time_point end);

 private:
  struct Event {
    uint32_t job;  // index into Track::jobs
    int32_t tile;
    int64_t start_ns, end_ns;  // since the trace origin
  };
  struct TracedJob {
    uint64_t id;
    std::shared_ptr<const TileNames> names;  // Job::tile_names: labels and depths at stop time, without the job
  };
  struct alignas(64) Track {
    std::mutex mutex;  // uncontended: only this track's worker and start/stop take it
    std::vector<TracedJob> jobs;
    std::vector<Event> events;
  };

  std::atomic<bool> on_{false};
  std::unique_ptr<Track[]> tracks_;
  int n_tracks_;
  std::atomic<int64_t> origin_ns_{0};  // steady_clock time of start(), in ns
};

// `text` as a JSON string literal, quotes included.
std::string json_quote(const std::string& text);

}  // namespace grove
