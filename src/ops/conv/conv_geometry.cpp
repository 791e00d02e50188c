#include "ops/conv/conv_geometry.h"

#include <string>

namespace grove {
namespace {

// Python-style floor division: the spec's pad formulas are written for it, and
// ConvTranspose's total padding can be negative when output_shape asks for extra rows.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::string dims_str(std::span<const int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Explicit pads: 2 * rank entries, begins then ends, all >= 0.
void read_pads(const Node& node, WindowGeometry& g) {
  size_t rank = g.rank();
  std::vector<int64_t> pads = node.attr_ints("pads");
  if (pads.empty()) pads.assign(2 * rank, 0);
  if (pads.size() != 2 * rank)
    throw Error(node.describe() + ": pads has " + std::to_string(pads.size()) + " entries, expected " +
                std::to_string(2 * rank) + " for " + std::to_string(rank) + " spatial dims");
  for (int64_t p : pads)
    if (p < 0) throw Error(node.describe() + ": pads must not be negative, got " + dims_str(pads));
  g.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank));
  g.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
}

// Splits a total padding between the two sides; SAME_UPPER puts the odd one at the end.
void split_padding(int64_t total, bool extra_at_end, int64_t& begin, int64_t& end) {
  int64_t half = floor_div(total, 2);
  begin = extra_at_end ? half : total - half;
  end = total - begin;
}

WindowGeometry common_attrs(const Node& node, std::span<const int64_t> input_spatial, std::vector<int64_t> kernel) {
  size_t rank = input_spatial.size();
  if (rank == 0) throw Error(node.describe() + ": input needs at least one spatial dim (N x C x D1 ...)");
  WindowGeometry g;
  g.input.assign(input_spatial.begin(), input_spatial.end());
  if (kernel.size() != rank)
    throw Error(node.describe() + ": kernel has " + std::to_string(kernel.size()) + " dims, input has " +
                std::to_string(rank) + " spatial dims");
  for (int64_t k : kernel)
    if (k < 1) throw Error(node.describe() + ": kernel dims must be positive, got " + dims_str(kernel));
  g.kernel = std::move(kernel);
  g.strides = read_spatial_attr(node, "strides", rank, 1, 1);
  g.dilations = read_spatial_attr(node, "dilations", rank, 1, 1);
  return g;
}

}  // namespace

AutoPad read_auto_pad(const Node& node) {
  std::string s = node.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::notset;
  if (s == "SAME_UPPER") return AutoPad::same_upper;
  if (s == "SAME_LOWER") return AutoPad::same_lower;
  if (s == "VALID") return AutoPad::valid;
  throw Error(node.describe() + ": unknown auto_pad '" + s + "'");
}

std::vector<int64_t> read_spatial_attr(const Node& node, const char* name, size_t rank, int64_t fallback,
                                       int64_t min_value) {
  std::vector<int64_t> v = node.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(rank, fallback);
  if (v.size() != rank)
    throw Error(node.describe() + ": " + name + " has " + std::to_string(v.size()) + " entries, expected " +
                std::to_string(rank) + " (one per spatial dim)");
  for (int64_t x : v)
    if (x < min_value)
      throw Error(node.describe() + ": " + name + " must be >= " + std::to_string(min_value) + ", got " + dims_str(v));
  return v;
}

WindowGeometry window_geometry(const Node& node, std::span<const int64_t> input_spatial,
                               std::vector<int64_t> kernel, bool ceil_mode) {
  WindowGeometry g = common_attrs(node, input_spatial, std::move(kernel));
  size_t rank = g.rank();
  AutoPad mode = read_auto_pad(node);
  g.output.resize(rank);
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  if (mode == AutoPad::notset) read_pads(node, g);

  for (size_t d = 0; d < rank; ++d) {
    int64_t in = g.input[d], s = g.strides[d], ek = g.effective_kernel(d);
    if (mode == AutoPad::same_upper || mode == AutoPad::same_lower) {
      // SAME: out = ceil(in / stride), padded just enough for the last window.
      g.output[d] = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (g.output[d] - 1) * s + ek - in);
      split_padding(total, mode == AutoPad::same_upper, g.pads_begin[d], g.pads_end[d]);
      continue;
    }
    int64_t span = in + g.pads_begin[d] + g.pads_end[d] - ek;
    if (span < 0)
      throw Error(node.describe() + ": the window (" + std::to_string(ek) + " with dilation) is larger than the padded input (" +
                  std::to_string(in + g.pads_begin[d] + g.pads_end[d]) + ") on spatial dim " + std::to_string(d));
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // A window starting in the right padding would see only padding: PyTorch and ONNX drop it.
    if (ceil_mode && (out - 1) * s >= in + g.pads_begin[d]) --out;
    g.output[d] = out;
  }
  return g;
}

WindowGeometry transposed_geometry(const Node& node, std::span<const int64_t> input_spatial,
                                   std::vector<int64_t> kernel) {
  WindowGeometry g = common_attrs(node, input_spatial, std::move(kernel));
  size_t rank = g.rank();
  AutoPad mode = read_auto_pad(node);
  std::vector<int64_t> output_padding = read_spatial_attr(node, "output_padding", rank, 0, 0);
  std::vector<int64_t> output_shape = node.attr_ints("output_shape");
  // Some exporters give the full N x C x ... shape; only the spatial tail matters.
  if (output_shape.size() == rank + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != rank)
    throw Error(node.describe() + ": output_shape " + dims_str(output_shape) + " does not match " +
                std::to_string(rank) + " spatial dims");
  for (int64_t o : output_shape)
    if (o < 0) throw Error(node.describe() + ": output_shape must not be negative, got " + dims_str(output_shape));

  g.output.resize(rank);
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  bool derive_pads = !output_shape.empty() || mode == AutoPad::same_upper || mode == AutoPad::same_lower;
  if (mode == AutoPad::notset && output_shape.empty()) read_pads(node, g);

  for (size_t d = 0; d < rank; ++d) {
    int64_t full = g.strides[d] * (g.input[d] - 1) + output_padding[d] + g.effective_kernel(d);
    if (derive_pads) {
      g.output[d] = !output_shape.empty() ? output_shape[d] : g.input[d] * g.strides[d];
      split_padding(full - g.output[d], mode == AutoPad::same_upper, g.pads_begin[d], g.pads_end[d]);
    } else {
      g.output[d] = full - g.pads_begin[d] - g.pads_end[d];
      if (g.output[d] < 0)
        throw Error(node.describe() + ": pads " + dims_str(node.attr_ints("pads")) + " crop more than the output has");
    }
  }
  return g;
}

void window_taps(const WindowGeometry& g, std::span<const int64_t> pos, std::span<const int64_t> plane,
                 std::vector<Tap>& taps) {
  taps.clear();
  size_t rank = g.rank();
  std::vector<int64_t> tap(rank, 0);
  int64_t index = 0;
  do {
    int64_t offset = 0;
    bool inside = true;
    for (size_t d = 0; d < rank && inside; ++d) {
      int64_t c = pos[d] * g.strides[d] - g.pads_begin[d] + tap[d] * g.dilations[d];
      inside = c >= 0 && c < plane[d];
      offset = offset * plane[d] + c;
    }
    if (inside) taps.push_back({index, offset});
    ++index;
  } while (next_index(tap, g.kernel));
}

}  // namespace grove
