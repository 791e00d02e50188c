#include "graph/tensor.h"

#include <cmath>
#include <cstring>
#include <new>

namespace grove {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 2;
    case DType::i8: case DType::u8: case DType::boolean: return 1;
    default: return 0;
  }
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::i16: return "int16";
    case DType::u16: return "uint16";
    case DType::i32: return "int32";
    case DType::u32: return "uint32";
    case DType::i64: return "int64";
    case DType::u64: return "uint64";
    case DType::boolean: return "bool";
    case DType::string: return "string";
    default: return "undefined";
  }
}

// Numbers from onnx.proto TensorProto.DataType.
DType dtype_from_onnx(int t) {
  switch (t) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 3: return DType::i8;
    case 4: return DType::u16;
    case 5: return DType::i16;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 8: return DType::string;
    case 9: return DType::boolean;
    case 10: return DType::f16;
    case 11: return DType::f64;
    case 12: return DType::u32;
    case 13: return DType::u64;
    case 16: return DType::bf16;
    default: return DType::undefined;
  }
}

int dtype_to_onnx(DType d) {
  switch (d) {
    case DType::f32: return 1;
    case DType::u8: return 2;
    case DType::i8: return 3;
    case DType::u16: return 4;
    case DType::i16: return 5;
    case DType::i32: return 6;
    case DType::i64: return 7;
    case DType::string: return 8;
    case DType::boolean: return 9;
    case DType::f16: return 10;
    case DType::f64: return 11;
    case DType::u32: return 12;
    case DType::u64: return 13;
    case DType::bf16: return 16;
    default: return 0;
  }
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    throw Error("size arithmetic overflows: " + std::to_string(a) + " * " + std::to_string(b));
  return r;
}

int64_t numel(const Shape& shape) {
  // The product of the non-zero dims is bounded even for an empty tensor: kernels and shape
  // rules multiply runs of dims (strides, outer and inner extents), and none of those
  // products may overflow, whatever the zero elsewhere (fuzz_model found two that did).
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) throw Error("shape " + shape_str(shape) + " has a negative dimension");
    if (d == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      throw Error("shape " + shape_str(shape) + " has too many elements (the count overflows)");
  }
  return empty ? 0 : n;
}

std::string shape_str(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

namespace {
constexpr size_t kAlign = 64;  // one cache line, and what AVX-512 loads like
std::shared_ptr<std::byte[]> allocate(size_t bytes) {
  size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded == 0) rounded = kAlign;
  auto* p = static_cast<std::byte*>(::operator new[](rounded, std::align_val_t(kAlign)));
  std::memset(p, 0, rounded);
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t(kAlign)); });
}
}  // namespace

void Tensor::count_elements() {
  for (int64_t d : shape_)
    if (d < 0) throw Error("tensor shape " + shape_str(shape_) + " has a negative dimension");
  if (dtype_size(dtype_) == 0) throw Error("cannot allocate a tensor of dtype " + std::string(dtype_name(dtype_)));
  numel_ = grove::numel(shape_);
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  count_elements();
  buffer_ = allocate(bytes());
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<std::byte[]> storage)
    : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(storage)) {
  count_elements();
  if (!buffer_ && bytes() > 0) throw Error("Tensor: no storage for " + shape_str(shape_));
}

Tensor Tensor::borrow(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner) {
  Tensor view;
  view.dtype_ = dtype;
  view.shape_ = std::move(shape);
  view.count_elements();
  if (view.bytes() > 0 && !data) throw Error("Tensor::borrow: no data for " + shape_str(view.shape_));
  auto* bytes = static_cast<std::byte*>(const_cast<void*>(data));
  if (reinterpret_cast<uintptr_t>(bytes) % dtype_size(dtype) != 0) {
    Tensor copy(dtype, view.shape_);
    std::memcpy(copy.raw(), bytes, copy.bytes());
    return copy;
  }
  // The aliasing constructor: the buffer points at the caller's bytes and owns `owner`.
  view.buffer_ = std::shared_ptr<std::byte[]>(std::move(owner), bytes);
  return view;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (grove::numel(shape) != numel_)
    throw Error("cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  if (empty()) return {};
  Tensor t(dtype_, shape_);
  std::memcpy(t.raw(), raw(), bytes());
  return t;
}

std::vector<int64_t> Tensor::to_i64() const {
  std::vector<int64_t> out(static_cast<size_t>(numel_));
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* p = reinterpret_cast<const T*>(raw());
    for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<int64_t>(p[i]);
  });
  return out;
}

std::vector<double> Tensor::to_f64() const {
  std::vector<double> out(static_cast<size_t>(numel_));
  if (dtype_ == DType::f16) {  // a storage type grove does not compute in: read through float
    const uint16_t* p = reinterpret_cast<const uint16_t*>(raw());
    for (int64_t i = 0; i < numel_; ++i) out[static_cast<size_t>(i)] = f16_to_f32(p[i]);
    return out;
  }
  if (dtype_ == DType::bf16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(raw());
    for (int64_t i = 0; i < numel_; ++i) out[static_cast<size_t>(i)] = bf16_to_f32(p[i]);
    return out;
  }
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* p = reinterpret_cast<const T*>(raw());
    for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f64_to_f16(double value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | 0x7e00;
  const double a = std::fabs(value);
  // 65520 is halfway between the largest half (65504) and the next step, 65536: ties go to
  // the even neighbour, which is infinity.
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < 0x1p-14) {  // subnormal: a count of 2^-24 units (1024 of them is the smallest normal)
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  int exponent = 0;
  std::frexp(a, &exponent);  // a = m * 2^exponent, m in [0.5, 1)
  int e = exponent - 1;      // a in [2^e, 2^(e+1))
  double q = std::nearbyint(std::ldexp(a, 10 - e));  // 11 significant bits, in [1024, 2048]
  if (q == 2048.0) q = 1024.0, ++e;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (static_cast<int>(q) - 1024));
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;  // bfloat16 is the top half of a float32
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t f64_to_bf16(double value) {
  uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | 0x7fc0;
  double a = std::fabs(value);
  if (std::isinf(a)) return sign | 0x7f80;
  if (a == 0.0) return sign;
  int exponent = 0;
  std::frexp(a, &exponent);
  int e = exponent - 1;  // a in [2^e, 2^(e+1))
  if (e < -126) {        // subnormal: a multiple of 2^-133; rounding up to 128 gives the smallest normal's bits
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 133)));
  }
  double q = std::nearbyint(std::ldexp(a, 7 - e));  // 8 significant bits, in [128, 256]
  if (q == 256.0) q = 128.0, ++e;
  if (e > 127) return sign | 0x7f80;
  return sign | static_cast<uint16_t>(((e + 127) << 7) | (static_cast<int>(q) - 128));
}

}  // namespace grove
