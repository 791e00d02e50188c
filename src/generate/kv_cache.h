#pragma once
// The key/value cache a Generator binds to a decoder's past inputs: one buffer per cache
// input, shaped like that input with `capacity` positions, of which the first `length` hold
// the tokens so far. A step reads the buffers in place (the past inputs are views of them)
// and its presents' new positions are copied in after it.
#include <cstdint>
#include <vector>

#include "grove/model.h"
#include "grove/tensor.h"

namespace grove::generate {

class KvCache {
 public:
  // `specs[i]`: cache input i, its positions on `axes[i]`; batch (axis 0) is bound to 1, every
  // other dimension must be fixed in the model (an Error names the input otherwise).
  KvCache(const std::vector<ValueSpec>& specs, const std::vector<int>& axes);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t bytes() const;

  // Room for `capacity` positions (never shrinks): new buffers, the filled positions copied.
  void reserve(int64_t capacity);
  // The past input for entry i: its buffer, `capacity` positions long (no copy).
  const Tensor& past(size_t i) const { return entries_[i].buffer; }
  // Copies positions [from, from + count) of entry i's present into positions
  // [length, length + count); `present` is shaped like the past with capacity + count positions.
  void append(size_t i, const Tensor& present, int64_t from, int64_t count);
  // Takes entry i's present as its buffer (an unmasked model: every slot filled, no copy).
  void adopt(size_t i, Tensor present);
  // The positions appended (or adopted) by the last step are now part of the cache.
  void advance(int64_t count);

 private:
  struct Entry {
    std::string name;
    Shape shape;  // with the positions axis at capacity_
    int axis;
    Tensor buffer;
  };
  // Bytes of one position of one row (the dims after the axis) and the rows (dims before it).
  static int64_t row_bytes(const Entry& e);
  static int64_t outer(const Entry& e);
  std::vector<Entry> entries_;
  int64_t length_ = 0;
  int64_t capacity_ = 0;
};

}  // namespace grove::generate
