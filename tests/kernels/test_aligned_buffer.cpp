// AlignedFloats (kernels/aligned_buffer.h): small arrays on 64-byte boundaries, arrays of 2 MiB
// and more on 2 MiB boundaries (so transparent huge pages can back them), every element 0.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/aligned_buffer.h"

namespace grove::kernels {
namespace {

TEST(AlignedFloats, LargeArraysSitOnHugePageBoundariesAndEveryArrayStartsAtZero) {
  const size_t huge = AlignedFloats::kHugePage / sizeof(float);
  for (size_t count : {size_t{1}, size_t{17}, huge - 1, huge, huge + 5, 3 * huge + 7}) {
    AlignedFloats a(count);
    const auto address = reinterpret_cast<uintptr_t>(a.data());
    EXPECT_EQ(address % 64, 0u) << count;
    if (count >= huge) EXPECT_EQ(address % AlignedFloats::kHugePage, 0u) << count;
    ASSERT_EQ(a.size(), count);
    for (size_t i = 0; i < count; i += 4099) EXPECT_EQ(a.data()[i], 0.0f) << count << " at " << i;
    EXPECT_EQ(a.data()[count - 1], 0.0f) << count;
    a.data()[count - 1] = 1.0f;  // the whole array is writable
    a.resize(count / 2 + 1);     // and is given back with the alignment it was taken with
  }
}

}  // namespace
}  // namespace grove::kernels
