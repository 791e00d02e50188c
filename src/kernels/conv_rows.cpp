#include "kernels/conv_rows.h"

#include <algorithm>
#include <array>
#include <string>

#include "grove/error.h"
#include "kernels/cpu_info.h"
#include "kernels/gemm_microkernel.h"

namespace grove::kernels {

namespace {
constexpr size_t kMaxTapsPerCall = kConvRowsMaxTaps;
// Output rows of this width go two to a 14-row tile, a group of 7 rows each (run_rows), or
// four to a 28-row tile on panels of at most 16 columns.
constexpr size_t kRowPairWidth = 7;
// Positions one call of the 28 x 16 kernel computes (f32_gemm_28x16_avx512).
constexpr size_t kNarrowRows = 28;
}  // namespace

size_t conv_rows_taps_per_call(size_t channels, size_t taps, size_t nr) {
  // A call streams its taps' weights from L2 for every block of positions, where one tap per
  // call reuses a tap's slice across the rows but moves C in and out per tap. Registers win
  // while the panel's weights for all taps sit in a quarter of L2 (docs/kernels.md).
  static const size_t budget = size_t(cpu_info().l2_bytes > 0 ? cpu_info().l2_bytes : int64_t{1} << 20) / 4;
  return taps * channels * nr * sizeof(float) <= budget ? std::min(taps, kMaxTapsPerCall) : 1;
}

double conv_rows_tap_by_tap_cost(size_t steps) { return 1.15 + 14.0 / double(std::max<size_t>(steps, 1)); }

namespace {

// C of the call's position `at`: float, or bf16 rounded once.
void set_c(const ConvRowCall& call, GemmTileArgs& t, size_t at) {
  if (call.y_bf16) t.c_bf16 = call.y_bf16 + at;
  else t.c = call.y + at;
}

// Whole output rows, `per_call` to a kernel call, each row's groups of 7 positions from its
// own input row (rows 7 or 14 wide).
void run_grouped_rows(const ConvRowCall& call, GemmTileArgs& t, const float* next, size_t jr, size_t per_call,
                      GemmMicrokernel kernel) {
  t.a_group_stride = ptrdiff_t(call.row_step_floats);
  t.a_groups_per_stride = call.out_w / kRowPairWidth;
  for (size_t row = 0; row < call.rows; row += per_call) {
    const size_t y0 = row * call.out_w;
    t.m = std::min(per_call, call.rows - row) * call.out_w;
    t.b_next = next;
    t.a = call.x + row * call.row_step_floats;
    set_c(call, t, y0 * call.y_stride + jr);
    t.residual = call.residual ? call.residual + y0 * call.y_stride + jr : nullptr;
    kernel(t);
  }
  t.a_group_stride = 0;
  t.a_groups_per_stride = 1;
}

// Each output row in `blocks` blocks of positions of nearly equal height, one kernel call each.
void run_blocks(const ConvRowCall& call, GemmTileArgs& t, const float* next, size_t jr, size_t blocks,
                GemmMicrokernel kernel) {
  for (size_t row = 0; row < call.rows; ++row) {
    const float* x = call.x + row * call.row_step_floats;
    const size_t y0 = row * call.out_w;
    for (size_t block = 0; block < blocks; ++block) {
      const size_t o0 = call.out_w * block / blocks, o1 = call.out_w * (block + 1) / blocks;
      t.m = o1 - o0;
      t.b_next = row == 0 && block == 0 ? next : nullptr;
      t.a = x + o0 * t.a_stride;
      set_c(call, t, (y0 + o0) * call.y_stride + jr);
      t.residual = call.residual ? call.residual + (y0 + o0) * call.y_stride + jr : nullptr;
      kernel(t);
    }
  }
}

// Every output row of the call against panel jr, in blocks of positions; the first call
// streams the panel's weights and asks for `next` meanwhile. Rows half a tile wide (a 7x7
// plane) go two to a tile, each half from its own input row: a tile of one such row left half
// the register tile idle. Their few calls per slice (four on a 7x7 plane) each ask for the
// next slice again: weights that large come from memory, and a line the first call could not
// get in flight is asked for again (docs/kernels.md).
// A panel of at most 16 columns (a conv of 16 output channels or fewer, or a conv's or a
// tile's last panel) runs on the float 28 x 16 kernel, where the 14 x 32 tile would spend half
// its FMAs on empty lanes: positions in blocks of up to 28, rows 7 and 14 wide four and two to
// a call.
void run_rows(const ConvRowCall& call, GemmTileArgs& t, const float* next, size_t blocks, size_t jr) {
  if (t.n <= 16 && call.w->precision == Precision::f32 && !call.y_bf16) {
    if (call.out_w == kRowPairWidth || call.out_w == 2 * kRowPairWidth)
      return run_grouped_rows(call, t, next, jr, kNarrowRows / call.out_w, f32_gemm_28x16_avx512);
    return run_blocks(call, t, next, jr, (call.out_w + kNarrowRows - 1) / kNarrowRows, f32_gemm_28x16_avx512);
  }
  const GemmMicrokernel kernel = call.w->precision == Precision::bf16 ? bf16_gemm_14x32_avx512bf16 : f32_gemm_14x32_avx512;
  if (call.out_w == kRowPairWidth) return run_grouped_rows(call, t, next, jr, 2, kernel);
  run_blocks(call, t, next, jr, blocks, kernel);
}

}  // namespace

bool conv_row_supported(Isa isa, Precision precision) {
  return isa == Isa::avx512 && (precision == Precision::f32 || (precision == Precision::bf16 && isa_supports_bf16()));
}

namespace {
void rows_in_words(const ConvRowCall& call, size_t per_word);
void listed_outputs(const ConvRowCall& call);
void split_by_kept_taps(const ConvRowCall& call);
}  // namespace

void conv_rows(const ConvRowCall& call) {
  const PackedB& w = *call.w;
  if (!conv_row_supported(w.isa, w.precision))
    throw Error("conv_rows: needs f32 weights packed for AVX-512, or bf16 ones on AVX512-BF16");
  const size_t taps = call.kernel_h * call.kernel_w;
  if (w.k != taps * call.channels || call.n0 % w.nr != 0 || call.n0 + call.n > w.n)
    throw Error("conv_rows: weights do not match the conv");
  // bf16: x holds pair words, so every offset below counts words and a tap's channels must be
  // whole pairs; the weights of a tap are channels / 2 pair rows of the panel.
  const size_t per_word = w.precision == Precision::bf16 ? 2 : 1;
  if (per_word == 2 && (!call.x_bf16 || call.channels % 2 != 0 || call.pixel_floats % 2 != 0 ||
                        call.tap_row_floats % 2 != 0 || call.row_step_floats % 2 != 0))
    throw Error("conv_rows: bf16 needs bf16 rows and an even number of channels");
  if (call.kept_channels && (per_word != 1 || call.kept == 0 || call.kept > call.channels ||
                             call.kept_channels[call.kept - 1] >= call.channels))
    throw Error("conv_rows: kept channels need f32 weights and indices below the channels");
  if (call.y_bf16 && (per_word != 2 || taps > kMaxTapsPerCall))
    throw Error("conv_rows: a bf16 y needs bf16 weights and at most " + std::to_string(kMaxTapsPerCall) + " taps");
  if (call.outputs) {
    if (per_word != 1 || call.y_bf16) throw Error("conv_rows: listed outputs need f32 weights and a float y");
    for (size_t i = 0; i < call.output_count; ++i)
      if (call.outputs[i] >= call.rows * call.out_w || (i > 0 && call.outputs[i] <= call.outputs[i - 1]))
        throw Error("conv_rows: listed outputs must increase and stay below rows x out_w");
    if (call.kept_pixels) {
      const size_t pixel = call.pixel_floats ? call.pixel_floats : call.channels;
      if (!call.scratch || call.row_step_floats % pixel != 0 || call.tap_row_floats % pixel != 0)
        throw Error("conv_rows: kept pixels need a scratch and rows a whole number of pixels apart");
      if (taps <= kMaxTapsPerCall) return split_by_kept_taps(call);
    }
    return listed_outputs(call);
  }
  if (per_word == 2) {  // the same call in pair words
    ConvRowCall words = call;
    words.x = reinterpret_cast<const float*>(call.x_bf16);
    words.x_bf16 = nullptr;
    words.row_step_floats /= 2;
    return rows_in_words(words, per_word);
  }
  rows_in_words(call, 1);
}

namespace {

// conv_rows with x and its steps in 4-byte words: floats, or pairs of bf16 values (per_word 2;
// tap_row_floats and pixel_floats still count values).
void rows_in_words(const ConvRowCall& call, size_t per_word) {
  const PackedB& w = *call.w;
  const size_t taps = call.kernel_h * call.kernel_w;
  const GemmBlocking blocking = gemm_blocking(w.isa, w.precision);
  const size_t mr = blocking.mr, nr = w.nr;
  // Positions in blocks of nearly equal height (a 56-wide row: 4 x 14; 7 wide: one block of 7).
  const size_t blocks = (call.out_w + mr - 1) / mr;
  GemmTileArgs t;
  const size_t pixel = (call.pixel_floats ? call.pixel_floats : call.channels) / per_word;
  const size_t tap_words = call.channels / per_word;  // one tap's weights: tap_words rows of nr
  t.kc = call.channels;
  t.a_stride = call.stride_w * pixel;
  t.c_stride = call.y_stride;
  t.c_bf16_stride = call.y_stride;
  t.residual_stride = call.y_stride;
  t.activation = call.activation;
  t.k_steps = call.kept_channels;
  t.k_step_count = call.kept;
  // A bf16 y holds no partial sums: every tap in one call.
  const size_t per_call =
      call.y_bf16 ? taps
                  : std::min(kMaxTapsPerCall, call.taps_per_call ? call.taps_per_call
                                                                 : conv_rows_taps_per_call(call.channels / per_word, taps, nr));
  std::array<ptrdiff_t, kMaxTapsPerCall> offsets{};
  t.tap_offsets = offsets.data();
  // With every tap in one call and no dilation, a kernel row's taps are one run: a position's
  // window row is kernel_w * channels floats in a row, and so are the row's weights. Fewer,
  // longer runs (a stem on 3 channels: 7 runs of 21 steps instead of 49 of 3).
  if (per_call >= taps && call.dilation_w == 1 && pixel == tap_words && !call.kept_channels) {
    t.kc = call.kernel_w * call.channels;
    t.taps = call.kernel_h;
    for (size_t ki = 0; ki < call.kernel_h; ++ki) offsets[ki] = ptrdiff_t(ki * call.tap_row_floats / per_word);
    t.accumulate = false;
    t.finish = true;
    for (size_t jr = 0; jr < call.n; jr += nr) {
      t.n = std::min(nr, call.n - jr);
      t.b = w.panel((call.n0 + jr) / nr);
      t.bias = call.bias ? call.bias + jr : nullptr;
      const float* next = jr + nr < call.n ? w.panel((call.n0 + jr + nr) / nr) : nullptr;
      run_rows(call, t, next, blocks, jr);
    }
    return;
  }
  for (size_t jr = 0; jr < call.n; jr += nr) {
    t.n = std::min(nr, call.n - jr);
    const float* panel = w.panel((call.n0 + jr) / nr);
    t.bias = call.bias ? call.bias + jr : nullptr;
    const float* next_panel = jr + nr < call.n ? w.panel((call.n0 + jr + nr) / nr) : nullptr;
    for (size_t tap0 = 0; tap0 < taps; tap0 += per_call) {
      t.taps = std::min(per_call, taps - tap0);
      for (size_t i = 0; i < t.taps; ++i) {
        const size_t ki = (tap0 + i) / call.kernel_w, kj = (tap0 + i) % call.kernel_w;
        offsets[i] = ptrdiff_t(ki * call.tap_row_floats / per_word + kj * call.dilation_w * pixel);
      }
      t.b = panel + tap0 * tap_words * nr;
      // The first call of these taps streams their weights; it asks for the next ones.
      const float* next = tap0 + t.taps < taps ? t.b + t.taps * tap_words * nr : next_panel;
      t.accumulate = tap0 > 0;
      t.finish = tap0 + t.taps == taps;
      run_rows(call, t, next, blocks, jr);
    }
  }
}

// call.outputs only: per panel, the listed outputs up to 14 to a call, each row of A at its
// own window (GemmTileArgs::a_rows). C goes to a tile on the stack and then to each output's
// place, and so does the residual the other way; every tap adds up in registers (in calls of
// at most kMaxTapsPerCall that accumulate in the stack tile).
void listed_outputs(const ConvRowCall& call) {
  const PackedB& w = *call.w;
  const size_t taps = call.kernel_h * call.kernel_w, nr = w.nr;
  const size_t mr = gemm_blocking(w.isa, w.precision).mr;
  constexpr size_t kMaxMR = 14, kMaxNR = 32;
  if (mr > kMaxMR || nr > kMaxNR) throw Error("conv_rows: listed outputs need the 14 x 32 kernel");
  const size_t pixel = call.pixel_floats ? call.pixel_floats : call.channels;
  // As rows_in_words: with no dilation, pixels one run of channels and every channel kept, a
  // kernel row's taps are one run of kernel_w * channels steps.
  const bool row_runs = call.dilation_w == 1 && pixel == call.channels && !call.kept_channels;
  const size_t runs = row_runs ? call.kernel_h : taps, run_steps = row_runs ? call.kernel_w * call.channels : call.channels;
  alignas(64) float c[kMaxMR * kMaxNR];
  alignas(64) float residual[kMaxMR * kMaxNR];
  const float* rows[kMaxMR];
  std::array<ptrdiff_t, kMaxTapsPerCall> offsets{};
  GemmTileArgs t;
  t.kc = run_steps;
  t.a_rows = rows;
  t.tap_offsets = offsets.data();
  t.k_steps = call.kept_channels;
  t.k_step_count = call.kept;
  t.c = c;
  t.c_stride = nr;
  t.residual_stride = nr;
  t.activation = call.activation;
  for (size_t jr = 0; jr < call.n; jr += nr) {
    t.n = std::min(nr, call.n - jr);
    const float* panel = w.panel((call.n0 + jr) / nr);
    const float* next_panel = jr + nr < call.n ? w.panel((call.n0 + jr + nr) / nr) : nullptr;
    t.bias = call.bias ? call.bias + jr : nullptr;
    for (size_t i0 = 0; i0 < call.output_count; i0 += mr) {
      t.m = std::min(mr, call.output_count - i0);
      for (size_t r = 0; r < t.m; ++r) {
        const size_t q = call.outputs[i0 + r], row = q / call.out_w, o = q % call.out_w;
        rows[r] = call.x + row * call.row_step_floats + o * call.stride_w * pixel;
        if (call.residual) std::copy_n(call.residual + q * call.y_stride + jr, t.n, residual + r * nr);
      }
      t.residual = call.residual ? residual : nullptr;
      for (size_t run0 = 0; run0 < runs; run0 += kMaxTapsPerCall) {
        t.taps = std::min(kMaxTapsPerCall, runs - run0);
        for (size_t i = 0; i < t.taps; ++i) {
          const size_t ki = row_runs ? run0 + i : (run0 + i) / call.kernel_w, kj = row_runs ? 0 : (run0 + i) % call.kernel_w;
          offsets[i] = ptrdiff_t(ki * call.tap_row_floats + kj * call.dilation_w * pixel);
        }
        t.b = panel + run0 * run_steps * nr;
        // The panel's first call streams its weights and asks for the next panel's.
        t.b_next = i0 == 0 && run0 + t.taps == runs ? next_panel : nullptr;
        t.accumulate = run0 > 0;
        t.finish = run0 + t.taps == runs;
        f32_gemm_14x32_avx512(t);
      }
      for (size_t r = 0; r < t.m; ++r) std::copy_n(c + r * nr, t.n, call.y + call.outputs[i0 + r] * call.y_stride + jr);
    }
  }
}

// scratch.windows: the listed outputs' windows, as pixels from x (the pixel of a window's tap
// of kernel row 0, column 0), without a division per output: outputs increase, so their row
// only moves on.
void list_windows(const ConvRowCall& call, size_t pixel) {
  std::vector<uint32_t>& windows = call.scratch->windows;
  windows.resize(call.output_count);
  const size_t row_pixels = call.row_step_floats / pixel;
  size_t row_end = call.out_w, row_at = 0;  // the first output past the current row, and its row's window 0
  for (size_t i = 0; i < call.output_count; ++i) {
    const size_t q = call.outputs[i];
    while (q >= row_end) row_end += call.out_w, row_at += row_pixels;
    windows[i] = uint32_t(row_at + (q - (row_end - call.out_w)) * call.stride_w);
  }
}

// Pixels from a window to its tap `tap`.
size_t tap_pixels(const ConvRowCall& call, size_t tap, size_t pixel) {
  return tap / call.kernel_w * (call.tap_row_floats / pixel) + tap % call.kernel_w * call.dilation_w;
}

using TapCounts = std::array<size_t, kMaxTapsPerCall>;
void tap_by_tap(const ConvRowCall& call, const TapCounts& kept);

// call.outputs with call.kept_pixels (at most kMaxTapsPerCall taps): an output whose taps that
// read kept pixels cost less tap by tap (conv_rows_tap_by_tap_cost each) than all of its taps in
// registers goes tap by tap; the others stay in registers (listed_outputs).
void split_by_kept_taps(const ConvRowCall& call) {
  const size_t pixel = call.pixel_floats ? call.pixel_floats : call.channels, taps = call.kernel_h * call.kernel_w;
  std::array<size_t, kMaxTapsPerCall> offsets{};
  for (size_t tap = 0; tap < taps; ++tap) offsets[tap] = tap_pixels(call, tap, pixel);
  ConvRowScratch& scratch = *call.scratch;
  const double cost = conv_rows_tap_by_tap_cost(call.kept_channels ? call.kept : call.channels);
  list_windows(call, pixel);
  scratch.in_registers.clear();
  scratch.by_tap.clear();
  TapCounts kept{};
  size_t sparse = 0;
  for (size_t i = 0; i < call.output_count; ++i) {
    const unsigned char* window = call.kept_pixels + scratch.windows[i];
    size_t count = 0;
    for (size_t tap = 0; tap < taps; ++tap) count += window[offsets[tap]];
    if (double(count) * cost >= double(taps)) {
      scratch.in_registers.push_back(call.outputs[i]);
      continue;
    }
    for (size_t tap = 0; tap < taps; ++tap) kept[tap] += window[offsets[tap]];
    scratch.by_tap.push_back(call.outputs[i]);
    scratch.windows[sparse++] = scratch.windows[i];  // i >= sparse: not read again
  }
  scratch.windows.resize(sparse);
  ConvRowCall part = call;
  if (!scratch.in_registers.empty()) {
    part.outputs = scratch.in_registers.data(), part.output_count = scratch.in_registers.size();
    listed_outputs(part);
  }
  if (sparse > 0) {
    part.outputs = scratch.by_tap.data(), part.output_count = sparse;
    tap_by_tap(part, kept);
  }
}

// call.outputs with call.kept_pixels, tap by tap: per panel, the listed outputs' sums start at 0
// in scratch.sums (one row of nr per output); per tap, the outputs whose tap reads a kept pixel go
// up to 14 to a call that adds that tap's products to their rows where they lie
// (GemmTileArgs::c_rows). A last pass of calls with no k steps
// adds the bias and residual, applies the activation and sends each output to its place in y.
void tap_by_tap(const ConvRowCall& call, const TapCounts& kept) {
  const PackedB& w = *call.w;
  const size_t taps = call.kernel_h * call.kernel_w, nr = w.nr, count = call.output_count;
  const size_t mr = gemm_blocking(w.isa, w.precision).mr;
  constexpr size_t kMaxMR = 14, kMaxNR = 32;
  if (mr > kMaxMR || nr > kMaxNR) throw Error("conv_rows: listed outputs need the 14 x 32 kernel");
  const size_t pixel = call.pixel_floats ? call.pixel_floats : call.channels;
  const std::vector<uint32_t>& windows = call.scratch->windows;  // listed by split_by_kept_taps
  call.scratch->sums.reserve(count * nr);
  float* partial = call.scratch->sums.data();
  alignas(64) float residual[kMaxMR * kMaxNR];
  const float* rows[kMaxMR];
  float* c_rows[kMaxMR];
  GemmTileArgs t;
  t.a_rows = rows;
  t.c_stride = nr;
  t.residual_stride = nr;
  t.activation = call.activation;
  t.accumulate = true;
  for (size_t jr = 0; jr < call.n; jr += nr) {
    t.n = std::min(nr, call.n - jr);
    const float* panel = w.panel((call.n0 + jr) / nr);
    const float* next_panel = jr + nr < call.n ? w.panel((call.n0 + jr + nr) / nr) : nullptr;
    std::fill_n(partial, count * nr, 0.0f);
    t.kc = call.channels;
    t.k_steps = call.kept_channels;
    t.k_step_count = call.kept;
    t.finish = false;
    t.bias = nullptr;
    t.residual = nullptr;
    t.c_rows = c_rows;
    for (size_t tap = 0; tap < taps; ++tap) {
      const size_t offset = tap_pixels(call, tap, pixel);
      t.b = panel + tap * call.channels * nr;
      // The tap's first call streams its weights and asks for the next tap's (or panel's).
      const float* next = tap + 1 < taps ? t.b + call.channels * nr : next_panel;
      // The tap's outputs in blocks of nearly equal height: a short last block (one row of 14)
      // would wait on its FMAs' latency.
      size_t blocks = (kept[tap] + mr - 1) / mr, left = kept[tap], m = 0;
      const auto height = [&] { return blocks ? (left + blocks - 1) / blocks : 0; };
      size_t rows_now = height();
      const auto run = [&] {
        t.m = m;
        t.b_next = next;
        next = nullptr;
        f32_gemm_14x32_avx512(t);
        left -= m, --blocks, m = 0;
        rows_now = height();
      };
      for (size_t i = 0; i < count; ++i) {
        const size_t from = windows[i] + offset;
        if (!call.kept_pixels[from]) continue;
        rows[m] = call.x + from * pixel;
        c_rows[m] = partial + i * nr;
        if (++m == rows_now || m == mr) run();
      }
      if (m > 0) run();  // none where the counts are right
    }
    // The epilogue: C as the sums, no k steps.
    t.c_rows = nullptr;
    t.kc = 0;
    t.k_steps = nullptr;
    t.k_step_count = 0;
    t.b_next = nullptr;
    t.finish = true;
    t.bias = call.bias ? call.bias + jr : nullptr;
    for (size_t i0 = 0; i0 < count; i0 += mr) {
      t.m = std::min(mr, count - i0);
      t.c = partial + i0 * nr;
      if (call.residual) {
        for (size_t r = 0; r < t.m; ++r)
          std::copy_n(call.residual + call.outputs[i0 + r] * call.y_stride + jr, t.n, residual + r * nr);
        t.residual = residual;
      }
      f32_gemm_14x32_avx512(t);
      for (size_t r = 0; r < t.m; ++r) std::copy_n(t.c + r * nr, t.n, call.y + call.outputs[i0 + r] * call.y_stride + jr);
    }
  }
}

}  // namespace

}  // namespace grove::kernels
