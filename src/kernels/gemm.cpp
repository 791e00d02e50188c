// The GEMM driver: cache blocking, packing, and the choice of microkernel. The loops are
// BLIS's, minus the B packing (weights arrive packed, full k per panel):
//   for each k block (kc)                 -- C is revisited once per k block
//     for each m block (mc)               -- pack A[mc x kc] once; it stays in L2
//       for each B panel (nr)             -- its kc x nr slice is reused by every tile below
//         for each MR rows of the m block -- one microkernel call
// The sizes and why they were chosen are in docs/kernels.md.
#include "kernels/gemm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include <string>

#ifdef __SSE2__
#include <xmmintrin.h>
#endif

#include "grove/error.h"
#include "kernels/amx.h"
#include "kernels/bf16.h"
#include "kernels/cpu_info.h"
#include "kernels/gemm_microkernel.h"
#include "kernels/transpose.h"

namespace grove::kernels {

namespace {

struct GemmConfig {
  GemmBlocking blocking;
  GemmMicrokernel kernel;
  // Set up and release per-thread unit state around one gemm() call (AMX's tile configuration).
  void (*begin)() = nullptr;
  void (*end)() = nullptr;
  // The kernel reads float A where it lies (GemmTileArgs::a_stride), so row-major A is not packed.
  bool reads_a_unpacked = false;
  // For n <= 16 with A in place: two row tiles in one call, on the first 16 columns of a panel.
  GemmMicrokernel narrow = nullptr;
};

// The AMX kernel's k block: the packed A block (kAmxMc rows of kc bf16) fills a quarter of
// this CPU's L2, so it stays there beside the B panels it meets. Each k block costs a pass
// of C through the AVX-512 epilogue, a large share of a block at the tile unit's speed, so
// the longest block the L2 allows pays (docs/kernels.md has the measurements).
constexpr size_t kAmxMc = 256;
size_t amx_kc() {
  static const size_t kc = [] {
    const int64_t l2 = cpu_info().l2_bytes > 0 ? cpu_info().l2_bytes : int64_t{1} << 20;
    const size_t fit = static_cast<size_t>(l2) / 4 / (kAmxMc * 2) / 32 * 32;
    return std::clamp<size_t>(fit, 256, 2048);
  }();
  return kc;
}

GemmConfig config_for(Isa isa, Precision precision = Precision::f32) {
  if (precision == Precision::bf16_amx)
    return {{32, 32, amx_kc(), kAmxMc, "bf16_gemm_32x32_amx"}, bf16_gemm_32x32_amx, amx_begin, amx_end};
  if (precision == Precision::bf16)
    return {{14, 32, 512, 168, "bf16_gemm_14x32_avx512bf16"}, bf16_gemm_14x32_avx512bf16};
  switch (isa) {
    case Isa::avx512:
      return {{14, 32, 512, 168, "f32_gemm_14x32_avx512"}, f32_gemm_14x32_avx512, nullptr, nullptr, true,
              f32_gemm_28x16_avx512};
    case Isa::avx2: return {{6, 16, 512, 168, "f32_gemm_6x16_avx2"}, f32_gemm_6x16_avx2};
    case Isa::scalar: break;
  }
  return {{4, 8, 256, 64, "f32_gemm_scalar"}, f32_gemm_scalar};
}

// The most B panels a call may have for its float A to be read in place (where the kernel can).
constexpr size_t kUnpackedAPanels = 4;

// A k block short enough that a row tile of A stays in half the L1 while the k block of every
// B panel the call reads stays in half the L2 (1x1 convs of up to a few hundred channels): then
// a tile runs against all panels in turn, A read in place from L1 instead of packed, and C's
// rows are written whole (docs/kernels.md).
bool runs_tiles_first(const GemmCall& call, const PackedB& b, const GemmBlocking& blocking) {
  // cpuid traps to the hypervisor on a VM: the sizes are read once.
  static const size_t half_l1 = size_t(cpu_info().l1d_bytes > 0 ? cpu_info().l1d_bytes : int64_t{32} << 10) / 2;
  static const size_t half_l2 = size_t(cpu_info().l2_bytes > 0 ? cpu_info().l2_bytes : int64_t{1} << 20) / 2;
  const size_t kc = std::min(blocking.kc, b.k), panels = (call.n + b.nr - 1) / b.nr;
  return blocking.mr * kc * sizeof(float) <= half_l1 && kc * panels * b.nr * sizeof(float) <= half_l2;
}

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Rows [first, last) of tile `index` when `rows` rows are cut into `tiles` tiles of nearly
// equal height. Spreading the remainder over every tile (1024 rows: 13 and 14, never a
// lone 2-row tile) keeps every microkernel call FMA-bound: a 2-row tile does 4 FMAs per 4
// loads, a 13-row tile 26 per 15.
size_t tile_row(size_t rows, size_t tiles, size_t index) { return rows * index / tiles; }

// Rows of A for one m block, as `tiles` micro-panels of kc x mr, tile i holding the rows
// tile_row(m, tiles, i) .. tile_row(m, tiles, i + 1) and zeros after them.
// Groups of 4 rows are transposed 4 x 4 at a time with SSE (baseline x86-64): reads stay
// sequential along each row and every store writes 4 floats, which made packing about 4x
// cheaper than the element-by-element copy (it was ~7% of a 1024^3 GEMM).
void pack_a_block(const float* a, size_t a_stride, size_t m, size_t tiles, size_t kc, size_t mr, float* out) {
  for (size_t tile = 0; tile < tiles; ++tile) {
    const size_t i0 = tile_row(m, tiles, tile);
    const size_t rows = tile_row(m, tiles, tile + 1) - i0;
    size_t r = 0;
#ifdef __SSE2__
    for (; r + 4 <= rows; r += 4) {
      const float* s0 = a + (i0 + r) * a_stride;
      const float* s1 = s0 + a_stride;
      const float* s2 = s1 + a_stride;
      const float* s3 = s2 + a_stride;
      size_t p = 0;
      for (; p + 4 <= kc; p += 4) {
        __m128 x0 = _mm_loadu_ps(s0 + p), x1 = _mm_loadu_ps(s1 + p);
        __m128 x2 = _mm_loadu_ps(s2 + p), x3 = _mm_loadu_ps(s3 + p);
        _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
        float* dst = out + p * mr + r;
        _mm_storeu_ps(dst, x0);
        _mm_storeu_ps(dst + mr, x1);
        _mm_storeu_ps(dst + 2 * mr, x2);
        _mm_storeu_ps(dst + 3 * mr, x3);
      }
      for (; p < kc; ++p) {
        out[p * mr + r] = s0[p];
        out[p * mr + r + 1] = s1[p];
        out[p * mr + r + 2] = s2[p];
        out[p * mr + r + 3] = s3[p];
      }
    }
#endif
    for (; r < rows; ++r) {
      const float* src = a + (i0 + r) * a_stride;
      for (size_t p = 0; p < kc; ++p) out[p * mr + r] = src[p];
    }
    for (; r < mr; ++r)
      for (size_t p = 0; p < kc; ++p) out[p * mr + r] = 0.0f;
    out += kc * mr;
  }
}

// The same micro-panels from A stored transposed (k rows of m floats): each k step of a
// tile is a run of consecutive floats, copied as it is.
void pack_a_block_transposed(const float* a_t, size_t a_stride, size_t m, size_t tiles, size_t kc, size_t mr,
                             float* out) {
  for (size_t tile = 0; tile < tiles; ++tile) {
    const size_t i0 = tile_row(m, tiles, tile);
    const size_t rows = tile_row(m, tiles, tile + 1) - i0;
    for (size_t p = 0; p < kc; ++p) {
      std::copy_n(a_t + p * a_stride + i0, rows, out + p * mr);
      std::fill(out + p * mr + rows, out + (p + 1) * mr, 0.0f);
    }
    out += kc * mr;
  }
}

}  // namespace

GemmBlocking gemm_blocking(Isa isa, Precision precision) { return config_for(isa, precision).blocking; }

bool precision_supported(Precision precision, Isa isa) {
  if (!isa_supported(isa)) return false;
  switch (precision) {
    case Precision::f32: return true;
    case Precision::bf16: return isa == Isa::avx512 && isa_supports_bf16();
    case Precision::bf16_amx: return isa == Isa::avx512 && isa_supports_amx();
    case Precision::int8_weights: return true;  // the few-rows kernel on AVX-512, else float panels
  }
  return false;
}

namespace {

void check_supported(const char* what, Isa isa, Precision precision) {
  if (!isa_supported(isa))
    throw Error(std::string(what) + ": ISA " + std::string(isa_name(isa)) + " is not supported by this CPU");
  if (!precision_supported(precision, isa))
    throw Error(std::string(what) + (precision == Precision::bf16_amx
                                         ? ": AMX bf16 kernels need AMX-BF16, which this CPU (or GROVE_ISA) does not offer"
                                         : ": bf16 kernels need AVX512-BF16, which this CPU (or GROVE_ISA) does not offer"));
}

uint32_t* words(float* p) { return reinterpret_cast<uint32_t*>(p); }

// The widest B panel of the kernels of config_for.
constexpr size_t kMaxPanelWidth = 32;

// B in bf16 panels straight from the source: for k_by_n each pair of source rows is
// interleaved with vector conversions; n_by_k (column c of B is a contiguous source row) is
// transposed into that order a block at a time first.
void pack_b_bf16(PackedB& out, const float* b, size_t row_stride, BLayout layout) {
  const size_t k = out.k, n = out.n, nr = out.nr, pairs = (k + 1) / 2;
  for (size_t j = 0; j * nr < n; ++j) {
    uint32_t* panel = words(out.panels.data()) + j * out.steps() * nr;
    const size_t cols = std::min(nr, n - j * nr);
    if (layout == BLayout::k_by_n) {
      for (size_t q = 0; q < pairs; ++q) {
        const float* row0 = b + 2 * q * row_stride + j * nr;
        bf16_interleave_rows_avx512bf16(row0, 2 * q + 1 < k ? row0 + row_stride : nullptr, cols, panel + q * nr);
      }
    } else {
      // Transposed a block of k rows at a time into k_by_n order (a copy), then paired as above.
      constexpr size_t kBlock = 64;
      float block[kBlock * kMaxPanelWidth];
      if (nr > kMaxPanelWidth) throw Error("pack_b: a bf16 panel wider than kMaxPanelWidth");
      for (size_t p0 = 0; p0 < k; p0 += kBlock) {
        const size_t rows = std::min(kBlock, k - p0);
        transpose_4byte(b + j * nr * row_stride + p0, row_stride, cols, rows, block, nr);
        for (size_t p = 0; p < rows; p += 2)
          bf16_interleave_rows_avx512bf16(block + p * nr, p + 1 < rows ? block + (p + 1) * nr : nullptr, cols,
                                          panel + (p0 + p) / 2 * nr);
      }
    }
  }
}

}  // namespace

void shape_packed_b_bf16(PackedB& out, size_t k, size_t n, Isa isa, Precision to) {
  if (!is_bf16(to)) throw Error("shape_packed_b_bf16: the target precision is not bf16");
  check_supported("shape_packed_b_bf16", isa, to);
  out.k = k, out.n = n, out.isa = isa, out.precision = to;
  out.nr = config_for(isa, to).blocking.nr;
  out.panels.reserve(std::max<size_t>((n + out.nr - 1) / out.nr * out.steps() * out.nr, 1));
}

void round_panel_to_bf16(const float* rows, size_t row_stride, size_t cols, PackedB& out, size_t j) {
  const size_t nr = out.nr, steps = out.steps(), pairs = (out.k + 1) / 2;
  if (cols > nr || (j + 1) * nr > out.panels.size() / std::max<size_t>(steps, 1))
    throw Error("round_panel_to_bf16: columns past the panel");
  uint32_t* dst = words(out.panels.data()) + j * steps * nr;
  for (size_t q = 0; q < pairs; ++q, dst += nr) {
    const float* row0 = rows + 2 * q * row_stride;
    bf16_interleave_rows_avx512bf16(row0, 2 * q + 1 < out.k ? row0 + row_stride : nullptr, cols, dst);
    std::fill(dst + cols, dst + nr, 0u);
  }
  std::fill(dst, dst + (steps - pairs) * nr, 0u);  // AMX's padding pair rows
}

void convert_to_bf16(const PackedB& in, PackedB& out, Precision to) {
  if (in.precision != Precision::f32) throw Error("convert_to_bf16: B is not packed as f32");
  if (!is_bf16(to)) throw Error("convert_to_bf16: the target precision is not bf16");
  check_supported("convert_to_bf16", in.isa, to);
  out.k = in.k;
  out.n = in.n;
  out.isa = in.isa;
  out.precision = to;
  out.nr = config_for(in.isa, to).blocking.nr;
  if (out.nr != in.nr) throw Error("convert_to_bf16: f32 and bf16 panels differ in width");
  const size_t nr = out.nr, steps = out.steps(), pairs = (in.k + 1) / 2, panel_count = (in.n + nr - 1) / nr;
  out.panels.reserve(std::max<size_t>(panel_count * steps * nr, 1));
  for (size_t j = 0; j < panel_count; ++j) {
    const float* src = in.panel(j);
    uint32_t* dst = words(out.panels.data()) + j * steps * nr;
    for (size_t q = 0; q < pairs; ++q)
      bf16_interleave_rows_avx512bf16(src + 2 * q * nr, 2 * q + 1 < in.k ? src + (2 * q + 1) * nr : nullptr, nr,
                                      dst + q * nr);
    std::fill(dst + pairs * nr, dst + steps * nr, 0u);  // AMX's padding pair rows
  }
}

// int8 weights: per column, scale = largest magnitude / 127 and q = round(w / scale) (ties to
// even), so q * scale is within scale / 2 of w; a column of zeros gets scale 0. Panel j holds
// row p's nr bytes at byte p * nr; padding columns and rows are 0.
void pack_b_int8(PackedB& packed, const float* b, size_t row_stride, BLayout layout) {
  const size_t k = packed.k, n = packed.n, nr = packed.nr, panel_count = (n + nr - 1) / nr;
  packed.panels.resize(std::max<size_t>(panel_count * packed.steps() * nr, 1));
  packed.scales.resize(std::max<size_t>(panel_count * nr, 1));
  float* scale = packed.scales.data();
  // Both passes walk B in its stored order (a column of k_by_n is k strided reads).
  const bool rows_are_k = layout == BLayout::k_by_n;
  const size_t outer = rows_are_k ? k : n, inner = rows_are_k ? n : k;
  std::vector<bool> non_finite(n, false);
  for (size_t i = 0; i < outer; ++i)
    for (size_t j = 0; j < inner; ++j) {
      const size_t col = rows_are_k ? j : i;
      const float w = b[i * row_stride + j];
      if (!std::isfinite(w)) non_finite[col] = true;
      else scale[col] = std::max(scale[col], std::abs(w));
    }
  // A column holding NaN or infinity gets a NaN scale (codes 0): its outputs are NaN, as fp32's
  // would be, instead of a number quantization made up.
  for (size_t col = 0; col < n; ++col)
    scale[col] = non_finite[col] ? std::numeric_limits<float>::quiet_NaN() : scale[col] / 127.0f;
  auto* bytes = reinterpret_cast<int8_t*>(packed.panels.data());
  const size_t panel_bytes = packed.steps() * nr * sizeof(float);
  for (size_t i = 0; i < outer; ++i)
    for (size_t j = 0; j < inner; ++j) {
      const size_t col = rows_are_k ? j : i, p = rows_are_k ? i : j;
      const float q = scale[col] > 0.0f ? std::nearbyint(b[i * row_stride + j] / scale[col]) : 0.0f;  // NaN scale: 0
      bytes[col / nr * panel_bytes + p * nr + col % nr] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
}

// Columns [n0, n0 + n) of int8 weights as f32 panels (q * scale), for the tile kernel.
void dequantize_int8(const PackedB& b, size_t n0, size_t n, PackedB& out) {
  shape_packed_b(out, b.k, n, b.isa);
  const size_t nr = b.nr, k = b.k;
  for (size_t j = 0; j * nr < n; ++j) {
    const size_t panel = n0 / nr + j;
    const auto* q = reinterpret_cast<const int8_t*>(b.panel(panel));
    const float* scale = b.scales.data() + panel * nr;
    float* dst = out.panels.data() + j * k * nr;
    for (size_t p = 0; p < k; ++p)
      for (size_t c = 0; c < nr; ++c) dst[p * nr + c] = static_cast<float>(q[p * nr + c]) * scale[c];
  }
}

PackedB pack_b(const float* b, size_t k, size_t n, size_t row_stride, BLayout layout, Isa isa, Precision precision) {
  check_supported("pack_b", isa, precision);
  const size_t row_length = layout == BLayout::k_by_n ? n : k;
  if (row_stride < row_length) throw Error("pack_b: row stride smaller than a row");
  if ((k > 0 && n > 0) && b == nullptr) throw Error("pack_b: null weights");

  PackedB packed;
  packed.k = k;
  packed.n = n;
  packed.isa = isa;
  packed.precision = precision;
  packed.nr = config_for(isa, precision).blocking.nr;
  const size_t nr = packed.nr;
  if (is_bf16(precision)) {
    packed.panels.resize((n + nr - 1) / nr * packed.steps() * nr);  // zero-filled: padding stays 0
    pack_b_bf16(packed, b, row_stride, layout);
    return packed;
  }
  if (precision == Precision::int8_weights) {
    pack_b_int8(packed, b, row_stride, layout);
    return packed;
  }
  const size_t panel_count = (n + nr - 1) / nr;
  packed.panels.resize(panel_count * k * nr);  // zero-filled: the padding columns stay 0
  // k_by_n a band of rows at a time, every panel's slice of it: each row is read along its
  // length and each panel written in runs, where a panel at a time read one short piece of
  // every row (a GPT-2's 0.5 GB of weights packed at 1.6 GB/s, 0.3 s of its first plan).
  constexpr size_t kBand = 16;
  for (size_t p0 = 0; p0 < k; p0 += kBand)
    for (size_t j = 0; j < panel_count; ++j) {
      float* panel = packed.panels.data() + j * k * nr;
      const size_t cols = std::min(nr, n - j * nr);
      for (size_t p = p0; p < std::min(k, p0 + kBand); ++p)
        for (size_t c = 0; c < cols; ++c) {
          const size_t col = j * nr + c;
          panel[p * nr + c] = layout == BLayout::k_by_n ? b[p * row_stride + col] : b[col * row_stride + p];
        }
    }
  return packed;
}

void shape_packed_b(PackedB& out, size_t k, size_t n, Isa isa) {
  out.scales = AlignedFloats();
  check_supported("pack_b", isa, Precision::f32);
  out.k = k;
  out.n = n;
  out.isa = isa;
  out.precision = Precision::f32;
  out.nr = config_for(isa).blocking.nr;
  const size_t nr = out.nr, panel_count = (n + nr - 1) / nr;
  out.panels.reserve(std::max<size_t>(panel_count * k * nr, 1));
  if (n % nr == 0) return;
  float* last = out.panels.data() + (panel_count - 1) * k * nr;
  for (size_t p = 0; p < k; ++p)
    for (size_t c = n % nr; c < nr; ++c) last[p * nr + c] = 0.0f;
}

void pack_b_into(PackedB& out, const float* b, size_t k, size_t n, size_t row_stride, BLayout layout, Isa isa,
                 Precision precision) {
  const size_t row_length = layout == BLayout::k_by_n ? n : k;
  if (row_stride < row_length) throw Error("pack_b: row stride smaller than a row");
  if ((k > 0 && n > 0) && b == nullptr) throw Error("pack_b: null B");
  if (precision == Precision::int8_weights) {  // a column window of int8 weights: packed anew
    out = pack_b(b, k, n, row_stride, layout, isa, precision);
    return;
  }
  if (is_bf16(precision)) {
    check_supported("pack_b", isa, precision);
    out.k = k;
    out.n = n;
    out.isa = isa;
    out.precision = precision;
    out.nr = config_for(isa, precision).blocking.nr;
    // The padding columns of the last panel and AMX's padding pair rows must be 0: reserve
    // keeps old contents.
    const size_t panel_count = (n + out.nr - 1) / out.nr, steps = out.steps(), size = panel_count * steps * out.nr;
    out.panels.reserve(std::max<size_t>(size, 1));
    if (n % out.nr != 0)
      std::fill(out.panels.data() + (panel_count - 1) * steps * out.nr, out.panels.data() + size, 0.0f);
    const size_t pairs = (k + 1) / 2;
    if (steps > pairs)
      for (size_t j = 0; j < panel_count; ++j)
        std::fill(out.panels.data() + (j * steps + pairs) * out.nr, out.panels.data() + (j + 1) * steps * out.nr, 0.0f);
    pack_b_bf16(out, b, row_stride, layout);
    return;
  }
  shape_packed_b(out, k, n, isa);
  const size_t nr = out.nr;
  for (size_t j = 0; j * nr < n; ++j) {
    float* panel = out.panels.data() + j * k * nr;
    const size_t cols = std::min(nr, n - j * nr);
    if (layout == BLayout::k_by_n) {
      for (size_t p = 0; p < k; ++p) std::copy_n(b + p * row_stride + j * nr, cols, panel + p * nr);
    } else {
      transpose_4byte(b + j * nr * row_stride, row_stride, cols, k, panel, nr);
    }
  }
}

PackedA pack_a(const float* a, size_t m, size_t k, size_t row_stride, Isa isa, Precision precision) {
  check_supported("pack_a", isa, precision);
  if (row_stride < k) throw Error("pack_a: row stride smaller than a row");
  if (m > 0 && k > 0 && a == nullptr) throw Error("pack_a: null A");
  PackedA packed;
  packed.m = m;
  packed.k = k;
  packed.isa = isa;
  packed.precision = precision;
  packed.mr = config_for(isa, precision).blocking.mr;
  const size_t mr = packed.mr, tiles = (m + mr - 1) / mr;
  if (precision == Precision::bf16_amx) {
    packed.tiles.resize(tiles * packed.steps() * mr);
    for (size_t t = 0; t < tiles; ++t)
      bf16_pack_a_amx(a + t * mr * row_stride, row_stride, std::min(mr, m - t * mr), k,
                      words(packed.tiles.data()) + t * packed.steps() * mr);
    return packed;
  }
  if (precision == Precision::bf16) {
    packed.tiles.resize(tiles * packed.steps() * mr);
    for (size_t t = 0; t < tiles; ++t)
      bf16_pack_a_tile_avx512bf16(a + t * mr * row_stride, row_stride, std::min(mr, m - t * mr), k, mr,
                                  words(packed.tiles.data()) + t * packed.steps() * mr);
    return packed;
  }
  packed.tiles.resize(tiles * k * mr);  // zero-filled: rows past m stay 0
  for (size_t t = 0; t < tiles; ++t) {
    float* out = packed.tiles.data() + t * k * mr;
    for (size_t r = 0; r < mr && t * mr + r < m; ++r) {
      const float* src = a + (t * mr + r) * row_stride;
      for (size_t p = 0; p < k; ++p) out[p * mr + r] = src[p];
    }
  }
  return packed;
}

namespace {

void check_call(const GemmCall& call, const PackedB& b, bool need_a) {
  if (b.nr == 0 || call.n0 % b.nr != 0)
    throw Error("gemm: first column " + std::to_string(call.n0) + " is not a multiple of the panel width " +
                std::to_string(b.nr));
  if (call.n0 + call.n > b.n) throw Error("gemm: columns past the end of packed B");
  if (need_a && !call.a && !call.a_bf16 && b.k > 0) throw Error("gemm: null A");
  if (!call.c && !call.c_bf16) throw Error("gemm: null C");
  const size_t a_row = call.a_transposed ? call.m : b.k;
  if ((need_a && call.a_stride < a_row) || call.c_stride < call.n) throw Error("gemm: row stride smaller than a row");
  if ((call.epilogue.residual || call.epilogue.residual_bf16) && call.epilogue.residual_stride < call.n)
    throw Error("gemm: residual row stride smaller than a row");
  if (call.k_steps) {
    if (!gemm_takes_k_steps(b.isa, b.precision) || !need_a || call.a_transposed || call.a_bf16 || call.c_bf16)
      throw Error("gemm: k steps need float32 weights packed for AVX-512 and row-major float A");
    for (size_t i = 0; i < call.k_step_count; ++i)
      if (call.k_steps[i] >= b.k || (i > 0 && call.k_steps[i] <= call.k_steps[i - 1]))
        throw Error("gemm: k steps must increase and stay below k = " + std::to_string(b.k));
  }
  if (call.a_bf16 || call.c_bf16 || call.epilogue.residual_bf16) {
    if (b.precision == Precision::bf16) {
      // The dot-product kernel reads A's pairs in place: whole pairs, rows a whole number apart.
      if (call.epilogue.residual_bf16) throw Error("gemm: a bf16 residual needs B packed for AMX");
      if (call.a_bf16 && (b.k % 2 != 0 || call.a_stride % 2 != 0))
        throw Error("gemm: bf16 A on AVX512-BF16 needs an even k and row stride");
    } else if (b.precision != Precision::bf16_amx) {
      throw Error("gemm: bf16 activations need B packed in bf16");
    }
    if (call.accumulate || call.a_transposed) throw Error("gemm: bf16 activations with accumulate or transposed A");
    if (call.c_bf16 && call.c) throw Error("gemm: both a float and a bf16 C");
    if (call.epilogue.residual_bf16 && call.epilogue.residual) throw Error("gemm: both a float and a bf16 residual");
  }
}



// Where a block of packed A lives: micro-panel t of the block at base + t * tile_stride; or,
// with row_stride set, A unpacked: row i of the block at base + i * row_stride.
struct ABlock {
  const float* base;
  size_t tile_stride;
  size_t row_stride = 0;
};

// The loops shared by both entry points. `a_block(pc, kc, ic, mc, tiles)` gives the packed A
// of rows [ic, ic + mc) over k [pc, pc + kc) as `tiles` micro-panels. With `balanced`, m
// blocks and the tiles inside them have nearly equal heights (see tile_row); otherwise they
// are whole mr-row tiles from the first row, as prepacked A is laid out (mc_max a multiple
// of mr). Neither choice changes how any element of C is computed.
// A bf16 C (call.c_bf16) takes its float sums from `scratch` while k blocks remain.
// Each m block streams every B panel's slice once, so a few rows past mc_max should not
// cost a second pass over B (a 13x13 plane, 169 rows, was two blocks of 85 and 84 that read
// the 2 MB of SqueezeNet's classifier weights twice): balanced blocks go up to 1.5 mc_max.
// Prepacked A is laid out in blocks of exactly mc_max.
// With `tiles_first`, each row tile runs against every B panel before the next tile (see
// runs_tiles_first) instead of each panel against every tile. With `narrow` (a kernel for
// n <= 16, A in place), each call takes two row tiles.
// The row stride, in pair words, of A rounded to bf16 rows of kc steps: whole cache lines, and
// one line more where rows would otherwise fall a multiple of 4 KiB apart and share L1 sets.
size_t bf16_row_words(size_t kc) {
  const size_t words = round_up((kc + 1) / 2, 16);
  return words % 1024 == 0 ? words + 16 : words;
}

size_t m_blocks_of(size_t m, size_t mc_max, bool balanced) {
  if (!balanced) return (m + mc_max - 1) / mc_max;
  return std::max<size_t>(1, (m + mc_max / 2) / mc_max);
}

template <class AProvider>
void gemm_loops(const GemmCall& call, const PackedB& b, const GemmConfig& config, size_t mc_max, bool balanced,
                bool tiles_first, GemmMicrokernel narrow, GemmScratch* scratch, AProvider&& a_block) {
  const size_t mr = config.blocking.mr, nr = b.nr, kc_max = config.blocking.kc, k = b.k;
  auto start = [&](size_t rows, size_t parts, size_t index, size_t step) {
    return balanced ? tile_row(rows, parts, index) : std::min(rows, index * step);
  };
  float* c = call.c;
  size_t c_stride = call.c_stride;
  if (call.c_bf16 && k > kc_max) {
    if (!scratch) throw Error("gemm: a bf16 C over several k blocks needs scratch");
    scratch->c_block.reserve(call.m * call.n);
    c = scratch->c_block.data(), c_stride = call.n;
  }
  GemmTileArgs tile;
  tile.c_stride = c_stride;
  tile.c_bf16_stride = call.c_stride;
  tile.activation = call.epilogue.activation;
  tile.residual_stride = call.epilogue.residual_stride;
  if (config.begin) config.begin();
  // k == 0 still runs one (empty) k block so the epilogue is applied.
  size_t pc = 0;
  do {
    const size_t kc = std::min(kc_max, k - pc);
    tile.kc = kc;
    tile.accumulate = call.accumulate || pc > 0;
    tile.finish = pc + kc >= k;
    if (call.k_steps) {
      // This block's steps, counted from its first (the kernel's A and B start there).
      const uint32_t* end = call.k_steps + call.k_step_count;
      const uint32_t* lo = std::lower_bound(call.k_steps, end, uint32_t(pc));
      const uint32_t* hi = std::lower_bound(lo, end, uint32_t(pc + kc));
      tile.k_step_count = size_t(hi - lo);
      if (pc == 0) {
        tile.k_steps = call.k_steps;
      } else {
        scratch->k_steps_block.assign(lo, hi);
        for (uint32_t& j : scratch->k_steps_block) j -= uint32_t(pc);
        // Never null: a block without a kept step adds nothing, not every step.
        tile.k_steps = tile.k_step_count ? scratch->k_steps_block.data() : call.k_steps;
      }
    }
    const size_t m_blocks = m_blocks_of(call.m, mc_max, balanced);
    for (size_t block = 0; block < m_blocks; ++block) {
      const size_t ic = start(call.m, m_blocks, block, mc_max);
      const size_t mc = start(call.m, m_blocks, block + 1, mc_max) - ic;
      const size_t tiles = (mc + mr - 1) / mr;
      const ABlock packed = a_block(pc, kc, ic, mc, tiles);
      // One microkernel call: row tiles [t, t_end) against panel jr.
      auto run = [&](size_t t, size_t t_end, size_t jr, GemmMicrokernel kernel) {
        tile.n = std::min(nr, call.n - jr);
        tile.b = b.panel((call.n0 + jr) / nr) + packed_steps(b.precision, pc) * nr;
        tile.bias = call.epilogue.bias ? call.epilogue.bias + jr : nullptr;
        tile.b_next = t == 0 && jr + nr < call.n
                          ? b.panel((call.n0 + jr + nr) / nr) + packed_steps(b.precision, pc) * nr
                          : nullptr;
        const size_t ir = start(mc, tiles, t, mr);
        const size_t row = ic + ir;
        tile.m = start(mc, tiles, t_end, mr) - ir;
        tile.a = packed.row_stride ? packed.base + ir * packed.row_stride : packed.base + t * packed.tile_stride;
        tile.a_stride = packed.row_stride;
        tile.c = c ? c + row * c_stride + jr : nullptr;
        tile.c_bf16 = call.c_bf16 && tile.finish ? call.c_bf16 + row * call.c_stride + jr : nullptr;
        tile.row_bias = call.epilogue.row_bias ? call.epilogue.row_bias + row : nullptr;
        tile.residual =
            call.epilogue.residual ? call.epilogue.residual + row * call.epilogue.residual_stride + jr : nullptr;
        tile.residual_bf16 = call.epilogue.residual_bf16
                                 ? call.epilogue.residual_bf16 + row * call.epilogue.residual_stride + jr
                                 : nullptr;
        kernel(tile);
      };
      if (narrow) {
        for (size_t t = 0; t < tiles; t += 2) run(t, std::min(tiles, t + 2), 0, narrow);
      } else if (tiles_first) {
        for (size_t t = 0; t < tiles; ++t)
          for (size_t jr = 0; jr < call.n; jr += nr) run(t, t + 1, jr, config.kernel);
      } else {
        for (size_t jr = 0; jr < call.n; jr += nr)
          for (size_t t = 0; t < tiles; ++t) run(t, t + 1, jr, config.kernel);
      }
    }
    pc += kc;
  } while (pc < k);
  if (config.end) config.end();
}

}  // namespace

bool gemm_takes_k_steps(Isa isa, Precision precision) {
  return precision == Precision::f32 && config_for(isa, precision).reads_a_unpacked;
}

void gemm(const GemmCall& call, const PackedB& b, GemmScratch& scratch) {
  if (call.m == 0 || call.n == 0) return;
  check_call(call, b, true);
  if (call.few_rows && call.m > kFewRows)
    throw Error("gemm: a few-rows product of " + std::to_string(call.m) + " rows (at most " + std::to_string(kFewRows) + ")");
  if (b.precision == Precision::int8_weights) {
    if (call.a_bf16 || call.c_bf16) throw Error("gemm: int8 weights with bf16 activations");
    if (call.few_rows && b.isa == Isa::avx512) return i8w_gemv_avx512(call, b);
    // The columns back as f32 panels, then the f32 path: a product of many rows reuses each
    // weight across them, so unpacking once per call costs little beside the products.
    dequantize_int8(b, call.n0, call.n, scratch.dequantized);
    GemmCall f32_call = call;
    f32_call.n0 = 0;
    return gemm(f32_call, scratch.dequantized, scratch);
  }
  if (call.few_rows && b.isa == Isa::avx512 && b.precision == Precision::f32 && !call.a_bf16 && !call.c_bf16 &&
      !call.k_steps)
    return f32_gemv_avx512(call, b);
  if (call.few_rows && b.precision == Precision::bf16 && !call.a_transposed) {
    if (call.a_bf16)  // already rows of pairs
      return bf16_gemv_avx512bf16(call, b, reinterpret_cast<const uint32_t*>(call.a_bf16), call.a_stride / 2);
    // Rounded as the k-blocked path rounds them, whole rows at once.
    const size_t stride = bf16_row_words(std::max<size_t>(b.k, 1));
    scratch.a_block.reserve(call.m * stride);
    uint32_t* rows = words(scratch.a_block.data());
    bf16_round_rows_avx512bf16(call.a, call.a_stride, call.m, b.k, rows, stride);
    return bf16_gemv_avx512bf16(call, b, rows, stride);
  }
  const GemmConfig config = config_for(b.isa, b.precision);
  const size_t mr = config.blocking.mr, kc_max = config.blocking.kc, mc_max = config.blocking.mc;
  const bool bf16 = b.precision == Precision::bf16, amx = b.precision == Precision::bf16_amx;
  // A few B panels reuse an A block little, and packing it was a copy for nothing (a conv's
  // window block is laid out just before); many panels read it often, and then packed A's one
  // stream beats 14 rows read in place (docs/kernels.md has the measurements).
  const bool tiles_first = config.reads_a_unpacked && !call.a_transposed && runs_tiles_first(call, b, config.blocking);
  const bool reads_a_unpacked = config.reads_a_unpacked && !call.a_transposed &&
                                (call.n <= kUnpackedAPanels * b.nr || tiles_first || call.k_steps);
  const size_t kc_block = std::min(std::max<size_t>(b.k, 1), kc_max);
  scratch.a_block.reserve(round_up(std::min(mc_max + mc_max / 2, call.m), mr) *
                          std::max(packed_steps(b.precision, kc_block), bf16 ? bf16_row_words(kc_block) : 0));
  const GemmMicrokernel narrow = reads_a_unpacked && call.n <= 16 && !call.c_bf16 ? config.narrow : nullptr;
  gemm_loops(call, b, config, mc_max, true, tiles_first, narrow, &scratch, [&](size_t pc, size_t kc, size_t ic, size_t mc, size_t tiles) {
    float* out = scratch.a_block.data();
    if (amx) {
      const size_t stride = packed_steps(Precision::bf16_amx, kc) * mr;
      for (size_t t = 0; t < tiles; ++t) {
        const size_t i0 = ic + tile_row(mc, tiles, t), rows = tile_row(mc, tiles, t + 1) - tile_row(mc, tiles, t);
        if (call.a_bf16)
          bf16_pack_a_amx_from_bf16(call.a_bf16 + i0 * call.a_stride + pc, call.a_stride, rows, kc, words(out) + t * stride);
        else if (call.a_transposed)
          bf16_pack_a_amx_transposed(call.a + pc * call.a_stride + i0, call.a_stride, rows, kc, words(out) + t * stride);
        else
          bf16_pack_a_amx(call.a + i0 * call.a_stride + pc, call.a_stride, rows, kc, words(out) + t * stride);
      }
      return ABlock{out, stride};
    }
    if (bf16 && call.a_bf16)  // already pairs in rows: read where they lie
      return ABlock{reinterpret_cast<const float*>(call.a_bf16 + ic * call.a_stride + pc), 0, call.a_stride / 2};
    if (bf16 && !call.a_transposed) {
      // Row-major A is only rounded, row by row, and the kernel reads the rows in place.
      const size_t stride = bf16_row_words(kc);
      bf16_round_rows_avx512bf16(call.a + ic * call.a_stride + pc, call.a_stride, mc, kc, words(out), stride);
      return ABlock{out, 0, stride};
    }
    if (bf16) {
      const size_t stride = packed_steps(Precision::bf16, kc) * mr;
      for (size_t t = 0; t < tiles; ++t) {
        const size_t i0 = ic + tile_row(mc, tiles, t), rows = tile_row(mc, tiles, t + 1) - tile_row(mc, tiles, t);
        uint32_t* dst = words(out) + t * stride;
        for (size_t q = 0; 2 * q < kc; ++q) {
          const float* row0 = call.a + (pc + 2 * q) * call.a_stride + i0;
          bf16_interleave_rows_avx512bf16(row0, 2 * q + 1 < kc ? row0 + call.a_stride : nullptr, rows, dst + q * mr);
          std::fill(dst + q * mr + rows, dst + (q + 1) * mr, 0u);
        }
      }
      return ABlock{out, stride};
    }
    if (reads_a_unpacked) return ABlock{call.a + ic * call.a_stride + pc, 0, call.a_stride};
    if (call.a_transposed)
      pack_a_block_transposed(call.a + pc * call.a_stride + ic, call.a_stride, mc, tiles, kc, mr, out);
    else
      pack_a_block(call.a + ic * call.a_stride + pc, call.a_stride, mc, tiles, kc, mr, out);
    return ABlock{out, kc * mr};
  });
}

void gemm(const GemmCall& call, const PackedA& a, size_t row0, const PackedB& b, GemmScratch* scratch) {
  if (call.m == 0 || call.n == 0) return;
  check_call(call, b, false);
  if (a.isa != b.isa) throw Error("gemm: A and B packed for different ISAs");
  if (a.precision != b.precision) throw Error("gemm: A and B packed in different precisions");
  if (a.k != b.k) throw Error("gemm: packed A and B differ in k");
  if (call.k_steps) throw Error("gemm: k steps with prepacked A");
  if (a.mr == 0 || row0 % a.mr != 0) throw Error("gemm: first row of packed A is not on a tile boundary");
  if (row0 + call.m > a.m) throw Error("gemm: rows past the end of packed A");
  const GemmConfig config = config_for(b.isa, b.precision);
  const size_t mr = a.mr;
  // Tiles are the packed ones: mr rows each, m blocks of whole tiles.
  const size_t mc_max = std::max(mr, config.blocking.mc / mr * mr);
  const size_t first_tile = row0 / mr;
  gemm_loops(call, b, config, mc_max, false, false, nullptr, scratch, [&](size_t pc, size_t, size_t ic, size_t, size_t) {
    return ABlock{a.tile(first_tile + ic / mr) + packed_steps(a.precision, pc) * mr, a.steps() * mr};
  });
}

}  // namespace grove::kernels
