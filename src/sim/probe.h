#pragma once
// Short measurements of this machine for the simulator (grove simulate): memory bandwidth
// with one and with every core, and the ready pool's costs (push, pop, their growth when
// several cores use one queue, a parked worker's wake-up, the spin before parking, and what
// reading another core's freshly written data costs).
#include "sim/simulator.h"

namespace grove {

struct MachineProbe {
  int cores = 1;                    // threads the all-core numbers used
  double bandwidth_one = 0;         // bytes/ns, one core copying
  double bandwidth_all = 0;         // bytes/ns, every core copying its own part
  double push_ns = 0, pop_ns = 0;   // one thread alone at the pool
  double contention = 0;            // extra fraction of a pool op per other core at the same queue
  double wake_ns = 0;               // Parker::notify until the sleeper runs (median)
  double spin_ns = 0;               // the idle spin before parking
  double cross_ns_per_byte = 0;     // reading data another core just wrote, over reading it again
};

// Takes about a second. `cores` >= 1.
MachineProbe probe_machine(int cores);

// The simulated machine for `cores`: the probe's pool costs, and `bandwidth` bytes/ns for all
// cores together (0: unlimited).
SimMachine sim_machine(const MachineProbe& probe, int cores, double bandwidth);

}  // namespace grove
