#include "winograd_tester.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gemm_tester.h"
#include "kernels/winograd_f2x3_nhwc.h"
#include "kernels/winograd_f4x3.h"
#include "kernels/winograd_f4x3_nhwc.h"

namespace grove::kernels::testing {

double WinogradTester::test() const {
  const size_t oh_count = in_h_ + pt_ + pb_ - 2, ow_count = in_w_ + pl_ + pr_ - 2;
  const size_t row1 = std::min(row1_, oh_count), oc1 = std::min(oc1_, cout_);
  std::mt19937 rng(seed_);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng);
    return v;
  };
  std::vector<float> x = random(cin_ * in_h_ * in_w_);
  const std::vector<float> w = random(cout_ * cin_ * 9), b = random(cout_), res = random(cout_ * oh_count * ow_count);
  const size_t plane = oh_count * ow_count;
  // A pruned case: the channels not kept are NaN in the call's x and 0 in the reference's.
  std::vector<float> x_call = x;
  if (pruned_) {
    std::vector<bool> kept(cin_, false);
    for (uint32_t c : kept_) kept[c] = true;
    for (size_t c = 0; c < cin_; ++c)
      if (!kept[c])
        for (size_t p = 0; p < in_h_ * in_w_; ++p) {
          x[c * in_h_ * in_w_ + p] = 0.0f;
          x_call[c * in_h_ * in_w_ + p] = std::nanf("");
        }
  }
  for (size_t p = 0; p < kept_positions_.size(); ++p)
    if (!kept_positions_[p])
      for (size_t c = 0; c < cin_; ++c) x[c * in_h_ * in_w_ + p] = 0.0f, x_call[c * in_h_ * in_w_ + p] = std::nanf("");

  // Direct convolution in double: the pre-activation value of every output.
  std::vector<double> pre(cout_ * plane);
  double scale = 0.0;
  for (size_t oc = 0; oc < cout_; ++oc)
    for (size_t oh = 0; oh < oh_count; ++oh)
      for (size_t ow = 0; ow < ow_count; ++ow) {
        double sum = 0.0;
        for (size_t ic = 0; ic < cin_; ++ic)
          for (size_t kh = 0; kh < 3; ++kh)
            for (size_t kw = 0; kw < 3; ++kw) {
              const int64_t ih = int64_t(oh + kh) - int64_t(pt_), iw = int64_t(ow + kw) - int64_t(pl_);
              if (ih < 0 || iw < 0 || ih >= int64_t(in_h_) || iw >= int64_t(in_w_)) continue;
              sum += double(x[(ic * in_h_ + size_t(ih)) * in_w_ + size_t(iw)]) * w[((oc * cin_ + ic) * 3 + kh) * 3 + kw];
            }
        if (bias_) sum += b[oc];
        if (residual_) sum += res[oc * plane + oh * ow_count + ow];
        pre[oc * plane + oh * ow_count + ow] = sum;
        scale = std::max(scale, std::abs(sum));
      }

  const float sentinel = -12345.0f;
  std::vector<float> y(cout_ * plane, sentinel);
  const kernels::Conv2dShape shape{.channels = cin_, .in_h = in_h_, .in_w = in_w_, .out_h = oh_count, .out_w = ow_count,
                                   .kernel_h = 3, .kernel_w = 3, .pad_top = pt_, .pad_left = pl_};
  // Where output (oc, oh, ow) lies in y and in the residual.
  auto at = [&](size_t oc, size_t oh, size_t ow) {
    return channels_last_ ? (oh * ow_count + ow) * cout_ + oc : oc * plane + oh * ow_count + ow;
  };
  // The fields both forms' calls share.
  auto fill = [&](auto& call, const float* input, const float* residual) {
    call.x = input;
    call.y = y.data();
    call.oc_begin = oc0_;
    call.oc_end = oc1;
    call.row_begin = row0_;
    call.row_end = row1;
    call.shape = shape;
    call.epilogue.residual = residual_ ? residual : nullptr;
    call.epilogue.activation = activation_;
  };
  if (channels_last_) {
    std::vector<float> x_hwc(x.size()), res_hwc(res.size());
    for (size_t c = 0; c < cin_; ++c)
      for (size_t p = 0; p < in_h_ * in_w_; ++p) x_hwc[p * cin_ + c] = x_call[c * in_h_ * in_w_ + p];
    for (size_t c = 0; c < cout_; ++c)
      for (size_t p = 0; p < plane; ++p) res_hwc[p * cout_ + c] = res[c * plane + p];
    WinogradNhwcScratch scratch;
    WinogradNhwcCall call;
    fill(call, x_hwc.data(), res_hwc.data());
    call.epilogue.bias = bias_ ? b.data() : nullptr;  // per output channel, as the residual's layout
    static const uint32_t none = 0;  // an empty list is a pointer all the same: null means every channel
    if (pruned_) call.kept_channels = kept_.empty() ? &none : kept_.data(), call.kept = kept_.size();
    if (!kept_positions_.empty()) call.kept_positions = kept_positions_.data();
    if (!computed_.empty()) call.computed = computed_.data();
    if (small_blocks_) {
      WinogradF2x3NhwcWeights weights;
      winograd_f2x3_nhwc_pack_weights(weights, w.data(), cout_, cin_, isa_);
      winograd_f2x3_nhwc_conv(call, weights, scratch);
    } else {
      WinogradF4x3NhwcWeights weights;
      winograd_f4x3_nhwc_pack_weights(weights, w.data(), cout_, cin_, isa_);
      winograd_f4x3_nhwc_conv(call, weights, scratch);
    }
  } else {
    if (pruned_ || !kept_positions_.empty() || !computed_.empty()) ADD_FAILURE() << "pruning is a channels-last case";
    WinogradF4x3Weights weights;
    winograd_f4x3_pack_weights(weights, w.data(), cout_, cin_, isa_);
    WinogradF4x3Scratch scratch;
    WinogradF4x3Call call;
    fill(call, x.data(), res.data());
    call.epilogue.row_bias = bias_ ? b.data() : nullptr;  // NCHW: output channels are the GEMM's rows
    call.epilogue.residual_stride = plane;
    winograd_f4x3_conv(call, weights, scratch);
  }

  double worst = 0.0;
  int failures = 0;
  for (size_t oc = 0; oc < cout_; ++oc)
    for (size_t oh = 0; oh < oh_count; ++oh)
      for (size_t ow = 0; ow < ow_count; ++ow) {
        const size_t i = at(oc, oh, ow);
        const bool inside = oc >= oc0_ && oc < oc1 && oh >= row0_ && oh < row1;
        if (!inside) {
          if (y[i] != sentinel && ++failures <= 5)
            ADD_FAILURE() << isa_name(isa_) << (small_blocks_ ? " F(2x2)" : "") << (channels_last_ ? " channels-last" : "") << " wrote outside the call at (" << oc << ", " << oh << ", " << ow << ")";
          continue;
        }
        const bool skipped = !computed_.empty() && !computed_[oh * ow_count + ow];
        const double expected = skipped ? 0.0 : reference_activation(pre[oc * plane + oh * ow_count + ow], activation_);
        const double error = std::abs(double(y[i]) - expected) / std::max(scale, 1e-30);
        worst = std::max(worst, error);
        if (!(error <= 1e-4) && ++failures <= 5)
          ADD_FAILURE() << isa_name(isa_) << (small_blocks_ ? " F(2x2)" : "") << (channels_last_ ? " channels-last" : "") << " cin=" << cin_ << " cout=" << cout_ << " " << in_h_ << "x" << in_w_
                        << " at (" << oc << ", " << oh << ", " << ow << "): got " << y[i] << ", expected " << expected
                        << " (scale " << scale << ")";
      }
  return worst;
}

}  // namespace grove::kernels::testing
