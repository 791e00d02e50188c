#pragma once
// The scheduling engine (the paper's DSE + ready pool): one worker thread per core, each
// running Algorithm 1 over the tile DAG of every Job in flight. Several jobs (runs of one
// model or of different models) share the pool at once.
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <span>
#include <string>

namespace grove {

// What the engine needs of a tile DAG. The spans must outlive the job.
struct DagView {
  std::span<const int32_t> n_parents;
  std::span<const int64_t> child_begin;  // CSR, size = tiles + 1
  std::span<const int32_t> children;
  std::span<const int32_t> depth;        // priority: shallower first
  std::span<const int32_t> sources;
};

// One unit of submitted work, e.g. one inference. The engine calls run_tile once per tile,
// never before all its parents finished; a tile that throws cancels the tiles not yet
// started and the job's future carries the first exception.
class Job {
 public:
  virtual ~Job() = default;
  virtual DagView dag() const = 0;
  virtual void run_tile(int32_t tile, int worker) = 0;
  // For traces: a short label of a tile ("conv1 #3").
  virtual std::string tile_label(int32_t tile) const { return std::to_string(tile); }
};

struct EngineOptions {
  int threads = 0;        // 0: the cores this process may use (affinity mask and cgroup quota)
  bool pin = true;        // pin worker i to the i-th allowed core
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();  // waits for jobs in flight, then stops the workers
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int threads() const;
  // Starts the job; the future is ready when every tile has run (or one threw).
  std::future<void> submit(std::shared_ptr<Job> job);
  // submit + wait, with the calling thread taking part as a worker while it waits.
  void run(std::shared_ptr<Job> job);

  // Chrome/Perfetto trace of the tiles run while tracing is on (one track per worker).
  void start_trace();
  std::string stop_trace_json();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Cores this process may use: the affinity mask, capped by the cgroup CPU quota.
int available_cores();

}  // namespace grove
