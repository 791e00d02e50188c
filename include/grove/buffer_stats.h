#pragma once
#include <cstdint>

namespace grove {

// A session's pool of activation buffers, kept between runs so a warm run takes no memory
// from the OS.
struct BufferStats {
  int64_t in_use_bytes = 0;      // taken and not yet returned (block sizes)
  int64_t free_bytes = 0;        // on the free list
  int64_t high_water_bytes = 0;  // most in use at once; free_bytes <= 4x this
  int64_t fresh_blocks = 0;      // takes the free list could not serve (new heap blocks)
  int64_t reused_blocks = 0;     // takes served from the free list
};

}  // namespace grove
