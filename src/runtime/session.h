#pragma once
// Session is public (include/grove/session.h) and names nothing of the library's insides. The
// library's tools (CLI, tests, benchmarks) also look at its plan and the graph, and tests run
// it with switches no user should set; that access lives here, where users cannot include it.
#include <functional>
#include <memory>
#include <string>

#include "grove/grove.h"
#include "plan/plan.h"
#include "runtime/buffer_pool.h"
#include "runtime/engine.h"
#include "runtime/model.h"

namespace grove {

// Switches for tests, not for production: set only through make_session. Sessions the library
// makes from a session (its control-flow segments, grove check's probes) inherit them.
struct SessionDebugOptions {
  // Fill every tiled op's output buffer with NaN/junk before its tiles run, so a tile that
  // leaves elements unwritten (and would pass on a pooled buffer holding the last run's
  // correct bytes) gives wrong results. Also on when GROVE_POISON_BUFFERS is set.
  bool poison_buffers = false;
};

// Session's friend: the only way past its public surface. The free functions below are the
// spelling the library uses.
struct SessionInternals {
  static Session make(Engine& engine, Model model, const SessionOptions& options, const SessionDebugOptions& debug);
  static std::shared_ptr<const Plan> plan_for(Session& session, const ShapeMap& shapes, const CancelToken& cancel);
  static const SessionDebugOptions& debug(const Session& session);
  static Session& derived(Session& session, const std::string& key, const std::function<Model()>& make);
  static int64_t largest_unplanned_peak(const Session& session);
  static size_t cached_plan_count(Session& session);
  static std::string plan_trial_verdict(Session& session);
  // How the plan used last chose between running alone on its caller and shared
  // (SessionOptions::run_alone): "" when it was not timed and runs shared.
  static std::string run_alone_verdict(Session& session);
  static ValueMap run_values_within(Session& session, const ValueMap& inputs, RunStats* stats,
                                    const CancelToken& cancel, int64_t held_outside);
};

// A session with test switches (the engine must outlive it, as for the constructor).
inline Session make_session(Engine& engine, Model model, const SessionOptions& options,
                            const SessionDebugOptions& debug) {
  return SessionInternals::make(engine, std::move(model), options, debug);
}
// The plan for `shapes` (planning when they are new), or null when the shapes depend on input
// values and only the reference executor can run them. With a token, the wait for a new
// shape's planning ends when the token stops (an Error of kind `cancelled`) while the planning
// goes on in the background, a few shapes at a time per session (more new shapes wait for a
// free slot, until their tokens stop). Runs of shapes already planned never wait for another
// shape's planning.
inline std::shared_ptr<const Plan> plan_for(Session& session, const ShapeMap& shapes, const CancelToken& cancel = {}) {
  return SessionInternals::plan_for(session, shapes, cancel);
}
// The most a run of this session without a plan has held at once (in segments: If, Loop, Scan,
// sequence ops; or on the reference executor: shapes that depend on input values), as
// RunStats::peak_activation_bytes measures it; 0 before one has finished.
inline int64_t largest_unplanned_peak(const Session& session) { return SessionInternals::largest_unplanned_peak(session); }
// How many input shapes the session holds a finished plan for (at most cached_plans).
inline size_t cached_plan_count(Session& session) { return SessionInternals::cached_plan_count(session); }
// For the shapes planned last: where a performance model's plan was tried against the
// rules' (runtime/plan_trial.h), the model's choices and which plan was kept, with both
// times; empty where there was no trial.
inline std::string plan_trial_verdict(Session& session) { return SessionInternals::plan_trial_verdict(session); }
inline std::string run_alone_verdict(Session& session) { return SessionInternals::run_alone_verdict(session); }
// Session::run_values for a subgraph's session: its Loops and Scans charge what they collect
// on top of `held_outside`, what the runs around it hold (RunBody in ops/control_flow/control_flow.h).
inline ValueMap run_values_within(Session& session, const ValueMap& inputs, RunStats* stats, const CancelToken& cancel,
                                  int64_t held_outside) {
  return SessionInternals::run_values_within(session, inputs, stats, cancel, held_outside);
}
// A session the library makes from `session` for one purpose (`key`): its model from `make`
// (called once, under a lock), the same engine, options and test switches; kept with
// `session` and destroyed with it. The Generator's step session (generate/decoder_step.h) is one.
inline Session& derived_session(Session& session, const std::string& key, const std::function<Model()>& make) {
  return SessionInternals::derived(session, key, make);
}
// The test switches the session runs with (GROVE_POISON_BUFFERS included).
inline const SessionDebugOptions& session_debug(const Session& session) { return SessionInternals::debug(session); }

}  // namespace grove
