// The portable integer GEMM: plain loops in int32, the oracle of the vector kernel.
#include "kernels/igemm.h"

namespace grove::kernels {
namespace {

inline int32_t load_byte(const void* base, size_t index, bool is_signed) {
  return is_signed ? static_cast<const int8_t*>(base)[index] : static_cast<const uint8_t*>(base)[index];
}

// A[i][p] - a_zero[i], from the bytes or from pre-packed pairs.
inline int32_t a_value(const IntGemmCall& call, size_t i, size_t p) {
  if (call.a_pairs) return call.a_pairs[i * 2 * ((call.k + 1) / 2) + p];
  int32_t za = call.a_zero ? call.a_zero[call.a_zero_per_row ? i : 0] : 0;
  return load_byte(call.a, i * call.a_stride + p, call.a_signed) - za;
}

}  // namespace

void int_gemm_scalar(const IntGemmCall& call) {
  for (size_t i = 0; i < call.m; ++i) {
    int32_t* c_row = call.c + i * call.c_stride;
    for (size_t j = 0; j < call.n; ++j) c_row[j] = 0;
    for (size_t p = 0; p < call.k; ++p) {
      int32_t av = a_value(call, i, p);
      for (size_t j = 0; j < call.n; ++j) {
        int32_t zb = call.b_zero ? call.b_zero[call.b_zero_per_column ? j : 0] : 0;
        // Unsigned sum so the int32 wrap-around past K ~ 33000 is defined, as the vector kernel's is.
        c_row[j] = static_cast<int32_t>(static_cast<uint32_t>(c_row[j]) +
                                        static_cast<uint32_t>(av * (load_byte(call.b, p * call.b_stride + j, call.b_signed) - zb)));
      }
    }
  }
}

void int_gemm_panels_scalar(const IntGemmCall& call, const IntPanels& b) {
  for (size_t i = 0; i < call.m; ++i) {
    int32_t* c_row = call.c + i * call.c_stride;
    for (size_t j = 0; j < call.n; ++j) {
      uint32_t sum = 0;
      for (size_t p = 0; p < call.k; ++p) sum += static_cast<uint32_t>(a_value(call, i, p) * b.values[b.index(p, j)]);
      c_row[j] = static_cast<int32_t>(sum);
    }
  }
}

}  // namespace grove::kernels
