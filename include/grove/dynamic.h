#pragma once
// A dynamic model: one ONNX file holding several sub-nets with shared weights (paper 002),
// each a narrower copy of the full network. All sub-nets are derived, bound and planned at
// load, so a run picks one without reloading or re-planning. docs/dynamic.md.
//
//   grove::DynamicSession d(engine, "digits.dynamic.onnx");
//   auto out = d.run(inputs, d.find("w50"));          // a chosen sub-net
//   auto fast = d.run_within(inputs, 2.0);            // the best one expected to take <= 2 ms
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grove/engine.h"
#include "grove/session.h"
#include "grove/tensor.h"

namespace grove {

struct SubnetInfo {
  std::string name;
  double ratio = 1.0;      // uniform width ratio; for per-layer widths, kept/full channels over all layers
  double accuracy = -1;    // as the model's metadata states it (shown, not used); < 0 when not given
  int64_t flops = 0;       // of the bound sub-net; symbolic sizes (a batch) taken as 1
  int64_t parameters = 0;  // weights of the sub-net's graph
};

// One run's choice and what the controller expected of it.
struct SubnetChoice {
  int subnet = -1;
  double predicted_ms = 0;  // 0 when the controller had nothing to go on
  int64_t others_in_flight = 0;  // jobs on the engine when the run started, not counting it
};

class DynamicSession {
 public:
  // Loads a model whose metadata_props key `grove.subnets` describes its sub-nets; or, when
  // `ratios` is non-empty, slices any model uniformly at those width ratios (a latency study:
  // the narrower nets are untrained). The engine must outlive the session.
  DynamicSession(Engine& engine, const std::string& path, SessionOptions options = {},
                 std::vector<double> ratios = {});
  DynamicSession(DynamicSession&&) noexcept;
  DynamicSession& operator=(DynamicSession&&) noexcept;
  ~DynamicSession();

  // Cheapest first: by FLOPs (then ratio).
  const std::vector<SubnetInfo>& subnets() const;
  // The sub-net named `name`, else the one whose ratio is `name` read as a number; -1 if none.
  int find(const std::string& name) const;

  // Runs sub-net `subnet` (an index into subnets()); thread-safe. `cancel` as for
  // Session::run: once it stops, the run's tiles not yet started are dropped and it throws an
  // Error of kind `cancelled`; a cancelled run does not inform the latency controller.
  TensorMap run(const TensorMap& inputs, int subnet, RunStats* stats = nullptr, const CancelToken& cancel = {});
  // Runs the costliest sub-net (the widest: taken as the most accurate) whose latency,
  // predicted from recent runs under the engine's current load, meets `target_ms`; the
  // cheapest when none does.
  TensorMap run_within(const TensorMap& inputs, double target_ms, SubnetChoice* choice = nullptr,
                       const CancelToken& cancel = {});
  // What run_within would pick now.
  SubnetChoice choose(double target_ms) const;

  Session& session(int subnet);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grove
