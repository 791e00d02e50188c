#pragma once
// The CPUs this process may run on: affinity mask and cgroup CPU quota.
#include <string_view>
#include <vector>

namespace grove {

// CPU ids in this process's affinity mask, ascending (at least one entry).
std::vector<int> allowed_cpus();

// Whole cores granted by a cgroup v2 `cpu.max` line ("200000 100000" -> 2, rounded up;
// "max 100000" -> 0, meaning no quota). Malformed text -> 0.
int cores_from_cpu_max(std::string_view cpu_max);

// The cgroup CPU quota in whole cores (v2 cpu.max, else v1 cfs quota); 0 when there is none.
int cgroup_cpu_quota_cores();

// Pins the calling thread to one CPU. Best effort: returns false (and changes nothing) when
// the system refuses, e.g. in a restricted container.
bool pin_current_thread(int cpu);
// Moves the calling thread to the idle scheduling class (SCHED_IDLE): it runs only when no
// other thread wants its core. False where the system refuses.
bool lower_current_thread_to_idle();

}  // namespace grove
