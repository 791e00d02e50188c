#include "kernels/igemm.h"

#include <algorithm>
#include <string>

#include "grove/error.h"

namespace grove::kernels {

void int_gemm(const IntGemmCall& call, IntGemmScratch& scratch, Isa isa) {
  if (!isa_supported(isa)) throw Error("int_gemm: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  if (call.m == 0 || call.n == 0) return;
  if (isa == Isa::scalar) return int_gemm_scalar(call);
  pack_b_panels(call, scratch.b);
  int_gemm_panels(call, scratch.b, scratch, isa);
}

namespace {
template <class T>
void pack_a_typed(const IntGemmCall& call, std::vector<int16_t>& out) {
  const size_t pairs = (call.k + 1) / 2;
  out.resize(call.m * pairs * 2);
  for (size_t i = 0; i < call.m; ++i) {
    const auto za = static_cast<int16_t>(call.a_zero ? call.a_zero[call.a_zero_per_row ? i : 0] : 0);
    const T* src = static_cast<const T*>(call.a) + i * call.a_stride;
    int16_t* row = out.data() + i * pairs * 2;
    for (size_t p = 0; p < call.k; ++p) row[p] = static_cast<int16_t>(src[p] - za);
    if (call.k % 2) row[call.k] = 0;
  }
}
template <class T>
void pack_b_typed(const IntGemmCall& call, IntPanels& out) {
  constexpr size_t kWidth = IntPanels::kWidth;
  const T* b = static_cast<const T*>(call.b);
  for (size_t p = 0; p < call.k; ++p) {
    const T* row = b + p * call.b_stride;
    for (size_t j0 = 0; j0 < call.n; j0 += kWidth) {
      int16_t* dst = out.values.data() + out.index(p, j0);
      const size_t cols = std::min(kWidth, call.n - j0);
      if (call.b_zero_per_column) {
        for (size_t c = 0; c < cols; ++c) dst[2 * c] = static_cast<int16_t>(row[j0 + c] - call.b_zero[j0 + c]);
      } else {
        const auto zb = static_cast<int16_t>(call.b_zero ? call.b_zero[0] : 0);
        for (size_t c = 0; c < cols; ++c) dst[2 * c] = static_cast<int16_t>(row[j0 + c] - zb);
      }
    }
  }
}
}  // namespace

void pack_b_panels(const IntGemmCall& call, IntPanels& out) {
  out.reset(call.k, call.n);
  if (call.b_signed) pack_b_typed<int8_t>(call, out);
  else pack_b_typed<uint8_t>(call, out);
}

void pack_a_pairs(const IntGemmCall& call, std::vector<int16_t>& out) {
  if (call.a_signed) pack_a_typed<int8_t>(call, out);
  else pack_a_typed<uint8_t>(call, out);
}

void run_int_tiles(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch, size_t mr,
                   const IntTileFn* tiles) {
  constexpr size_t kWidth = IntPanels::kWidth;
  const size_t pairs = b.pairs;
  const int16_t* a = call.a_pairs;
  if (!a) {
    pack_a_pairs(call, scratch.a_pairs);
    a = scratch.a_pairs.data();
  }
  for (size_t j0 = 0; j0 < call.n; j0 += kWidth) {
    const int16_t* panel = b.values.data() + (j0 / kWidth) * pairs * kWidth * 2;
    const size_t cols = std::min(kWidth, call.n - j0);
    for (size_t i0 = 0; i0 < call.m; i0 += mr) {
      const size_t rows = std::min(mr, call.m - i0);
      tiles[rows](a + i0 * pairs * 2, pairs, panel, call.c + i0 * call.c_stride + j0, call.c_stride, cols);
    }
  }
}

void int_gemm_panels(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch, Isa isa) {
  if (!isa_supported(isa)) throw Error("int_gemm: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  if (b.k != call.k || b.n != call.n) throw Error("int_gemm_panels: panels do not match the call's k and n");
  if (call.m == 0 || call.n == 0) return;
  if (isa == Isa::scalar) int_gemm_panels_scalar(call, b);
  else if (isa == Isa::avx512 && isa_supports_avx512_vnni()) int_gemm_panels_avx512vnni(call, b, scratch);
  else int_gemm_panels_avx2(call, b, scratch);
}

}  // namespace grove::kernels
