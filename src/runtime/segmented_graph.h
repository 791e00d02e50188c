#pragma once
// A graph with If, Loop or Scan nodes whose choices are known only at run time, on the tile
// runtime. (An If whose condition folds to a constant once shapes are bound is inlined by
// binding, and the whole model stays one TileGraph; see passes/bind.h.) Such a graph cannot
// be one TileGraph, so it is cut at its control-flow nodes: the nodes between two of them
// form a segment, a graph of its own that a Session plans into a TileGraph (cached per input
// shapes, run on the shared Engine like any job); a control-flow node runs between segments,
// reads its condition or trip count, and runs the chosen subgraph, which is again a graph of
// its own with its own Session (its outer-scope reads become inputs), so a branch whose
// inner Ifs fold is one TileGraph too. Within a segment the schedule stays barrier-free;
// between segments there is one wait. Sequence ops (ops/control_flow/sequence.h), and Identities that
// pass a sequence or an optional along, run between segments the same way: sequences and
// optionals live only there, segments see tensors.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "grove/engine.h"
#include "grove/session.h"
#include "runtime/session.h"

namespace grove {

class SegmentedGraph {
 public:
  // `graph` and its subgraphs must outlive this. The parts' sessions run with `options` and
  // `debug`, as the session that owns this graph does.
  SegmentedGraph(const Graph& graph, Engine& engine, const SessionOptions& options, const SessionDebugOptions& debug,
                 const Limits& limits);
  ~SegmentedGraph();
  SegmentedGraph(const SegmentedGraph&) = delete;
  SegmentedGraph& operator=(const SegmentedGraph&) = delete;

  // Runs the graph on `inputs` (by name). Safe to call from several threads at once. Adds
  // the planned jobs it ran (segments, and subgraphs run whole) to stats->segment_runs, and
  // raises stats->peak_activation_bytes to the most the run held at once as measured step by
  // step: the values kept between steps plus the step's own peak (a segment's planned buffers,
  // a subgraph's run). `cancel` goes with every segment's job and is checked between steps and
  // before every subgraph run (each Loop iteration), so a stopped token ends even an endless Loop.
  // `held_outside` is what the runs around this one hold (a Loop body's run inside another
  // Loop: RunBody in ops/control_flow/control_flow.h), charged beside this run's own outputs
  // collected by its Loops and Scans.
  ValueMap run(const ValueMap& inputs, RunStats* stats = nullptr, const CancelToken& cancel = {},
               int64_t held_outside = 0);

  // How many segments and nodes between them (control flow, sequence ops) the graph was cut into.
  size_t segment_count() const;
  size_t control_count() const;

 private:
  struct Part;
  struct Step;
  void run_control(Step& step, ValueMap& values, RunStats& stats, const CancelToken& cancel, int64_t held_outside);

  const Graph& graph_;
  Engine& engine_;
  SessionOptions options_;
  SessionDebugOptions debug_;
  Limits limits_;
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace grove
