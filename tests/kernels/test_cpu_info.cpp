// The machine facts tile rules read on every tile (kernels/cpu_info.h). Each cpuid traps to
// the hypervisor on a VM, so asking per tile once cost MobileNetV2 a third of its run time:
// the facts must be probed once and handed out by reference.
#include <gtest/gtest.h>

#include "kernels/cpu_info.h"

namespace grove::kernels::testing {
namespace {

TEST(CpuInfo, IsProbedOnceAndSharedByEveryCaller) {
  const CpuInfo& first = cpu_info();
  EXPECT_EQ(&first, &cpu_info());
  EXPECT_FALSE(first.brand.empty());
  EXPECT_GE(first.l1d_bytes, 0);
  EXPECT_GE(first.l2_bytes, 0);
  EXPECT_EQ(machine_key(), machine_key());
  EXPECT_NE(machine_key().find(first.brand), std::string::npos);
}

}  // namespace
}  // namespace grove::kernels::testing
