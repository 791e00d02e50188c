#pragma once
// What plans measure of the machine (the cost of moving an element, the bf16 units' gains,
// whether Winograd beats the row GEMM on channels-last convs). Each is measured once per
// machine and stored in the machine's folder beside the tuning records
// (tune::machine_tuning_dir()/machine.probes, keyed by kernels::machine_key()); every later
// process reads the stored value instead of measuring again, so the same model and options
// plan the same way in every process, and a latency or a bug seen once comes back. An engine
// keeps what it read or measured for all its sessions. Deleting the file measures anew.
#include <mutex>
#include <optional>
#include <string>

#include "kernels/conv_probe.h"
#include "plan/plan.h"

namespace grove {

struct MachineProbes {
  std::mutex mutex;  // held while reading or taking a measurement
  double move_flops = 0;        // 0: not measured yet
  double amx_flop_cost = 0;     // 0: not measured yet
  double bf16_dot_gain = -1;    // < 0: not measured yet (0 is a measurement: no AVX512-BF16)
  double transpose_flops = 0;   // 0: not measured yet
  std::optional<kernels::WinogradNhwcProbe> winograd_nhwc;
  bool stored_read = false;     // the machine's file was looked for
  std::string source;           // for reports: where the values came from
};

// What a plan asks of the machine.
struct ProbeNeeds {
  bool move_flops = false;      // tail-aware tile counts
  bool amx_flop_cost = false;   // bf16 with tail-aware tile counts
  bool bf16_dot_gain = false;   // bf16
  bool channels_last = false;   // transpose_flops
  bool winograd_nhwc = false;   // channels-last with convs
};

// Fills `po`'s machine measurements from `probes`: the stored file is read the first time;
// what it lacks is measured now and the file rewritten. The caller holds probes.mutex.
// po.probes_source says where they came from.
void take_machine_probes(MachineProbes& probes, const ProbeNeeds& needs, PlanOptions& po);

// The file this machine's probes are stored in; "" when there is no cache folder.
std::string machine_probes_path();

}  // namespace grove
