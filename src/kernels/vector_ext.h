#pragma once
// Float vectors for the loops written once and built per ISA (dwconv_nhwc_impl.h,
// maxpool_impl.h): GCC vector extensions of `Lanes` floats become zmm, ymm or xmm code by the
// including file's flags; one lane is a plain float. Loads and stores through memcpy are
// unaligned. Internal linkage, like the loops: each ISA's file keeps its own copy, and the
// linker never merges an AVX-512 build into a baseline caller.
#include <cstring>
#include <type_traits>
#include <utility>

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

template <class V, size_t... I>
inline V even_lanes(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, (2 * I)...);
}

// The floats at p, p + 2, ..., as one vector (a stride-2 window walk); reads the 2 x Lanes - 1
// floats from p and the one after them.
template <class V>
inline V load_even_floats(const float* p) {
  if constexpr (std::is_same_v<V, float>) {
    return *p;
  } else {
    constexpr size_t kLanes = sizeof(V) / sizeof(float);
    return even_lanes(load_floats<V>(p), load_floats<V>(p + kLanes), std::make_index_sequence<kLanes>{});
  }
}

// `f - 0` is f for every float (-0.0 included), so the compiler folds it to one broadcast;
// `V{} + f` would keep a scalar add of zero (-0.0 + 0.0 is +0.0) before every broadcast.
template <class V>
inline V splat_floats(float f) {
  if constexpr (std::is_same_v<V, float>) return f;
  else return f - V{};
}

}  // namespace
}  // namespace grove::kernels
