#pragma once
// What the live page (live_page.h) shows of the engine at work: the tiles its workers run
// during a short window, recorded with the engine's tile trace.
#include <string>

#include "grove/engine.h"

namespace grove::serve {

// Records the engine's tiles for `window_s` seconds and returns JSON:
//   {"window_us": W, "workers": N, "busy": [fraction of the window each worker ran tiles],
//    "jobs": J, "tiles": [[worker, job, start_us, duration_us, "label"], ...]}
// with the tiles of the last `max_jobs` jobs that ran in the window only (busy counts all).
// The engine's trace must not be in use by anyone else meanwhile.
std::string record_timeline(Engine& engine, double window_s, int max_jobs);

}  // namespace grove::serve
