#include <gtest/gtest.h>

#include "runtime/cores.h"
#include "runtime/engine.h"

namespace grove {
namespace {

TEST(Cores, CpuMaxQuotaRoundsUp) {
  EXPECT_EQ(cores_from_cpu_max("200000 100000"), 2);
  EXPECT_EQ(cores_from_cpu_max("150000 100000\n"), 2);
  EXPECT_EQ(cores_from_cpu_max("50000 100000"), 1);
  EXPECT_EQ(cores_from_cpu_max("max 100000"), 0);
  EXPECT_EQ(cores_from_cpu_max(""), 0);
  EXPECT_EQ(cores_from_cpu_max("garbage"), 0);
  EXPECT_EQ(cores_from_cpu_max("-1 100000"), 0);
  EXPECT_EQ(cores_from_cpu_max("100000 0"), 0);
}

TEST(Cores, AvailableCoresWithinTheAffinityMask) {
  int cores = available_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(allowed_cpus().size()));
  int quota = cgroup_cpu_quota_cores();
  if (quota > 0) EXPECT_LE(cores, quota);
}

TEST(Cores, PinningToAnAllowedCpuWorksOrFailsQuietly) {
  std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  pin_current_thread(cpus.front());  // may be refused; must not crash
  EXPECT_FALSE(pin_current_thread(-1));
}

}  // namespace
}  // namespace grove
