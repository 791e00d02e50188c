// Packing for the 8-bit GEMM (qgemm.h) and its dispatch. The panel packing is a 4 x 16 byte
// transpose per quad of k steps, done with SSE2 unpacks (baseline x86-64), so laying out
// activations costs a fraction of the GEMM.
#include "kernels/qgemm.h"
#include "kernels/requantize.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "grove/error.h"

namespace grove::kernels {

void pack_u8_panels(const uint8_t* rows, size_t row_stride, size_t k, size_t n, uint8_t flip, U8Panels& out) {
  constexpr size_t kWidth = U8Panels::kWidth;
  out.k = k, out.n = n, out.quads = (k + 3) / 4;
  const size_t panels = (n + kWidth - 1) / kWidth;
  out.values.resize(panels * out.panel_bytes());
  const __m128i x = _mm_set1_epi8(static_cast<char>(flip));
  for (size_t q = 0; q < panels; ++q) {
    const size_t j0 = q * kWidth, cols = std::min(kWidth, n - j0);
    uint8_t* panel = out.values.data() + q * out.panel_bytes();
    for (size_t t = 0; t < out.quads; ++t) {
      uint8_t* dst = panel + t * kWidth * 4;
      const size_t steps = std::min<size_t>(4, k - 4 * t);
      if (cols == kWidth && steps == 4) {
        const uint8_t* src = rows + 4 * t * row_stride + j0;
        const __m128i r0 = _mm_xor_si128(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
        const __m128i r1 = _mm_xor_si128(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + row_stride)));
        const __m128i r2 = _mm_xor_si128(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * row_stride)));
        const __m128i r3 = _mm_xor_si128(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 3 * row_stride)));
        const __m128i p01l = _mm_unpacklo_epi8(r0, r1), p01h = _mm_unpackhi_epi8(r0, r1);
        const __m128i p23l = _mm_unpacklo_epi8(r2, r3), p23h = _mm_unpackhi_epi8(r2, r3);
        auto* d = reinterpret_cast<__m128i*>(dst);
        _mm_storeu_si128(d + 0, _mm_unpacklo_epi16(p01l, p23l));
        _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(p01l, p23l));
        _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(p01h, p23h));
        _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(p01h, p23h));
        continue;
      }
      std::memset(dst, 0, kWidth * 4);
      for (size_t s = 0; s < steps; ++s) {
        const uint8_t* src = rows + (4 * t + s) * row_stride + j0;
        for (size_t c = 0; c < cols; ++c) dst[c * 4 + s] = src[c] ^ flip;
      }
    }
  }
}

void pack_s8(const int8_t* a, size_t m, size_t k, size_t a_stride, PackedS8& out) {
  constexpr size_t kRows = PackedS8::kRows;
  out.m = m, out.k = k, out.quads = (k + 3) / 4;
  const size_t blocks = (m + kRows - 1) / kRows;
  out.values.assign(blocks * kRows * out.quads * 4, 0);
  out.row_sums.assign(m, 0);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t rows = std::min(kRows, m - b * kRows);
    int8_t* block = out.values.data() + b * kRows * out.quads * 4;
    for (size_t r = 0; r < rows; ++r) {
      const int8_t* src = a + (b * kRows + r) * a_stride;
      for (size_t p = 0; p < k; ++p) {
        block[((p / 4) * rows + r) * 4 + p % 4] = src[p];
        out.row_sums[b * kRows + r] += src[p];
      }
    }
  }
}

void s8u8_gemm_scalar(const PackedS8& a, RowRange range, const U8Panels& b, int32_t* c, size_t c_stride) {
  constexpr size_t kRows = PackedS8::kRows, kWidth = U8Panels::kWidth;
  for (size_t i = range.begin; i < range.end; ++i) {
    const size_t rows = std::min(kRows, a.m - i / kRows * kRows), r = i % kRows;
    const int8_t* block = a.block(i / kRows);
    for (size_t j = 0; j < b.n; ++j) {
      const uint8_t* panel = b.values.data() + j / kWidth * b.panel_bytes();
      int32_t sum = 0;
      for (size_t t = 0; t < a.quads; ++t)
        for (size_t s = 0; s < 4; ++s)
          sum += static_cast<int32_t>(block[(t * rows + r) * 4 + s]) *
                 static_cast<int32_t>(panel[(t * kWidth + j % kWidth) * 4 + s]);
      c[(i - range.begin) * c_stride + j] = sum;
    }
  }
}

void s8u8_gemm_requantize_scalar(const PackedS8& a, RowRange rows, const U8Panels& b, const S8Requantize& r) {
  std::vector<int32_t> sums((rows.end - rows.begin) * b.n);
  s8u8_gemm_scalar(a, rows, b, sums.data(), b.n);
  for (size_t i = 0; i < rows.end - rows.begin; ++i) {
    RequantizeParams p;
    p.add = r.add[rows.begin + i];
    p.multiplier = r.multiplier[rows.begin + i];
    p.zero_point = r.zero_point, p.lo = r.lo, p.hi = r.hi;
    void* y = static_cast<uint8_t*>(r.y) + i * r.y_stride;
    requantize_scalar(sums.data() + i * b.n, b.n, p, r.is_signed, y);
  }
}

