// Fuzz target: .npy bytes -> parse_npy; a parsed tensor is encoded and parsed again and must
// come back byte for byte.
#include <cstring>
#include <span>

#include "graph/error.h"
#include "npy/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace grove;
  Tensor t;
  try {
    t = parse_npy({reinterpret_cast<const std::byte*>(data), size}, "fuzz.npy");
  } catch (const Error&) {
    return 0;
  }
  std::string again = encode_npy(t);
  Tensor u = parse_npy({reinterpret_cast<const std::byte*>(again.data()), again.size()}, "again.npy");
  if (u.dtype() != t.dtype() || u.shape() != t.shape() || u.bytes() != t.bytes() ||
      (t.bytes() && std::memcmp(u.raw(), t.raw(), t.bytes()) != 0))
    __builtin_trap();
  return 0;
}
