#include "generate/kv_cache.h"

#include <cstring>

#include "grove/error.h"

namespace grove::generate {

KvCache::KvCache(const std::vector<ValueSpec>& specs, const std::vector<int>& axes) {
  for (size_t i = 0; i < specs.size(); ++i) {
    Entry e{specs[i].name, Shape(specs[i].dims.begin(), specs[i].dims.end()), axes[i], {}};
    if (specs[i].dtype == DType::undefined || specs[i].dtype == DType::string)
      throw Error("cache input '" + e.name + "' has no numeric element type");
    e.shape[0] = 1;
    for (size_t d = 1; d < e.shape.size(); ++d) {
      if (static_cast<int>(d) == e.axis) e.shape[d] = 0;
      else if (e.shape[d] < 0)
        throw Error("cache input '" + e.name + "' has a symbolic dimension " + std::to_string(d) +
                    " besides its positions: the cache cannot be allocated");
    }
    e.buffer = Tensor(specs[i].dtype, e.shape);
    entries_.push_back(std::move(e));
  }
}

int64_t KvCache::row_bytes(const Entry& e) {
  int64_t n = static_cast<int64_t>(dtype_size(e.buffer.dtype()));
  for (size_t d = static_cast<size_t>(e.axis) + 1; d < e.shape.size(); ++d) n *= e.shape[d];
  return n;
}

int64_t KvCache::outer(const Entry& e) {
  int64_t n = 1;
  for (int d = 0; d < e.axis; ++d) n *= e.shape[static_cast<size_t>(d)];
  return n;
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (const Entry& e : entries_) total += static_cast<int64_t>(e.buffer.bytes());
  return total;
}

void KvCache::reserve(int64_t capacity) {
  if (capacity <= capacity_) return;
  for (Entry& e : entries_) {
    Shape shape = e.shape;
    shape[static_cast<size_t>(e.axis)] = capacity;
    Tensor grown(e.buffer.dtype(), shape);
    const int64_t row = row_bytes(e), rows = outer(e);
    for (int64_t o = 0; o < rows && length_ > 0; ++o)
      std::memcpy(grown.raw() + o * capacity * row, e.buffer.raw() + o * capacity_ * row,
                  static_cast<size_t>(length_ * row));
    e.shape = std::move(shape);
    e.buffer = std::move(grown);
  }
  capacity_ = capacity;
}

void KvCache::append(size_t i, const Tensor& present, int64_t from, int64_t count) {
  Entry& e = entries_.at(i);
  const size_t axis = static_cast<size_t>(e.axis);
  if (present.dtype() != e.buffer.dtype() || present.rank() != static_cast<int64_t>(e.shape.size()))
    throw Error("cache output for '" + e.name + "' is " + std::string(dtype_name(present.dtype())) + " " +
                shape_str(present.shape()) + ", not shaped like the past " + shape_str(e.shape));
  for (size_t d = 0; d < e.shape.size(); ++d)
    if (d != axis && present.dim(static_cast<int64_t>(d)) != e.shape[d])
      throw Error("cache output for '" + e.name + "' is " + shape_str(present.shape()) + ", past is " +
                  shape_str(e.shape));
  const int64_t positions = present.dim(static_cast<int64_t>(axis));
  if (from < 0 || from + count > positions || length_ + count > capacity_)
    throw Error("cache output for '" + e.name + "' has " + std::to_string(positions) + " positions; expected " +
                std::to_string(from + count) + " (the past and the new tokens)");
  const int64_t row = row_bytes(e), rows = outer(e);
  for (int64_t o = 0; o < rows; ++o)
    std::memcpy(e.buffer.raw() + (o * capacity_ + length_) * row, present.raw() + (o * positions + from) * row,
                static_cast<size_t>(count * row));
}

void KvCache::adopt(size_t i, Tensor present) {
  Entry& e = entries_.at(i);
  if (present.dtype() != e.buffer.dtype() || present.rank() != static_cast<int64_t>(e.shape.size()))
    throw Error("cache output for '" + e.name + "' is not shaped like its past " + shape_str(e.shape));
  for (size_t d = 0; d < e.shape.size(); ++d)
    if (static_cast<int>(d) != e.axis && present.dim(static_cast<int64_t>(d)) != e.shape[d])
      throw Error("cache output for '" + e.name + "' is " + shape_str(present.shape()) + ", past is " +
                  shape_str(e.shape));
  e.shape = present.shape();
  capacity_ = e.shape[static_cast<size_t>(e.axis)];
  e.buffer = std::move(present);
}

void KvCache::advance(int64_t count) {
  if (length_ + count > capacity_) throw Error("KvCache::advance: past the capacity");
  length_ += count;
}

}  // namespace grove::generate