void s8u8_gemm_requantize(const PackedS8& a, RowRange rows, const U8Panels& b, const S8Requantize& r, Isa isa) {
  if (a.quads != b.quads) throw Error("s8u8_gemm: A has " + std::to_string(a.k) + " steps, B " + std::to_string(b.k));
  if (rows.begin % PackedS8::kRows != 0 || rows.end > a.m || rows.begin > rows.end)
    throw Error("s8u8_gemm: rows [" + std::to_string(rows.begin) + ", " + std::to_string(rows.end) +
                ") do not start a block of A's " + std::to_string(a.m));
  if (rows.begin == rows.end || b.n == 0) return;
  if (isa == Isa::scalar) return s8u8_gemm_requantize_scalar(a, rows, b, r);
  if (isa != Isa::avx512 || !isa_supports_avx512_vnni())
    throw Error("s8u8_gemm: needs AVX512_VNNI, which this CPU or GROVE_ISA does not give");
  s8u8_gemm_requantize_avx512vnni(a, rows, b, r);
}

void u8s8_gemm_requantize_scalar(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w,
                                 const ColumnRequantize& r) {
  constexpr size_t kWidth = U8Panels::kWidth;
  std::vector<int32_t> sums(w.n);
  const size_t j0 = r.col_begin, j1 = std::min(r.col_end, w.n);
  for (size_t t = 0; t < rows; ++t) {
    for (size_t j = j0; j < j1; ++j) {
      const auto* panel = reinterpret_cast<const int8_t*>(w.values.data() + j / kWidth * w.panel_bytes());
      int32_t sum = 0;
      for (size_t q = 0; q < w.quads; ++q)
        for (size_t s = 0; s < 4; ++s)
          sum += static_cast<int32_t>(x[t * x_stride + q * 4 + s]) * static_cast<int32_t>(panel[(q * kWidth + j % kWidth) * 4 + s]);
      sums[j] = sum;
    }
    for (size_t j = j0; j < j1; ++j) {
      RequantizeParams p;
      p.add = r.add[j];
      p.multiplier = r.multiplier[j];
      p.zero_point = r.zero_point, p.lo = r.lo, p.hi = r.hi;
      uint8_t* y = static_cast<uint8_t*>(r.y) + t * r.y_stride + (j - j0);
      requantize_scalar(&sums[j], 1, p, r.is_signed, y);
      if (r.residual) qadd_scalar(y, static_cast<const uint8_t*>(r.residual) + t * r.residual_stride + (j - j0), 1, r.residual_add, y);
    }
  }
}

void u8s8_gemm_requantize(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const ColumnRequantize& r,
                          Isa isa) {
  if (r.col_begin % U8Panels::kWidth != 0)
    throw Error("u8s8_gemm: column " + std::to_string(r.col_begin) + " does not start a panel");
  if (rows == 0 || r.col_begin >= std::min(r.col_end, w.n)) return;
  if (isa == Isa::scalar) return u8s8_gemm_requantize_scalar(x, rows, x_stride, w, r);
  if (isa != Isa::avx512 || !isa_supports_avx512_vnni())
    throw Error("u8s8_gemm: needs AVX512_VNNI, which this CPU or GROVE_ISA does not give");
  if (isa_supports_amx_int8()) return u8s8_gemm_requantize_amx(x, rows, x_stride, w, r);
  u8s8_gemm_requantize_avx512vnni(x, rows, x_stride, w, r);
}

void u8s8_gemm_int32_scalar(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const int32_t* add,
                            size_t col_begin, size_t col_end, int32_t* c, size_t c_stride) {
  constexpr size_t kWidth = U8Panels::kWidth;
  for (size_t t = 0; t < rows; ++t)
    for (size_t j = col_begin; j < std::min(col_end, w.n); ++j) {
      const auto* panel = reinterpret_cast<const int8_t*>(w.values.data() + j / kWidth * w.panel_bytes());
      int32_t sum = add[j];
      for (size_t q = 0; q < w.quads; ++q)
        for (size_t s = 0; s < 4; ++s)
          sum += static_cast<int32_t>(x[t * x_stride + q * 4 + s]) * static_cast<int32_t>(panel[(q * kWidth + j % kWidth) * 4 + s]);
      c[t * c_stride + (j - col_begin)] = sum;
    }
}

void u8s8_gemm_int32(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const int32_t* add,
                     size_t col_begin, size_t col_end, int32_t* c, size_t c_stride, Isa isa) {
  if (col_begin % U8Panels::kWidth != 0)
    throw Error("u8s8_gemm: column " + std::to_string(col_begin) + " does not start a panel");
  if (rows == 0 || col_begin >= std::min(col_end, w.n)) return;
  if (isa == Isa::scalar) return u8s8_gemm_int32_scalar(x, rows, x_stride, w, add, col_begin, col_end, c, c_stride);
  if (isa != Isa::avx512 || !isa_supports_avx512_vnni())
    throw Error("u8s8_gemm: needs AVX512_VNNI, which this CPU or GROVE_ISA does not give");
  u8s8_gemm_int32_avx512vnni(x, rows, x_stride, w, add, col_begin, col_end, c, c_stride);
}

void s8u8_gemm(const PackedS8& a, RowRange rows, const U8Panels& b, int32_t* c, size_t c_stride, Isa isa) {
  if (a.quads != b.quads) throw Error("s8u8_gemm: A has " + std::to_string(a.k) + " steps, B " + std::to_string(b.k));
  if (rows.begin % PackedS8::kRows != 0 || rows.end > a.m || rows.begin > rows.end)
    throw Error("s8u8_gemm: rows [" + std::to_string(rows.begin) + ", " + std::to_string(rows.end) +
                ") do not start a block of A's " + std::to_string(a.m));
  if (rows.begin == rows.end || b.n == 0) return;
  if (isa == Isa::scalar) return s8u8_gemm_scalar(a, rows, b, c, c_stride);
  if (isa != Isa::avx512 || !isa_supports_avx512_vnni())
    throw Error("s8u8_gemm: needs AVX512_VNNI, which this CPU or GROVE_ISA does not give");
  s8u8_gemm_avx512vnni(a, rows, b, c, c_stride);
}

}  // namespace grove::kernels
