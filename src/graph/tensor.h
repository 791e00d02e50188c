#pragma once
// The Tensor type is public (include/grove/tensor.h); here are the library's helpers on it.
#include <cstdint>
#include <string>

#include "grove/tensor.h"

namespace grove {

// Calls f(T{}) with T the C++ type of a numeric dtype; throws for dtypes grove does not compute in.
template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i8: return f(int8_t{});
    case DType::u8: return f(uint8_t{});
    case DType::i16: return f(int16_t{});
    case DType::u16: return f(uint16_t{});
    case DType::i32: return f(int32_t{});
    case DType::u32: return f(uint32_t{});
    case DType::i64: return f(int64_t{});
    case DType::u64: return f(uint64_t{});
    case DType::boolean: return f(bool{});
    default: throw Unsupported("dtype " + std::string(dtype_name(dtype)) + " is not supported");
  }
}

float f16_to_f32(uint16_t h);
// The nearest float16 (round half to even; overflow to infinity, NaN stays NaN). A float
// converts exactly to double first, so this also rounds float32 in one step.
uint16_t f64_to_f16(double value);
// bfloat16, also a storage type: widening is exact; narrowing rounds half to even from double
// (one rounding from float32 too), overflows to infinity and keeps NaN a NaN.
float bf16_to_f32(uint16_t h);
uint16_t f64_to_bf16(double value);

}  // namespace grove
