// The Winograd F(2x2, 3x3) transforms of winograd_f2x3_impl.h built for avx512 (flags from
// kernels.cmake), over 64-byte vectors.
#include "kernels/winograd_f2x3_impl.h"

namespace grove::kernels {
namespace {
using Vec = float __attribute__((vector_size(64)));
}  // namespace

GROVE_WINOGRAD_F2X3_ENTRY_POINTS(avx512)

}  // namespace grove::kernels
