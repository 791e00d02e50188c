#pragma once
// Pieces of a running tile that idle workers may take (Job::pieces, runtime/engine.h).
//
// With one tile per thread per op, a core slower than the others (a busy hyperthread
// sibling, a noisy neighbour in a VM) holds half of every op: the others run their half and
// wait. A tile its job says can run in pieces is offered on its worker's slot of the board;
// the owner runs its pieces, and a worker with nothing in the pool takes some instead of
// spinning. So a faster core ends up running more of the op.
//
// Each take is half of the pieces left (at least one) run as one call, as in guided
// self-scheduling: an owner alone runs a tile of P pieces in about log2(P) calls, not P (each
// call of a kernel costs its set-up), and the last takes are single pieces, which is how
// closely two cores' finishing times can meet.
//
// One slot per worker slot (worker threads and run()'s caller), written by its owner only.
// `claim` packs (generation, pieces, next piece) in one word: a worker takes pieces from `next`
// on by moving it on with a compare-exchange, which fails once the owner has offered another tile
// (a new generation), so a piece is never taken from a stale offer. The owner reads the
// offer's job and tile fields only after every piece it handed out has finished, and a taker
// reads them only after its compare-exchange succeeded: the fields never change under a taker.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace grove {

struct JobState;

struct alignas(64) HelpSlot {
  std::atomic<uint64_t> claim{0};     // generation << 32 | pieces << 16 | next; pieces 0: nothing offered
  std::atomic<uint32_t> finished{0};  // pieces of the current offer that have returned
  JobState* job = nullptr;            // the offered tile, set before the offer is published
  int32_t tile = -1;
};

// Most pieces one tile is offered in: the claim word's fields hold up to 65535.
inline constexpr int kMaxTilePieces = 64;

struct HelpClaim {
  HelpSlot* slot = nullptr;
  int first = 0, end = 0;  // pieces [first, end) of `pieces`
  int pieces = 0;
};

class HelpBoard {
 public:
  explicit HelpBoard(int slots) : slots_(new HelpSlot[static_cast<size_t>(slots)]), count_(slots) {}
  int size() const { return count_; }
  HelpSlot& slot(int i) { return slots_[static_cast<size_t>(i)]; }

  // Publishes an offer of `pieces` pieces of `tile` on `slot` (its owner only).
  static void offer(HelpSlot& slot, uint32_t generation, JobState* job, int32_t tile, int pieces) {
    slot.job = job;
    slot.tile = tile;
    slot.finished.store(0, std::memory_order_relaxed);
    slot.claim.store(pack(generation, static_cast<uint32_t>(pieces), 0), std::memory_order_release);
  }
  // Takes half of what is left of slot's offer (at least one piece); false when nothing is.
  static bool take(HelpSlot& slot, HelpClaim& out) {
    uint64_t word = slot.claim.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t pieces = static_cast<uint32_t>(word >> 16) & 0xffff, next = static_cast<uint32_t>(word) & 0xffff;
      if (pieces == 0 || next >= pieces) return false;
      const uint32_t count = std::max<uint32_t>(1, (pieces - next) / 2);
      if (slot.claim.compare_exchange_weak(word, word + count, std::memory_order_acq_rel, std::memory_order_acquire)) {
        out = HelpClaim{&slot, static_cast<int>(next), static_cast<int>(next + count), static_cast<int>(pieces)};
        return true;
      }
    }
  }
  // Taken pieces have returned.
  static void done(const HelpClaim& c) {
    c.slot->finished.fetch_add(static_cast<uint32_t>(c.end - c.first), std::memory_order_acq_rel);
  }
  // The owner, once every piece was taken: true when every piece has returned too.
  static bool all_done(HelpSlot& slot, int pieces) {
    return slot.finished.load(std::memory_order_acquire) == static_cast<uint32_t>(pieces);
  }
  // The owner withdraws a finished offer.
  static void withdraw(HelpSlot& slot) { slot.claim.store(0, std::memory_order_release); }

 private:
  static uint64_t pack(uint32_t generation, uint32_t pieces, uint32_t next) {
    return uint64_t{generation} << 32 | uint64_t{pieces} << 16 | next;
  }
  std::unique_ptr<HelpSlot[]> slots_;
  int count_;
};

}  // namespace grove
