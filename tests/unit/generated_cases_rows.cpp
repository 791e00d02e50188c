// Generators of the ops that normalise along some dims (Softmax and its kin, LayerNorm,
// RMSNorm, BatchNorm of rank 2 to 6, InstanceNorm, GroupNorm) and of the data-movement ops (Transpose,
// Concat, Slice of both opsets, the reshapes, Resize and Upsample).
#include <algorithm>
#include <numeric>

#include "generated_cases.h"

namespace grove::gen {
namespace {

int64_t any_axis(Draw& d, size_t rank) {  // negative half the time
  const auto r = static_cast<int64_t>(rank);
  const int64_t axis = d.between(0, r - 1);
  return d.chance(0.5) ? axis - r : axis;
}

Case softmax(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(1, 6)), 1200);
  // Before opset 13 the row is every dim from axis on; from 13 it is one axis.
  Case c{node(op, d.chance(0.4) ? 11 : 13, 1), {d.f32(s, -4, 4)}, {false}, 2e-6};
  if (d.chance(0.7)) set_attr(c.node, "axis", any_axis(d, s.size()));
  if (op == "Hardmax")  // ties: the first of equal values wins
    for (float& v : c.inputs[0].span<float>()) v = static_cast<float>(d.between(-2, 2));
  return c;
}

Case layernorm(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(1, 5)), 1200);
  const bool rms = op == "RMSNormalization";
  // float32 rows: a row whose spread is small against its mean loses digits in x - mean, as
  // in ONNX Runtime's kernel; the reference sums in double.
  Case c{node(op, rms ? 23 : 17, rms ? 2 : 3), {}, {}, 2e-4};
  int64_t axis = -1;
  if (d.chance(0.6)) set_attr(c.node, "axis", axis = any_axis(d, s.size()));
  if (d.chance(0.5)) set_attr(c.node, "epsilon", static_cast<float>(d.pick(std::vector<double>{1e-5, 1e-3, 0.1})));
  const size_t first = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(s.size()) : axis);
  const Shape normalized(s.begin() + static_cast<std::ptrdiff_t>(first), s.end());
  // LayerNorm's Scale and B broadcast to the normalised dims; RMSNorm's scale is all of them or one value.
  const Shape scale = d.chance(0.8) ? normalized : rms ? Shape{1} : broadcast_from(d, normalized);
  c.inputs = {d.f32(s, -3, 3), d.f32(scale)};
  c.constant = {false, d.chance(0.7)};
  if (!rms) {
    if (d.chance(0.7)) c.inputs.push_back(d.f32(normalized)), c.constant.push_back(c.constant[1]);
    else c.node.inputs.pop_back();
  }
  return c;
}

// Inference BatchNorm on [N, C] (after a Gemm or Flatten) up to [N, C, D1..D4].
Case batchnorm(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(2, 6)), 1500);
  const Shape ch = {s[1]};
  Case c{node(op, d.pick(std::vector<int>{9, 14, 15}), 5), {}, {}, 1e-5};
  c.inputs = {d.f32(s), d.f32(ch, 0.5, 1.5), d.f32(ch), d.f32(ch), d.f32(ch, 0.1, 2)};
  const bool constants = d.chance(0.8);
  c.constant = {false, constants, constants, constants, constants};
  if (d.chance(0.5)) set_attr(c.node, "epsilon", static_cast<float>(d.pick(std::vector<double>{1e-5, 1e-3, 0.1})));
  if (d.chance(0.3)) set_attr(c.node, "momentum", 0.9f);
  return c;
}

Case instancenorm(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(3, 5)), 1500);
  Case c{node(op, 6, 3), {d.f32(s), d.f32({s[1]}, 0.5, 1.5), d.f32({s[1]})}, {false, true, true}, 1e-5};
  if (d.chance(0.5)) set_attr(c.node, "epsilon", static_cast<float>(d.pick(std::vector<double>{1e-5, 1e-3, 0.1})));
  return c;
}

// GroupNormalization at opset 18 (scale and bias per group) and 21 (per channel), ranks 2-5.
Case groupnorm(Draw& d, const std::string& op) {
  Shape s = d.shape(static_cast<size_t>(d.between(2, 5)), 1500);
  const int64_t groups = d.pick(std::vector<int64_t>{1, 2, 3, 4});
  s[1] = groups * d.between(1, 6);
  const int opset = d.chance(0.5) ? 18 : 21;
  const Shape params = {opset >= 21 ? s[1] : groups};
  Case c{node(op, opset, 3), {d.f32(s, -3, 3), d.f32(params, 0.5, 1.5), d.f32(params)}, {}, 2e-5};
  const bool constants = d.chance(0.7);
  c.constant = {false, constants, constants};
  set_attr(c.node, "num_groups", groups);
  if (d.chance(0.5)) set_attr(c.node, "epsilon", static_cast<float>(d.pick(std::vector<double>{1e-5, 1e-3, 0.1})));
  return c;
}

