#pragma once
// Session is public (include/grove/session.h); the library's tools (CLI, tests, benchmarks)
// also look at its plan and the graph, so this brings in their types.
#include "grove/grove.h"
#include "plan/plan.h"
#include "runtime/buffer_pool.h"
#include "runtime/model.h"
