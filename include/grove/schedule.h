#pragma once
namespace grove {

// How a run's tiles are released: `aspen` as soon as their own inputs are ready (no barrier
// between operators); `barrier` op by op, the baseline the paper compares against.
enum class Schedule { aspen, barrier };

// How many tiles an op is cut into when no count is forced: `fixed`, about 2 per thread;
// `tail_aware` (the default), the same unless a finer cut repeats work (a conv's channel
// tiles each packing or transforming the whole input again): then the count whose total
// work over the threads plus one tile's time is least, after TA-DNN (docs/scaling.md).
enum class TileCounts { fixed, tail_aware };

}  // namespace grove