Case transpose(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(0, 6)), 1500);
  Case c{node(op, 13, 1), {d.f32(s)}, {false}, 0};
  if (d.chance(0.8) && !s.empty()) {
    std::vector<int64_t> perm(s.size());
    std::iota(perm.begin(), perm.end(), 0);
    if (d.chance(0.5)) {
      for (size_t i = perm.size(); i-- > 1;) std::swap(perm[i], perm[static_cast<size_t>(d.between(0, static_cast<int64_t>(i)))]);
    } else {
      // Runs of adjacent dims moved whole, as the layout reorders do ([N, H, W, C/b, b] ->
      // [N, C/b, H, W, b]): the tile rule merges such runs into fewer dims.
      std::vector<std::vector<int64_t>> runs;
      for (int64_t dim : perm) {
        if (runs.empty() || d.chance(0.4)) runs.emplace_back();
        runs.back().push_back(dim);
      }
      for (size_t i = runs.size(); i-- > 1;) std::swap(runs[i], runs[static_cast<size_t>(d.between(0, static_cast<int64_t>(i)))]);
      perm.clear();
      for (const auto& run : runs) perm.insert(perm.end(), run.begin(), run.end());
    }
    set_attr(c.node, "perm", perm);
  }
  return c;
}

Case concat(Draw& d, const std::string& op) {
  const size_t rank = static_cast<size_t>(d.between(1, 5));
  const Shape s = d.shape(rank, 600);
  const int64_t axis = any_axis(d, rank);
  const size_t at = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
  const size_t count = static_cast<size_t>(d.between(1, 4));
  Case c{node(op, 13, count), {}, {}, 0};
  set_attr(c.node, "axis", axis);
  const bool ints = d.chance(0.2);
  for (size_t i = 0; i < count; ++i) {
    Shape part = s;
    part[at] = d.between(count > 1 ? 0 : 1, 9);  // a part may be empty along the axis
    c.inputs.push_back(ints ? d.ints(DType::i64, part, -9, 9) : d.f32(part));
    c.constant.push_back(d.chance(0.2));
  }
  return c;
}

Case slice(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(1, 5)), 1500);
  const auto rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> axes, starts, ends, steps;
  for (int64_t a = 0; a < rank; ++a) {
    if (!d.chance(0.6)) continue;
    const int64_t n = s[static_cast<size_t>(a)];
    int64_t step = d.chance(0.7) ? 1 : d.pick(std::vector<int64_t>{2, 3, -1, -2});
    int64_t b = d.between(-n - 2, n + 2), e = d.between(-n - 2, n + 2);
    if (d.chance(0.15)) e = step > 0 ? INT64_MAX : INT64_MIN;  // the exporters' "to the end"
    axes.push_back(d.chance(0.5) ? a - rank : a);
    starts.push_back(b), ends.push_back(e), steps.push_back(step);
  }
  if (axes.empty()) axes = {0}, starts = {0}, ends = {s[0]}, steps = {1};
  if (d.chance(0.25)) {  // opset 9: attributes, steps of 1
    Case c{node(op, 9, 1), {d.f32(s)}, {false}, 0};
    for (auto& st : steps) st = 1;
    for (size_t i = 0; i < starts.size(); ++i) {
      if (ends[i] == INT64_MIN) ends[i] = INT64_MAX;
    }
    set_attr(c.node, "starts", starts);
    set_attr(c.node, "ends", ends);
    if (d.chance(0.8)) set_attr(c.node, "axes", axes);
    else {  // without axes they are 0, 1, ...
      for (size_t i = 0; i < starts.size(); ++i) axes[i] = static_cast<int64_t>(i);
    }
    return c;
  }
  Case c{node(op, 13, 5), {d.f32(s), i64s(starts), i64s(ends), i64s(axes), i64s(steps)}, {false, true, true, true, true}, 0};
  if (d.chance(0.3) && std::all_of(steps.begin(), steps.end(), [](int64_t x) { return x == 1; })) {
    c.node.inputs.pop_back(), c.inputs.pop_back(), c.constant.pop_back();
  }
  return c;
}

