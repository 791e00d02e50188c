#pragma once
// One exception type for every bad-input case. The library throws it; the CLI catches it,
// prints the message and exits non-zero. Messages name the file, node and op where known.
#include <stdexcept>
#include <string>

namespace grove {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace grove
