#pragma once
// What plans measure of the machine (the cost of moving an element, the bf16 units' gains,
// whether Winograd beats the row GEMM on channels-last convs): taken the first time a session
// of an engine plans something that asks, then kept by the engine for every session on it, so
// two sessions of one model plan it alike and give the same bits.
#include <mutex>
#include <optional>

#include "kernels/conv_probe.h"

namespace grove {

struct MachineProbes {
  std::mutex mutex;  // held while reading or taking a measurement
  double move_flops = 0;        // 0: not measured yet
  double amx_flop_cost = 0;     // 0: not measured yet
  double bf16_dot_gain = -1;    // < 0: not measured yet (0 is a measurement: no AVX512-BF16)
  double transpose_flops = 0;   // 0: not measured yet
  std::optional<kernels::WinogradNhwcProbe> winograd_nhwc;
};

}  // namespace grove
