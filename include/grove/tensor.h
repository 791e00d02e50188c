#pragma once
// Tensor: a dtype, a shape and a buffer, grove's own (64-byte aligned) or borrowed from the
// caller. Copies share the buffer (cheap views for Identity/Reshape); clone() makes an
// independent copy.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grove/error.h"

namespace grove {

enum class DType : uint8_t { undefined, f32, f64, f16, i8, u8, i16, u16, i32, u32, i64, u64, boolean, string, bf16 };

using Shape = std::vector<int64_t>;

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
// ONNX TensorProto::DataType number <-> DType; unknown numbers give DType::undefined.
DType dtype_from_onnx(int onnx_type);
int dtype_to_onnx(DType dtype);

// Shape arithmetic on untrusted sizes is checked: numel and checked_mul throw Error instead
// of overflowing int64 (a corrupt or hostile model must not wrap a size into a small buffer).
// numel also rejects negative dimensions and counts whose bytes (at 16 bytes an element)
// would not fit in int64, so numel(shape) * dtype_size never overflows.
int64_t numel(const Shape& shape);
int64_t checked_mul(int64_t a, int64_t b);
inline constexpr int64_t kMaxElements = INT64_MAX / 16;
std::string shape_str(const Shape& shape);  // "1x3x224x224"; "scalar" for rank 0

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::i16; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::u16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<uint32_t>() { return DType::u32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::u64; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of the given dtype and shape.
  Tensor(DType dtype, Shape shape);
  // Over storage someone else allocated (a BufferPool block): 64-byte aligned, at least
  // numel * dtype size bytes; its contents are kept as they are.
  Tensor(DType dtype, Shape shape, std::shared_ptr<std::byte[]> storage);
  // Over the caller's memory, without a copy: `data` holds numel * dtype size bytes in C
  // order. grove never writes into it, and keeps `owner` alive as long as any Tensor shares
  // the buffer (an empty owner: the caller keeps the memory alive for every run using it).
  // Data not aligned to its element size is copied instead.
  static Tensor borrow(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner = {});

  template <class T>
  static Tensor from(Shape shape, std::span<const T> values) {
    Tensor t(dtype_of<T>(), std::move(shape));
    if (static_cast<int64_t>(values.size()) != t.numel()) throw Error("Tensor::from: value count does not match shape");
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }
  template <class T>
  static Tensor scalar(T value) { return from<T>({}, std::span<const T>(&value, 1)); }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_.at(static_cast<size_t>(i)); }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  bool empty() const { return dtype_ == DType::undefined; }

  std::byte* raw() { return buffer_.get(); }
  const std::byte* raw() const { return buffer_.get(); }

  // Typed access; throws if T does not match the dtype.
  template <class T> T* data() { check<T>(); return reinterpret_cast<T*>(buffer_.get()); }
  template <class T> const T* data() const { check<T>(); return reinterpret_cast<const T*>(buffer_.get()); }
  template <class T> std::span<T> span() { return {data<T>(), static_cast<size_t>(numel_)}; }
  template <class T> std::span<const T> span() const { return {data<T>(), static_cast<size_t>(numel_)}; }

  // Same buffer, new shape (element count must match).
  Tensor reshaped(Shape shape) const;
  Tensor clone() const;
  // Reads any integer tensor (i32/i64/u8/...) as int64 values; used for shape-like inputs.
  std::vector<int64_t> to_i64() const;
  // Reads any numeric tensor as double values; used by tests and summaries.
  std::vector<double> to_f64() const;

 private:
  void count_elements();  // checks shape and dtype, sets numel_
  template <class T> void check() const {
    if (dtype_of<T>() != dtype_) throw Error("tensor holds " + std::string(dtype_name(dtype_)) + ", accessed as " + std::string(dtype_name(dtype_of<T>())));
  }
  DType dtype_ = DType::undefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::byte[]> buffer_;
};

// Named tensors: a run's inputs and outputs.
using TensorMap = std::map<std::string, Tensor>;
// Named shapes: the input shapes a model is bound and planned for.
using ShapeMap = std::map<std::string, Shape>;

}  // namespace grove
