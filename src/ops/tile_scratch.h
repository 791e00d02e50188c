#pragma once
// Working memory a tile rule keeps from one tile to the next (padded rows, im2col windows,
// Winograd transforms, GEMM packing): one TileScratch per worker, owned by whoever runs the
// tiles (a Session keeps a WorkerScratch per plan, indexed by the worker id the engine passes
// to a tile), so rules reuse their buffers without allocating and without thread_local state.
//
// Each rule keeps its own workspace type: get<T>() makes a T on first use and returns the same
// object after. Two rules must not share a type (one could hand the other's buffers a tile
// later, mid-use, if a rule ran inside another's).
#include <cstddef>
#include <memory>
#include <typeindex>
#include <unordered_map>
#include <vector>

#include <string>

#include "graph/error.h"

namespace grove {

class TileScratch {
 public:
  template <class T>
  T& get() {
    std::shared_ptr<void>& slot = slots_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }

 private:
  std::unordered_map<std::type_index, std::shared_ptr<void>> slots_;
};

// One TileScratch per worker slot (worker_slots(engine), runtime/engine.h). A worker runs one tile at a time,
// so its slot is never used by two tiles at once.
class WorkerScratch {
 public:
  explicit WorkerScratch(size_t slots) : slots_(slots) {}
  TileScratch& of(int worker) {
    if (worker < 0 || static_cast<size_t>(worker) >= slots_.size())
      throw Error("worker " + std::to_string(worker) + " has no scratch: " + std::to_string(slots_.size()) + " slots");
    return slots_[static_cast<size_t>(worker)];
  }
  size_t slots() const { return slots_.size(); }

 private:
  std::vector<TileScratch> slots_;
};

}  // namespace grove
