#pragma once
// Sliding-window arithmetic shared by Conv, ConvTranspose and the pools: reading and
// validating kernel/strides/dilations/pads/auto_pad, and the output extent of every spatial
// dim. The planner reuses it to map an output region back to the input region it reads.
#include <cstdint>
#include <span>
#include <vector>

#include "graph/graph.h"

namespace grove {

enum class AutoPad { notset, same_upper, same_lower, valid };

// Reads auto_pad; throws for values the spec does not define.
AutoPad read_auto_pad(const Node& node);

// Per spatial dim (the dims after N and C). For ConvTranspose `input` is X's extent and
// `output` Y's; pads then crop Y out of the full transposed result.
struct WindowGeometry {
  std::vector<int64_t> input, output;
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads_begin, pads_end;  // pads_end may be negative for ConvTranspose

  size_t rank() const { return input.size(); }
  // The extent one window covers: (kernel - 1) * dilation + 1.
  int64_t effective_kernel(size_t d) const { return (kernel[d] - 1) * dilations[d] + 1; }
};

// Reads an ints attribute of `rank` entries that are all >= min_value; `fallback` fills
// every entry when the attribute is absent (or empty).
std::vector<int64_t> read_spatial_attr(const Node& node, const char* name, size_t rank, int64_t fallback,
                                       int64_t min_value);

// Conv and pools. `kernel` comes from the weights or the kernel_shape attribute.
// ceil_mode follows ONNX/PyTorch: a window may run past the end, but the last window must
// start inside the input or its left padding.
WindowGeometry window_geometry(const Node& node, std::span<const int64_t> input_spatial,
                               std::vector<int64_t> kernel, bool ceil_mode);

// ConvTranspose: output_shape (when given) wins and the pads are derived from it; else
// auto_pad SAME_* gives input * stride; else the pads and output_padding decide.
WindowGeometry transposed_geometry(const Node& node, std::span<const int64_t> input_spatial,
                                   std::vector<int64_t> kernel);

// One kernel position of a window that lands inside the plane it reads or writes.
struct Tap {
  int64_t index;   // row-major position in the kernel (matches the weight layout)
  int64_t offset;  // row-major element offset in the plane
};

// Lists the taps of the window anchored at `pos`: coordinate = pos * stride - pad_begin +
// tap * dilation, kept when inside `plane`. Conv and pools anchor at an output position and
// read the input plane; ConvTranspose anchors at an input position and writes the output plane.
void window_taps(const WindowGeometry& g, std::span<const int64_t> pos, std::span<const int64_t> plane,
                 std::vector<Tap>& taps);

// Steps `index` through the box [0, extent) in row-major order; false after the last one.
inline bool next_index(std::vector<int64_t>& index, std::span<const int64_t> extent) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < extent[d]) return true;
    index[d] = 0;
  }
  return false;
}

}  // namespace grove
