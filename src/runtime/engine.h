#pragma once
// The Engine is public (include/grove/engine.h) and names nothing of the library's insides.
// What the library's own code, tools and tests need beyond it lives here: the tile-DAG job
// interface the workers run, submitting such jobs, the machine measurements an engine's
// sessions share, and engines with test switches. Users cannot include this (src/ is not on
// their include path).
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <span>
#include <string>

#include "grove/cancel.h"
#include "grove/engine.h"

namespace grove {

struct MachineProbes;  // runtime/machine_probes.h

// What the engine needs of a tile DAG. The spans must outlive the job.
struct DagView {
  std::span<const int32_t> n_parents;
  std::span<const int64_t> child_begin;  // CSR, size = tiles + 1
  std::span<const int32_t> children;
  std::span<const int32_t> depth;        // priority: shallower first
  std::span<const int32_t> sources;
  // Optional, per tile: where in its op's output it lies, as a fraction of 65536 (the middle
  // of its first cut dim). The places are cut into one share per active worker: a source or
  // a readied tile goes to the pool row of its share's worker, and of the children a tile
  // readies a worker follows one in its own share, so the rows a core wrote are the rows it
  // reads next. Stealing is unchanged. Empty: sources round-robin, the first child followed.
  std::span<const uint16_t> place;
};

// One unit of submitted work, e.g. one inference. The engine calls run_tile once per tile,
// never before all its parents finished (and it sees everything they wrote); a tile that
// throws cancels the tiles not yet started and the job's future carries the first exception;
// so does the job's CancelToken once it is stopped (cancel_token below).
// `worker` is in [0, worker_slots(engine)): no two tiles run at once with the same value,
// so it can index per-worker scratch space. dag() is read once, at submit.
// For traces: the names ("conv1 #3") and depths of a job's tiles, read when the trace stops,
// after the job has ended. It holds only what names need (a plan), never the job: a trace
// keeps it until it stops, and a job kept that long keeps its buffers and outputs, so every
// traced run after it wrote to new pages (a one-Transpose model of 800 KB traced 2.1 ms per
// run against 0.13 ms untraced).
class TileNames {
 public:
  virtual ~TileNames() = default;
  virtual std::string label(int32_t tile) const = 0;
  virtual int32_t depth(int32_t tile) const = 0;  // -1 where unknown
};

class Job {
 public:
  virtual ~Job() = default;
  virtual DagView dag() const = 0;
  virtual void run_tile(int32_t tile, int worker) = 0;
  // Pieces (runtime/help_board.h): a tile for which pieces(tile) > 1 is run instead as
  // begin_pieces, then run_pieces over consecutive runs [first, end) of its pieces that
  // together cover [0, pieces) once, by the worker that took the tile and by idle workers
  // that join it (so runs of one tile go on at once, each with its own `worker`), then
  // end_pieces, by the worker that took the tile, after every run has returned. A run that
  // throws fails the job as a tile would, the runs not started are skipped, and end_pieces
  // still runs. Pieces must compute their elements bit for bit as run_tile would.
  virtual int pieces(int32_t tile) const { return 1; }
  virtual void begin_pieces(int32_t tile, int worker) {}
  virtual void run_pieces(int32_t tile, int first, int end, int pieces, int worker) {}
  virtual void end_pieces(int32_t tile, int worker) {}
  // For traces, taken at the job's first traced tile on each worker: its tiles' names. The
  // default numbers the tiles and copies dag()'s depths.
  virtual std::shared_ptr<const TileNames> tile_names() const;
  // Called once, by the thread that finishes the job (or by submit() for an empty DAG),
  // after every tile and before the future from submit() becomes ready; `error` is the first
  // exception of a tile, or null. Lets a job hand out its own result without a thread
  // waiting on the future.
  virtual void finished(std::exception_ptr error) noexcept {}
  // An urgent job's ready tiles are taken before any other job's (the pool scans their own
  // column of every row first): a run under a latency target beside batch work. A worker
  // still finishes the tile in hand and follows its child first.
  virtual bool urgent() const { return false; }
  // Read once, at submit. Once the token is stopped, a worker taking one of the job's tiles
  // skips it (as after a failing tile) and the job ends with an Error of kind `cancelled`
  // naming why; tiles already running finish.
  virtual CancelToken cancel_token() const { return {}; }
  // Read once, by run_job: true runs every tile on run_job's calling thread, none through the
  // pool, so no other worker is woken for the job or takes one of its tiles. For a job so small
  // that handing tiles between cores costs more than they take (a tiny model; Session measures
  // which, SessionOptions::run_alone). run_job runs it shared after all while another caller
  // works in the engine; submit() always shares. Urgent jobs' tiles waiting in the pool are
  // run by the caller between the job's own.
  virtual bool alone() const { return false; }
};

// Switches for tests and benchmarks, not for production: set only through make_engine.
struct EngineDebugOptions {
  // Uneven cores (docs/scaling.md): worker thread 0 takes this many times as long over each
  // tile (it busy-waits after the tile), a stand-in for a slower or shared core. 1: off;
  // clamped to [1, 1000]. With one thread, run_job's caller does the work and nothing is
  // slowed.
  double slow_worker = 1.0;
};

// Engine's friend: the only way past its public surface. The free functions below are the
// spelling the library uses.
struct EngineInternals {
  static Engine make(const EngineOptions& options, const EngineDebugOptions& debug);
  static std::future<void> submit(Engine& engine, std::shared_ptr<Job> job);
  static void run(Engine& engine, std::shared_ptr<Job> job);
  static int worker_slots(const Engine& engine);
  static MachineProbes& probes(Engine& engine);
};

// An engine with test switches. Engine cannot move, but a returned prvalue needs no move:
// `Engine e = make_engine(...)` constructs in place.
inline Engine make_engine(const EngineOptions& options, const EngineDebugOptions& debug) {
  return EngineInternals::make(options, debug);
}
// Starts the job; the future is ready when every tile has run (or one threw), after the
// engine has dropped its reference to the job (unless a trace holds it). Throws Error at
// once for a malformed DAG (see validate_dag in job_state.h).
inline std::future<void> submit_job(Engine& engine, std::shared_ptr<Job> job) {
  return EngineInternals::submit(engine, std::move(job));
}
// submit_job + wait, with the calling thread taking part as a worker while it waits (one
// such caller at a time; others just wait). Rethrows the job's exception. Not from inside
// run_tile.
inline void run_job(Engine& engine, std::shared_ptr<Job> job) { EngineInternals::run(engine, std::move(job)); }
// Distinct `worker` values run_tile may see: max_threads(), plus one for a run_job caller.
inline int worker_slots(const Engine& engine) { return EngineInternals::worker_slots(engine); }
// The machine measurements this engine's sessions plan with, taken once and shared
// (runtime/machine_probes.h).
inline MachineProbes& machine_probes(Engine& engine) { return EngineInternals::probes(engine); }

}  // namespace grove
