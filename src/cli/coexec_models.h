#pragma once
// The models of a co-execution benchmark (grove bench a.onnx b.onnx, with or without
// --mt-graph): each loaded, bound, planned, with its inputs.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "runtime/session.h"

namespace grove::cli {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Loaded {
  std::string path;
  std::unique_ptr<Session> session;
  TensorMap inputs;
};

// Inputs: --input NAME=FILE.npy applies to the models with an input of that name; the rest get
// seeded random data (integers in [0, 100): valid token ids). Throws Error for a model whose
// shapes depend on input values (it cannot be planned ahead).
Loaded load_for_coexec(Engine& engine, const BenchOptions& o, const std::string& path, const ShapeMap& all_shapes);

// Milliseconds for one inference of every model: all submitted at once (on their engines),
// or one after the other.
double run_together(std::vector<Loaded>& models);
double run_in_turn(std::vector<Loaded>& models);

}  // namespace grove::cli
