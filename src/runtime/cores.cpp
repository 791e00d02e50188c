#include "runtime/cores.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <string>

#include "runtime/engine.h"

namespace grove {

namespace {

bool parse_int64(std::string_view text, int64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

int cores_from_quota(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>((quota + period - 1) / period);
}

}  // namespace

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

int cores_from_cpu_max(std::string_view cpu_max) {
  while (!cpu_max.empty() && (cpu_max.back() == '\n' || cpu_max.back() == ' ')) cpu_max.remove_suffix(1);
  size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return 0;
  std::string_view quota = cpu_max.substr(0, space), period = cpu_max.substr(space + 1);
  int64_t q = 0, p = 0;
  if (quota == "max" || !parse_int64(quota, q) || !parse_int64(period, p)) return 0;
  return cores_from_quota(q, p);
}

int cgroup_cpu_quota_cores() {
  std::string v2 = first_line("/sys/fs/cgroup/cpu.max");
  if (!v2.empty()) return cores_from_cpu_max(v2);
  for (const char* dir : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    std::string quota = first_line((std::string(dir) + "/cpu.cfs_quota_us").c_str());
    std::string period = first_line((std::string(dir) + "/cpu.cfs_period_us").c_str());
    int64_t q = 0, p = 0;
    if (parse_int64(quota, q) && parse_int64(period, p)) return cores_from_quota(q, p);
  }
  return 0;
}

bool pin_current_thread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

bool lower_current_thread_to_idle() {
  sched_param param{};
  param.sched_priority = 0;
  return pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0;
}

int available_cores() {
  int cores = static_cast<int>(allowed_cpus().size());
  int quota = cgroup_cpu_quota_cores();
  if (quota > 0) cores = std::min(cores, quota);
  return std::max(cores, 1);
}

}  // namespace grove
