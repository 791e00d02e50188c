#pragma once
// A heap array of floats on a 64-byte (cache line, one zmm) boundary, so packed panels
// never straddle lines. Move-only; zero-filled on allocation.
#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

namespace grove::kernels {

class AlignedFloats {
 public:
  static constexpr std::align_val_t kAlignment{64};

  AlignedFloats() = default;
  explicit AlignedFloats(size_t count) { resize(count); }
  AlignedFloats(AlignedFloats&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  AlignedFloats& operator=(AlignedFloats&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  ~AlignedFloats() { release(); }

  // Discards the contents; the new array is zero-filled.
  void resize(size_t count) {
    release();
    if (count == 0) return;
    data_ = static_cast<float*>(::operator new[](count * sizeof(float), kAlignment));
    size_ = count;
    std::memset(data_, 0, count * sizeof(float));
  }
  // Grows (discarding contents) only when the current array is too small.
  void reserve(size_t count) {
    if (count > size_) resize(count);
  }

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release() {
    if (data_) ::operator delete[](data_, kAlignment);
    data_ = nullptr;
    size_ = 0;
  }
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace grove::kernels
