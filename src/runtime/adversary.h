#pragma once
// Schedule fuzzing for the adversarial test build (CMake -DGROVE_ADVERSARIAL=ON): short random
// delays around tiles, random pop/steal order, a random ready child followed. Results that
// depend on the schedule then show up as test failures. In normal builds kAdversarial is false
// and every use sits behind `if constexpr`, so none of it is compiled in.
#include <chrono>
#include <cstdint>
#include <thread>

#include "runtime/ready_pool.h"

namespace grove {

#ifdef GROVE_ADVERSARIAL
inline constexpr bool kAdversarial = true;
#else
inline constexpr bool kAdversarial = false;
#endif

class Adversary {
 public:
  explicit Adversary(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}

  uint32_t next() {  // xorshift64*: tiny, and each worker owns its own
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  }
  uint32_t below(uint32_t n) { return n == 0 ? 0 : next() % n; }

  // Mostly nothing; sometimes a yield, a busy wait or a short sleep (tens of microseconds).
  void delay() {
    switch (next() % 16) {
      case 0: std::this_thread::yield(); break;
      case 1: {
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(below(30));
        while (std::chrono::steady_clock::now() < until) {
        }
        break;
      }
      case 2: std::this_thread::sleep_for(std::chrono::microseconds(below(60))); break;
      default: break;
    }
  }

  PopOrder pop_order(int rows, int columns) {
    return PopOrder{static_cast<int>(below(static_cast<uint32_t>(rows))),
                    static_cast<int>(below(static_cast<uint32_t>(columns))), (next() & 1) != 0};
  }

 private:
  uint64_t state_;
};

}  // namespace grove
