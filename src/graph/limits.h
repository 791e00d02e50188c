#pragma once
// The Limits type is public (include/grove/limits.h); here is how the library charges them.
#include <cstdint>
#include <string>

#include "grove/limits.h"

namespace grove {

// Adds `bytes` to `total` and throws Error("<what>: ... exceeds the memory limit ...") when
// the sum passes limits.memory_limit(). `what` names what is being charged (an
// initializer, a node's outputs).
void charge_memory(int64_t& total, int64_t bytes, const Limits& limits, const std::string& what);

}  // namespace grove
