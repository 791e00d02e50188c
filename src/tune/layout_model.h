#pragma once
// The second performance model of paper 003: the time of a layout change, learned from
// measured Transposes, as the conv model learns the primitives. A value [1, C, H, W] moves
// between the three layouts a conv runs in (NCHW, channels-last NHWC, channel-blocked
// [1, C/b, H, W, b]); each direction is one output of the model, a Transpose (after a view for
// the blocked layout) whose time depends on the shape and the threads in ways one price per
// element misses (the inner dimension it writes, whether a tile's rows fit in cache).
#include <string>
#include <vector>

#include "grove/tensor.h"
#include "tune/perf_model.h"

namespace grove::tune {

enum class ValueLayout { nchw, channels_last, blocked };

// The model's outputs, in order: nchw_to_nhwc, nhwc_to_nchw, nchw_to_blocked, blocked_to_nchw,
// nhwc_to_blocked, blocked_to_nhwc.
const std::vector<std::string>& layout_changes();
// The output for a change from `from` to `to`; -1 when they are the same layout.
int layout_change(ValueLayout from, ValueLayout to);

// What the model reads about a change of an NCHW-shaped value [N, C, H, W] at `threads`.
std::vector<double> layout_features(const Shape& nchw, int threads);

// One measured change (grove tune --sample-layouts): the summed time of the Transpose's tiles.
struct LayoutRow {
  std::string machine;
  int threads = 1;
  std::string change;  // a name of layout_changes()
  Shape shape;         // [N, C, H, W] of the value as NCHW
  double us = 0;
};

// The CSV grove tune --sample-layouts appends to (a header line first; Error naming the line
// for anything else), and one sample per (shape, threads) with a time per change measured.
void append_layout_rows(const std::string& path, const std::vector<LayoutRow>& rows);
std::vector<LayoutRow> read_layout_csv(const std::string& path);
std::vector<PerfSample> layout_samples(const std::vector<LayoutRow>& rows);

}  // namespace grove::tune
