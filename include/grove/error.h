#pragma once
// One exception type for every bad-input case. The library throws it; callers catch it; the CLI
// prints the message and exits non-zero. Messages name the file, node and op where known.
//
// The kind says who should act: `unsupported` marks valid ONNX that grove does not claim (an
// op, a dtype, an attribute value), which the conformance runner counts as a skip;
// `data_dependent_shape` marks a shape that depends on tensor values only known at run time,
// which static binding cannot handle but the reference executor can; `cancelled` marks a run
// stopped by its CancelToken (grove/cancel.h): its deadline passed or it was cancelled.
#include <stdexcept>
#include <string>

namespace grove {

class Error : public std::runtime_error {
 public:
  enum class Kind { invalid, unsupported, data_dependent_shape, cancelled };

  explicit Error(const std::string& message, Kind kind = Kind::invalid) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }
  bool unsupported() const { return kind_ == Kind::unsupported; }
  bool cancelled() const { return kind_ == Kind::cancelled; }
  // The same error with context in front ("model.onnx: "), keeping its kind.
  Error prefixed(const std::string& prefix) const { return Error(prefix + what(), kind_); }

 private:
  Kind kind_;
};

// Valid ONNX that grove does not support: say what, so the user knows it is not their bug.
inline Error Unsupported(const std::string& message) { return Error(message, Error::Kind::unsupported); }

inline Error DataDependentShape(const std::string& message) {
  return Error(message, Error::Kind::data_dependent_shape);
}

}  // namespace grove
