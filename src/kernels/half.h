#pragma once
// float32 <-> float16 conversion of whole arrays with the CPU's conversion instructions
// (F16C, on every AVX2 CPU): round to nearest even, subnormals kept, overflow to infinity,
// NaN stays a NaN. Casts of float16 models (passes/widen_float16.cpp puts two at every
// rounding point) run here instead of one element at a time.
#include <cstddef>
#include <cstdint>

namespace grove::kernels {

// Each returns false, converting nothing, when the active ISA has no vector conversion;
// the caller then converts element by element.
bool convert_f32_to_f16(const float* x, uint16_t* y, size_t n);
bool convert_f16_to_f32(const uint16_t* x, float* y, size_t n);

namespace avx2 {
void convert_f32_to_f16(const float* x, uint16_t* y, size_t n);
void convert_f16_to_f32(const uint16_t* x, float* y, size_t n);
}  // namespace avx2

}  // namespace grove::kernels
