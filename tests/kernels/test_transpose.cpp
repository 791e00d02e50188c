// Tester for the 4-byte transpose (kernels/transpose.h): every ISA this CPU has, against the
// definition, bit for bit (NaN payloads included), over sizes around the 8 and 16 blocks and
// row strides wider than a row.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/transpose.h"

namespace grove::kernels {
namespace {

TEST(Transpose, EveryIsaMatchesTheDefinitionBitForBit) {
  std::mt19937 rng(3);
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    for (size_t rows : {1, 7, 8, 15, 16, 17, 33, 49})
      for (size_t cols : {1, 5, 8, 16, 31, 32, 64, 67}) {
        const size_t src_stride = cols + 3, dst_stride = rows + 5;
        std::vector<uint32_t> src(rows * src_stride), dst(cols * dst_stride, 0xDEADBEEF);
        for (uint32_t& v : src) v = rng();  // any bits: NaNs of every payload among them
        transpose_4byte(src.data(), src_stride, rows, cols, dst.data(), dst_stride, isa);
        for (size_t j = 0; j < cols; ++j) {
          for (size_t i = 0; i < rows; ++i)
            ASSERT_EQ(dst[j * dst_stride + i], src[i * src_stride + j])
                << isa_name(isa) << " " << rows << "x" << cols << " at " << i << "," << j;
          for (size_t i = rows; i < dst_stride; ++i)  // nothing written past a row
            ASSERT_EQ(dst[j * dst_stride + i], 0xDEADBEEFu) << isa_name(isa);
        }
      }
  }
}

}  // namespace
}  // namespace grove::kernels
