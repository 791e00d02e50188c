// Channels-last Winograd F(4x4, 3x3): its weights and transforms; the driver is
// winograd_nhwc.cpp, the transforms winograd_f4x3_impl.h.
#include "kernels/winograd_f4x3_nhwc.h"

#include <vector>

#include "grove/error.h"
#include "kernels/winograd_f4x3.h"

namespace grove::kernels {

namespace {

WinogradNhwcForm form_for(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return {"winograd_f4x3_nhwc_conv", 4, f32_winograd_f4x3_nhwc_input_avx512, f32_winograd_f4x3_nhwc_output_avx512};
    case Isa::avx2:
      return {"winograd_f4x3_nhwc_conv", 4, f32_winograd_f4x3_nhwc_input_avx2, f32_winograd_f4x3_nhwc_output_avx2};
    case Isa::scalar: break;
  }
  return {"winograd_f4x3_nhwc_conv", 4, f32_winograd_f4x3_nhwc_input_scalar, f32_winograd_f4x3_nhwc_output_scalar};
}

}  // namespace

size_t WinogradF4x3NhwcWeights::bytes() const {
  size_t total = 0;
  for (const PackedB& b : u) total += b.bytes();
  return total;
}

void winograd_f4x3_nhwc_pack_weights(WinogradF4x3NhwcWeights& out, const float* w, size_t cout, size_t cin, Isa isa) {
  if (cout > 0 && cin > 0 && !w) throw Error("winograd_f4x3_nhwc_pack_weights: null weights");
  std::vector<float> u(36 * cout * cin);  // u[t][co][ci]: B given n rows of k
  winograd_f4x3_transform_weights(w, cout, cin, u.data());
  out.cout = cout;
  out.cin = cin;
  out.isa = isa;
  for (size_t t = 0; t < 36; ++t)
    out.u[t] = pack_b(u.data() + t * cout * cin, cin, cout, cin, BLayout::n_by_k, isa);
}

void winograd_f4x3_nhwc_conv(const WinogradNhwcCall& call, const WinogradF4x3NhwcWeights& w, WinogradNhwcScratch& s) {
  winograd_nhwc_conv(form_for(w.isa), call, w.u, w.cout, w.cin, w.isa, s);
}

}  // namespace grove::kernels
