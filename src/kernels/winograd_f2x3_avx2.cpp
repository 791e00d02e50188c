// The Winograd F(2x2, 3x3) transforms of winograd_f2x3_impl.h built for avx2 (flags from
// kernels.cmake), over 32-byte vectors.
#include "kernels/winograd_f2x3_impl.h"

namespace grove::kernels {
namespace {
using Vec = float __attribute__((vector_size(32)));
}  // namespace

GROVE_WINOGRAD_F2X3_ENTRY_POINTS(avx2)

}  // namespace grove::kernels
