#include "cli/format.h"

#include <cstdarg>
#include <cstdio>

namespace grove::cli {

std::string strf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::string bracket_shape(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string declared_dims(const ValueDecl& decl) {
  if (decl.kind != ValueKind::tensor) return "(" + std::string(value_kind_name(decl.kind)) + ")";
  if (!decl.has_shape) return "(no shape)";
  std::string s = "[";
  for (size_t i = 0; i < decl.dims.size(); ++i) {
    const Dim& d = decl.dims[i];
    s += (i ? ", " : "") + (d.value >= 0 ? std::to_string(d.value) : (d.param.empty() ? "?" : d.param));
  }
  return s + "]";
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string milliseconds(double seconds) {
  double ms = seconds * 1e3;
  return strf(ms < 10 ? "%.3f ms" : ms < 1000 ? "%.1f ms" : "%.0f ms", ms);
}

}  // namespace grove::cli
