// Channels-last Winograd F(2x2, 3x3): its weights and transforms; the driver is
// winograd_nhwc.cpp, the transforms winograd_f2x3_impl.h.
#include "kernels/winograd_f2x3_nhwc.h"

#include <vector>

#include "grove/error.h"

namespace grove::kernels {

namespace {

// G for the interpolation points 0, 1, -1 and infinity.
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

WinogradNhwcForm form_for(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return {"winograd_f2x3_nhwc_conv", 2, f32_winograd_f2x3_nhwc_input_avx512, f32_winograd_f2x3_nhwc_output_avx512};
    case Isa::avx2:
      return {"winograd_f2x3_nhwc_conv", 2, f32_winograd_f2x3_nhwc_input_avx2, f32_winograd_f2x3_nhwc_output_avx2};
    case Isa::scalar: break;
  }
  return {"winograd_f2x3_nhwc_conv", 2, f32_winograd_f2x3_nhwc_input_scalar, f32_winograd_f2x3_nhwc_output_scalar};
}

}  // namespace

size_t WinogradF2x3NhwcWeights::bytes() const {
  size_t total = 0;
  for (const PackedB& b : u) total += b.bytes();
  return total;
}

void winograd_f2x3_nhwc_pack_weights(WinogradF2x3NhwcWeights& out, const float* w, size_t cout, size_t cin, Isa isa) {
  if (cout > 0 && cin > 0 && !w) throw Error("winograd_f2x3_nhwc_pack_weights: null weights");
  std::vector<float> u(16 * cout * cin);  // u[t][co][ci]: B given n rows of k
  for (size_t co = 0; co < cout; ++co)
    for (size_t ci = 0; ci < cin; ++ci) {
      const float* g = w + (co * cin + ci) * 9;
      double gg[4][3];  // G g
      for (size_t i = 0; i < 4; ++i)
        for (size_t c = 0; c < 3; ++c) gg[i][c] = kG[i][0] * g[c] + kG[i][1] * g[3 + c] + kG[i][2] * g[6 + c];
      for (size_t i = 0; i < 4; ++i)
        for (size_t k = 0; k < 4; ++k)
          u[((i * 4 + k) * cout + co) * cin + ci] =
              static_cast<float>(gg[i][0] * kG[k][0] + gg[i][1] * kG[k][1] + gg[i][2] * kG[k][2]);
    }
  out.cout = cout;
  out.cin = cin;
  out.isa = isa;
  for (size_t t = 0; t < 16; ++t)
    out.u[t] = pack_b(u.data() + t * cout * cin, cin, cout, cin, BLayout::n_by_k, isa);
}

void winograd_f2x3_nhwc_conv(const WinogradNhwcCall& call, const WinogradF2x3NhwcWeights& w, WinogradNhwcScratch& s) {
  winograd_nhwc_conv(form_for(w.isa), call, w.u, w.cout, w.cin, w.isa, s);
}

}  // namespace grove::kernels
