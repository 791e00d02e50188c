// The Winograd F(2x2, 3x3) transforms of winograd_f2x3_impl.h built for scalar (flags from
// kernels.cmake), one float at a time.
#include "kernels/winograd_f2x3_impl.h"

namespace grove::kernels {
namespace {
using Vec = float;
}  // namespace

GROVE_WINOGRAD_F2X3_ENTRY_POINTS(scalar)

}  // namespace grove::kernels
