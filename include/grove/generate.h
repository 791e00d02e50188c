#pragma once
// Autoregressive generation with an ONNX decoder that takes its key/value cache as inputs
// (past_key_values.N.key, ...) and returns it grown by the new tokens (present.N.key, ...),
// as torch.onnx and Hugging Face's exporters write decoders. docs/generation.md.
//
//   grove::Session session = grove::Session::load(engine, "gpt2.onnx");
//   grove::Generator gen(session);
//   auto tokens = gen.generate({464, 3290, 318}, {.max_new_tokens = 32});
//
// The prompt runs as one step of all its tokens (prefill), then one step per new token. The
// cache lives in buffers the generator owns, bound to the past inputs without a copy; only
// the new tokens' keys and values are copied out of each step's presents. When the model takes
// attention_mask and position_ids, the cache has spare capacity, growing by a quarter when
// full, and the empty slots are masked, so a step's shapes change only when the capacity grows
// and each capacity is planned once; without them the cache grows by one slot per step and
// every step's shapes are new.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grove/cancel.h"
#include "grove/session.h"

namespace grove {

// Which inputs and outputs of a decoder carry what (found from the names by DecoderIo::find).
struct DecoderIo {
  std::string input_ids;       // int64 or int32 [batch, new tokens]
  std::string attention_mask;  // empty when the model has none
  std::string position_ids;    // empty when the model has none
  std::string logits;          // [batch, new tokens, vocabulary]
  struct CacheEntry {
    std::string past, present;  // [batch, heads, positions, head dim] (positions on `axis`)
    int axis = 2;
  };
  std::vector<CacheEntry> cache;

  // The decoder interface of a model, or an Error naming what is missing or ambiguous.
  static DecoderIo find(const std::vector<ValueSpec>& inputs, const std::vector<ValueSpec>& outputs);
  // True when empty cache slots can be masked: the cache may then have spare capacity.
  bool can_mask() const { return !attention_mask.empty() && !position_ids.empty(); }
};

// How the next token is chosen from the last position's logits.
struct Sampling {
  double temperature = 0;  // 0: greedy (the largest logit, the lowest index on a tie)
  int top_k = 0;           // > 0: sample among the k most likely tokens only
  double top_p = 1.0;      // < 1: sample among the most likely tokens whose probabilities sum to p
  uint64_t seed = 0;       // the same seed, model and prompt give the same tokens
};

// The token `sampling` picks from `logits` (one row of vocabulary scores), drawing from `rng`
// (a splitmix64 state the call advances) unless greedy.
int64_t pick_token(const float* logits, int64_t vocabulary, const Sampling& sampling, uint64_t& rng);

struct GenerateOptions {
  int max_new_tokens = 16;
  Sampling sampling;
  std::optional<int64_t> eos;  // stop after this token
  // The cache's first capacity (masked models); when full it grows by a quarter, at least this.
  int64_t min_capacity = 64;
  // Called with each new token as soon as it is chosen; return false to stop.
  std::function<bool(int64_t token)> on_token;
  // Once it stops, the step in flight stops (its tiles not yet started are skipped) and
  // generate() throws an Error of kind `cancelled` (a server's request deadline).
  CancelToken cancel;
};

struct GenerateStats {
  double prefill_ms = 0;          // the prompt's step, including planning a new shape
  std::vector<double> step_ms;    // every later step (one new token each)
  std::vector<bool> step_planned; // whether that step planned a new shape (the cache grew)
  int64_t cache_capacity = 0;     // positions the cache holds at the end
  int64_t cache_bytes = 0;        // bytes of the cache buffers at the end
};

class Generator {
 public:
  // The session must outlive the generator; DecoderIo::find must succeed on its model. Only
  // batch 1: one prompt at a time. Not thread-safe: one generation at a time per generator.
  explicit Generator(Session& session);
  const DecoderIo& io() const { return io_; }

  // The new tokens (not the prompt), at most max_new_tokens, ending early at eos or when
  // on_token returns false. Throws Error for an empty prompt or a failing step.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, const GenerateOptions& options,
                                GenerateStats* stats = nullptr);

 private:
  Session* session_;
  DecoderIo io_;
};

}  // namespace grove
