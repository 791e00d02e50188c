#pragma once
// XNNPACK-style tester for the Winograd F(4x4, 3x3) convolution: set up one case with the
// builder methods; test() transforms the weights for the chosen ISA, runs one call over a
// window of output rows and channels, and compares every element with a direct convolution
// in double precision. Elements outside the window must keep their sentinel value. The same
// tester runs the channels-last form of the kernel.
//
// Error bound: |got - expected| <= 1e-4 * scale, where scale is the largest |pre-activation
// output| of the whole layer (conv + bias + residual). Winograd's error is not proportional
// to each element's own sum of |terms|: the transforms mix the 36 inputs of a patch with
// weights up to 8 and the products of one output position are spread over several, so
// it is bounded relative to the magnitude of the layer's outputs, not of each output.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/epilogue.h"
#include "kernels/isa.h"

namespace grove::kernels::testing {

class WinogradTester {
 public:
  WinogradTester& isa(Isa v) { isa_ = v; return *this; }
  WinogradTester& cin(size_t v) { cin_ = v; return *this; }
  WinogradTester& cout(size_t v) { cout_ = v; return *this; }
  WinogradTester& height(size_t v) { in_h_ = v; return *this; }
  WinogradTester& width(size_t v) { in_w_ = v; return *this; }
  // pads: top, left, bottom, right
  WinogradTester& pads(size_t t, size_t l, size_t b, size_t r) { pt_ = t, pl_ = l, pb_ = b, pr_ = r; return *this; }
  WinogradTester& pad(size_t p) { return pads(p, p, p, p); }
  // The call covers output rows [first, last) and channels [first, last); default: all.
  WinogradTester& rows(size_t first, size_t last) { row0_ = first, row1_ = last; return *this; }
  WinogradTester& channels(size_t first, size_t last) { oc0_ = first, oc1_ = last; return *this; }
  WinogradTester& bias(bool v) { bias_ = v; return *this; }
  WinogradTester& residual(bool v) { residual_ = v; return *this; }
  WinogradTester& activation(Activation kind, float alpha = 0.0f, float beta = 0.0f) {
    activation_ = {kind, alpha, beta};
    return *this;
  }
  WinogradTester& seed(unsigned v) { seed_ = v; return *this; }
  // Runs the channels-last kernel (winograd_f4x3_nhwc.h) on x, y and the residual laid out
  // [H][W][C]; its channel window must start on a panel boundary.
  WinogradTester& channels_last(bool v) { channels_last_ = v; return *this; }
  // F(2x2, 3x3) instead of F(4x4, 3x3); channels-last only (winograd_f2x3_nhwc.h).
  WinogradTester& small_blocks(bool v) { small_blocks_ = v; return *this; }

  // Channels-last only: the call adds up these input channels (WinogradNhwcCall::kept_channels)
  // and the others hold NaN, so any use of one shows; the reference takes them as 0.
  WinogradTester& kept_channels(std::vector<uint32_t> v) { kept_ = std::move(v), pruned_ = true; return *this; }
  // Channels-last only: the positions of x to read, one byte per pixel (WinogradNhwcCall::
  // kept_positions; the others hold NaN, the reference takes them as 0), and the outputs to
  // compute, one byte per output pixel (WinogradNhwcCall::computed; the others must be 0).
  WinogradTester& kept_positions(std::vector<unsigned char> v) { kept_positions_ = std::move(v); return *this; }
  WinogradTester& computed(std::vector<unsigned char> v) { computed_ = std::move(v); return *this; }

  // Runs the case with gtest assertions; returns the largest error / scale seen.
  double test() const;

 private:
  Isa isa_ = Isa::scalar;
  size_t cin_ = 16, cout_ = 16, in_h_ = 8, in_w_ = 8;
  size_t pt_ = 1, pl_ = 1, pb_ = 1, pr_ = 1;
  size_t row0_ = 0, row1_ = size_t(-1), oc0_ = 0, oc1_ = size_t(-1);
  bool bias_ = false, residual_ = false, channels_last_ = false, small_blocks_ = false, pruned_ = false;
  std::vector<uint32_t> kept_;
  std::vector<unsigned char> kept_positions_, computed_;
  ActivationParams activation_;
  unsigned seed_ = 1;
};

}  // namespace grove::kernels::testing
