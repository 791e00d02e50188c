#pragma once
// Which worker threads may take tiles now (Engine::set_workers, and run()'s caller taking a
// worker's place). Worker i is benched while i >= active, or while run()'s caller works and
// i is the last active worker. A benched worker finishes the tile in hand, hands the child
// it would have followed back to the pool and waits on `generation`, which every change that
// may end a bench bumps, so a wait never misses the change that ends it.
#include <algorithm>
#include <atomic>
#include <cstdint>

namespace grove {

struct Roster {
  std::atomic<int> active{1};
  std::atomic<bool> caller_busy{false};
  bool caller_works = true;
  std::atomic<uint32_t> generation{0};

  bool benched(int worker) const {
    int n = active.load(std::memory_order_acquire);
    return worker >= n || (caller_works && worker == n - 1 && caller_busy.load(std::memory_order_acquire));
  }
  // DagView::place's shares: one per active worker, run()'s caller (row `caller_row`) taking
  // the share of the worker it stands in for. The pool row that takes a place's tiles, and a
  // row's own share.
  int row_for_place(uint16_t place, int caller_row) const {
    const int n = std::max(1, active.load(std::memory_order_acquire));
    const int share = (int(place) * n) >> 16;
    return caller_works && share == n - 1 && caller_busy.load(std::memory_order_acquire) ? caller_row : share;
  }
  bool place_is_mine(uint16_t place, int row, int caller_row) const { return row_for_place(place, caller_row) == row; }
  // After changing `active` or `caller_busy` (or raising a stop flag the waiters check).
  void changed() {
    generation.fetch_add(1, std::memory_order_acq_rel);
    generation.notify_all();
  }
  // After run()'s caller stops working: the worker it stood in for may take tiles again. It is
  // woken only if `work_waiting()` (jobs in flight beside the caller's); otherwise it sleeps on
  // until the next change, so a caller running job after job wakes no thread between them (a
  // futex wake and a spinning core per run). submit() calls work_arrived() after its pushes.
  template <class WorkWaiting>
  void caller_left(WorkWaiting work_waiting) {
    caller_busy.store(false, std::memory_order_release);
    generation.fetch_add(1, std::memory_order_acq_rel);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with work_arrived's
    if (work_waiting()) generation.notify_all();
  }
  // After a submit's pushes (its job already counted in flight): wakes the worker caller_left
  // may have left asleep, unless a caller still works, whose caller_left will see the job. Why
  // no job is stranded: of the two seq_cst fences one comes first. If caller_left's does, this
  // reads caller_busy lowered and wakes; if this one does, work_waiting() sees the job.
  void work_arrived() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!caller_busy.load(std::memory_order_relaxed)) changed();
  }
  // Blocks while `worker` is benched and `quit` is not raised.
  void wait_while_benched(int worker, const std::atomic<bool>& quit) const {
    for (;;) {
      uint32_t seen = generation.load(std::memory_order_acquire);
      if (!benched(worker) || quit.load(std::memory_order_acquire)) return;
      generation.wait(seen, std::memory_order_acquire);
    }
  }
};

}  // namespace grove
