#pragma once
// The session a Generator steps with. A decoder as the exporters write it returns each present
// as Concat(past, new) along the positions: every step copies the whole cache into it, only
// for the Generator to copy the new positions back out (kv_cache.h). The step session runs the
// same graph with each such present output replaced by its `new` value, so the Concat has no
// reader but the attention, which then reads the cache and the new tokens where they are
// (fuse_attention's cache parts, ops/attention/attention.h).
#include <string>
#include <vector>

#include "grove/generate.h"
#include "grove/session.h"

namespace grove::generate {

struct DecoderStep {
  Session* session = nullptr;
  // Per cache entry (DecoderIo::cache's order): the output holding only the step's new
  // positions, or "" where the step returns the whole present.
  std::vector<std::string> new_positions;
};

// The step session of `session`, made once and kept with it (runtime/session.h's derived
// sessions); `session` itself, with every new_positions "", when some present is not
// Concat(past, new) of its past input (nothing changes: the generator copies out of the presents).
DecoderStep decoder_step(Session& session, const DecoderIo& io);

}  // namespace grove::generate