Case reshape(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(op == "Flatten" ? 0 : 1, 5)), 1500);
  const auto rank = static_cast<int64_t>(s.size());
  if (op == "Flatten") {
    Case c{node(op, 13, 1), {d.f32(s)}, {false}, 0};
    if (d.chance(0.8)) set_attr(c.node, "axis", d.between(-rank, rank));
    return c;
  }
  if (op == "Reshape") {
    // Split or merge neighbouring dims; 0 copies a dim and -1 takes what is left.
    std::vector<int64_t> target;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && d.chance(0.3)) {
        target.push_back(s[i] * s[i + 1]);
        ++i;
      } else target.push_back(s[i]);
    }
    if (d.chance(0.3)) target.insert(target.begin() + d.between(0, static_cast<int64_t>(target.size())), 1);
    if (!target.empty() && d.chance(0.4)) target[static_cast<size_t>(d.between(0, static_cast<int64_t>(target.size()) - 1))] = -1;
    if (!target.empty() && target[0] == s[0] && d.chance(0.5)) target[0] = 0;
    return Case{node(op, 13, 2), {d.f32(s), i64s(target)}, {false, true}, 0};
  }
  std::vector<int64_t> axes;
  if (op == "Squeeze") {
    for (int64_t a = 0; a < rank; ++a)
      if (s[static_cast<size_t>(a)] == 1 && d.chance(0.7)) axes.push_back(d.chance(0.5) ? a - rank : a);
  } else {
    const int64_t out_rank = rank + d.between(1, 2);
    std::vector<int64_t> all(static_cast<size_t>(out_rank));
    std::iota(all.begin(), all.end(), 0);
    for (size_t i = all.size(); i-- > 1;) std::swap(all[i], all[static_cast<size_t>(d.between(0, static_cast<int64_t>(i)))]);
    axes.assign(all.begin(), all.begin() + (out_rank - rank));
  }
  const bool old = d.chance(0.3);
  if (old) {  // opset 11: axes as an attribute
    Case c{node(op, 11, 1), {d.f32(s)}, {false}, 0};
    if (!axes.empty() || op == "Unsqueeze") set_attr(c.node, "axes", axes);
    return c;
  }
  if (axes.empty() && op == "Squeeze") return Case{node(op, 13, 1), {d.f32(s)}, {false}, 0};
  return Case{node(op, 13, 2), {d.f32(s), i64s(axes)}, {false, true}, 0};
}

Case resize(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(3, 4)), 400, 9);
  Case c{node(op, op == "Upsample" ? 9 : 13, op == "Upsample" ? 2 : 4), {}, {}, 1e-5};
  // Scales on the trailing two dims (the images' planes), 1 on the rest.
  std::vector<float> scales(s.size(), 1.0f);
  for (size_t k = s.size() - 2; k < s.size(); ++k)
    scales[k] = static_cast<float>(d.pick(std::vector<double>{0.5, 1, 1.5, 2, 3, 0.75}));
  std::string mode = d.pick(std::vector<std::string>{"nearest", "linear", op == "Upsample" ? "linear" : "cubic"});
  set_attr(c.node, "mode", mode);
  Tensor scale_tensor = Tensor::from<float>({static_cast<int64_t>(scales.size())}, scales);
  if (op == "Upsample") {
    for (auto& v : scales) v = std::max(v, 1.0f);
    c.inputs = {d.f32(s), Tensor::from<float>({static_cast<int64_t>(scales.size())}, scales)};
    c.constant = {false, true};
    return c;
  }
  set_attr(c.node, "coordinate_transformation_mode",
           d.pick(std::vector<std::string>{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}));
  if (mode == "nearest" && d.chance(0.6))
    set_attr(c.node, "nearest_mode", d.pick(std::vector<std::string>{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}));
  if (mode == "cubic" && d.chance(0.5)) set_attr(c.node, "cubic_coeff_a", -0.5f);
  if (mode == "cubic" && d.chance(0.3)) set_attr(c.node, "exclude_outside", int64_t{1});
  if (d.chance(0.7)) {
    c.inputs = {d.f32(s), Tensor(), scale_tensor};
    c.node.inputs.pop_back();
    c.constant = {false, true, true};
  } else {  // sizes instead of scales
    std::vector<int64_t> sizes(s.begin(), s.end());
    for (size_t k = s.size() - 2; k < s.size(); ++k) sizes[k] = d.between(1, 12);
    c.inputs = {d.f32(s), Tensor(), Tensor(), i64s(sizes)};
    c.constant = {false, true, true, true};
  }
  return c;
}

}  // namespace

void add_row_and_movement_families(std::vector<Family>& families) {
  families.push_back({"softmax", {"Softmax", "LogSoftmax", "Hardmax"}, softmax});
  families.push_back({"layernorm", {"LayerNormalization", "RMSNormalization"}, layernorm});
  families.push_back({"batchnorm", {"BatchNormalization"}, batchnorm});
  families.push_back({"instancenorm", {"InstanceNormalization"}, instancenorm});
  families.push_back({"groupnorm", {"GroupNormalization"}, groupnorm});
  families.push_back({"transpose", {"Transpose"}, transpose});
  families.push_back({"concat", {"Concat"}, concat});
  families.push_back({"slice", {"Slice"}, slice});
  families.push_back({"reshape", {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}, reshape});
  families.push_back({"resize", {"Resize", "Upsample"}, resize});
}

}  // namespace grove::gen
