#pragma once
// Text formatting shared by the subcommands.
#include <cstdint>
#include <string>

#include "graph/graph.h"

namespace grove::cli {

// printf into a std::string.
std::string strf(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string bracket_shape(const Shape& shape);         // "[1, 3, 224, 224]"; "[]" for a scalar
std::string declared_dims(const ValueDecl& decl);      // "[batch, 3, 224, 224]"; "(no shape)"
std::string with_commas(int64_t n);                    // 1234567 -> "1,234,567"
std::string milliseconds(double seconds);              // "12.3 ms"

}  // namespace grove::cli
