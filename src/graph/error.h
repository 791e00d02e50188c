#pragma once
// One exception type for every bad-input case. The library throws it; the CLI catches it,
// prints the message and exits non-zero. Messages name the file, node and op where known.
//
// `unsupported` marks input that is valid ONNX but outside what grove claims (an op, a
// dtype, an attribute value): the conformance runner counts those as skips, not failures.
#include <stdexcept>
#include <string>

namespace grove {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, bool unsupported = false)
      : std::runtime_error(message), unsupported_(unsupported) {}
  bool unsupported() const { return unsupported_; }
  // The same error with context in front ("model.onnx: "), keeping the unsupported mark.
  Error prefixed(const std::string& prefix) const { return Error(prefix + what(), unsupported_); }

 private:
  bool unsupported_;
};

// Valid ONNX that grove does not support: say what, so the user knows it is not their bug.
inline Error Unsupported(const std::string& message) { return Error(message, true); }

}  // namespace grove
