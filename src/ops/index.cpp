// Placeholder: the operators of this family are being written.
#include "ops/op.h"

namespace grove {
void register_index_ops(OpRegistry&) {}
}  // namespace grove
