#pragma once
// A heap array of floats on a 64-byte (cache line, one zmm) boundary, so packed panels
// never straddle lines. Move-only; zero-filled on allocation.
//
// An array of at least 2 MiB (a model's packed weights) sits on 2 MiB boundaries, rounded up
// to whole 2 MiB, and asks Linux for transparent huge pages (madvise, where the system leaves
// that to the program): a decode step streams every weight once, and on 4 KiB pages each page
// is a TLB miss and a stop for the hardware prefetchers.
#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace grove::kernels {

class AlignedFloats {
 public:
  static constexpr std::align_val_t kAlignment{64};
  static constexpr size_t kHugePage = size_t{2} << 20;

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
    const size_t bytes = allocated_bytes(count);
    data_ = static_cast<float*>(::operator new[](bytes, alignment(count)));
    size_ = count;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    // Before the first touch, so the zero fill below faults in huge pages. Advice only: where
    // the system refuses it, the array stays on small pages.
    if (bytes >= kHugePage) madvise(data_, bytes, MADV_HUGEPAGE);
#endif
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
  static bool huge(size_t count) { return count * sizeof(float) >= kHugePage; }
  static std::align_val_t alignment(size_t count) { return huge(count) ? std::align_val_t{kHugePage} : kAlignment; }
  static size_t allocated_bytes(size_t count) {
    const size_t bytes = count * sizeof(float);
    return huge(count) ? (bytes + kHugePage - 1) / kHugePage * kHugePage : bytes;
  }
  void release() {
    if (data_) ::operator delete[](data_, alignment(size_));
    data_ = nullptr;
    size_ = 0;
  }
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace grove::kernels
