#pragma once
namespace grove {

// How a run's tiles are released: `aspen` as soon as their own inputs are ready (no barrier
// between operators); `barrier` op by op, the baseline the paper compares against.
enum class Schedule { aspen, barrier };

}  // namespace grove
