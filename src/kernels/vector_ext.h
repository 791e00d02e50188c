#pragma once
// Float vectors for the loops written once and built per ISA (dwconv_nhwc_impl.h,
// maxpool_impl.h): GCC vector extensions of `Lanes` floats become zmm, ymm or xmm code by the
// including file's flags; one lane is a plain float. Loads and stores through memcpy are
// unaligned. Internal linkage, like the loops: each ISA's file keeps its own copy, and the
// linker never merges an AVX-512 build into a baseline caller.
#include <cstring>
#include <type_traits>

namespace grove::kernels {
namespace {

template <int Lanes>
struct FloatVector {
  typedef float type __attribute__((vector_size(Lanes * sizeof(float))));
};
template <>
struct FloatVector<1> {
  using type = float;
};

template <int Lanes>
using FloatVec = typename FloatVector<Lanes>::type;

template <class V>
inline V load_floats(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <class V>
inline void store_floats(float* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

template <class V>
inline V splat_floats(float f) {
  if constexpr (std::is_same_v<V, float>) return f;
  else return V{} + f;
}

}  // namespace
}  // namespace grove::kernels
