#include "kernels/igemm.h"

#include <string>

#include "graph/error.h"

namespace grove::kernels {

void int_gemm(const IntGemmCall& call, IntGemmScratch& scratch, Isa isa) {
  if (!isa_supported(isa)) throw Error("int_gemm: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  if (call.m == 0 || call.n == 0) return;
  if (isa == Isa::scalar) int_gemm_scalar(call);
  else int_gemm_avx2(call, scratch);
}

void int_gemm_panels(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch, Isa isa) {
  if (!isa_supported(isa)) throw Error("int_gemm: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  if (b.k != call.k || b.n != call.n) throw Error("int_gemm_panels: panels do not match the call's k and n");
  if (call.m == 0 || call.n == 0) return;
  if (isa == Isa::scalar) int_gemm_panels_scalar(call, b);
  else int_gemm_panels_avx2(call, b, scratch);
}

}  // namespace grove::kernels
