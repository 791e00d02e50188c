#pragma once
namespace grove {

// How a run's tiles are released: `aspen` as soon as their own inputs are ready (no barrier
// between operators); `barrier` op by op, the baseline the paper compares against.
enum class Schedule { aspen, barrier };

// How many tiles an op is cut into when no count is forced: `fixed`, about 2 per thread;
// `tail_aware`, TA-DNN's staircase (docs/scaling.md): of 1..4 tiles per thread, the count
// whose waves of its largest tile on the threads, plus a cost per tile, are cheapest.
enum class TileCounts { fixed, tail_aware };

}  // namespace grove
