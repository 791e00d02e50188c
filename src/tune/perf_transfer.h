#pragma once
// Moving a performance model to a new machine (paper 003, section 4.4): fine-tune another
// machine's model on a few of this machine's samples. grove tune --fit --transfer-from and
// every calibration (grove tune --calibrate, the background one of a long-running process)
// take this one path.
#include <span>
#include <string>
#include <vector>

#include "tune/perf_model.h"

namespace grove::tune {

// NN2 as grove tune --fit trains it from scratch (an MLP 64x64).
TrainOptions nn2_options(uint64_t seed);

struct Transferred {
  PerfModel model;     // fine-tuned, with each output's error on the test samples
  double as_is = 0;    // the base model's MdRAE on the test samples, before fine-tuning
};

// Fine-tunes `base` (whose outputs are `primitives`) on `train`, pulled towards its own
// weights. Each output keeps its MdRAE on `test` as its error; an output no sample measured
// (`measured` false) keeps the base model's error on this machine as a whole.
Transferred transfer_model(PerfModel base, const std::vector<std::string>& primitives,
                           std::span<const PerfSample> train, std::span<const PerfSample> test,
                           const std::vector<bool>& measured, uint64_t seed);

// Writes `model` to `path` (its folder made) through a rename, so a plan reading it meanwhile
// sees the old file or the new one whole. Error naming the path when it cannot.
void install_perf_model(const PerfModel& model, const std::string& path);

}  // namespace grove::tune
