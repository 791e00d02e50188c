// Generator: prefill, then one step per token, with the cache bound in place (kv_cache.h).
#include <chrono>
#include <set>
#include <utility>

#include "generate/decoder_step.h"
#include "generate/kv_cache.h"
#include "grove/error.h"
#include "grove/generate.h"

namespace grove {

namespace {

const ValueSpec& spec_of(const std::vector<ValueSpec>& specs, const std::string& name) {
  for (const ValueSpec& s : specs)
    if (s.name == name) return s;
  throw Error("decoder has no value '" + name + "'");
}

// An integer input of the dtype the model declares (int64 or int32).
Tensor integers(const ValueSpec& spec, Shape shape, const std::vector<int64_t>& values) {
  Tensor t(spec.dtype, std::move(shape));
  if (spec.dtype == DType::i64) std::copy(values.begin(), values.end(), t.data<int64_t>());
  else if (spec.dtype == DType::i32) std::copy(values.begin(), values.end(), t.data<int32_t>());
  else throw Error("decoder input '" + spec.name + "' is " + std::string(dtype_name(spec.dtype)) + "; expected int64 or int32");
  return t;
}

// The first capacity of min_capacity, growing by a quarter (at least min_capacity) at a time,
// that holds `positions`. A step's work grows with the capacity, not the filled positions (its
// attention reads every slot), so a doubling capacity ran a GPT-2 step at 1,000 positions at
// the speed of 1,024 from position 513 on; quarters waste at most a fifth of the slots for about 10 shapes planned per 1,000
// tokens instead of 5.
int64_t bucket(int64_t positions, int64_t min_capacity) {
  const int64_t step = std::max<int64_t>(1, min_capacity);
  int64_t c = step;
  while (c < positions) c += std::max(step, c / 4);
  return c;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Generator::Generator(Session& session)
    : session_(&session), io_(DecoderIo::find(session.inputs(), session.outputs())) {}

std::vector<int64_t> Generator::generate(const std::vector<int64_t>& prompt, const GenerateOptions& options,
                                         GenerateStats* stats) {
  if (prompt.empty()) throw Error("generate: the prompt has no tokens");
  if (options.max_new_tokens < 0) throw Error("generate: max_new_tokens must be >= 0");
  const std::vector<ValueSpec> inputs = session_->inputs();
  std::vector<ValueSpec> cache_specs;
  std::vector<int> axes;
  for (const DecoderIo::CacheEntry& c : io_.cache) {
    cache_specs.push_back(spec_of(inputs, c.past));
    axes.push_back(c.axis);
  }
  generate::KvCache cache(cache_specs, axes);
  const bool masked = io_.can_mask();
  // A masked cache is stepped by the session whose outputs are only the new positions (no
  // present copies the cache: decoder_step.h). Unmasked, each present becomes the cache.
  const generate::DecoderStep step =
      masked ? generate::decoder_step(*session_, io_)
             : generate::DecoderStep{session_, std::vector<std::string>(io_.cache.size())};
  uint64_t rng = options.sampling.seed;
  std::set<std::pair<int64_t, int64_t>> planned;  // (capacity, new tokens) of the shapes run so far
  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  st = {};

  std::vector<int64_t> ids = prompt, out;
  bool prefill = true;
  while (static_cast<int>(out.size()) < options.max_new_tokens) {
    const int64_t s = static_cast<int64_t>(ids.size()), length = cache.length();
    if (masked) cache.reserve(bucket(length + s, options.min_capacity));
    const int64_t capacity = cache.capacity();
    const bool new_shape = planned.insert({capacity, s}).second;

    TensorMap feed;
    feed[io_.input_ids] = integers(spec_of(inputs, io_.input_ids), {1, s}, ids);
    std::vector<int64_t> positions(static_cast<size_t>(s));
    for (int64_t i = 0; i < s; ++i) positions[static_cast<size_t>(i)] = length + i;
    if (!io_.position_ids.empty()) feed[io_.position_ids] = integers(spec_of(inputs, io_.position_ids), {1, s}, positions);
    if (!io_.attention_mask.empty()) {
      // Filled slots and the new tokens attend; the empty slots between them do not.
      std::vector<int64_t> mask(static_cast<size_t>(capacity + s), 1);
      for (int64_t j = length; j < capacity; ++j) mask[static_cast<size_t>(j)] = 0;
      feed[io_.attention_mask] = integers(spec_of(inputs, io_.attention_mask), {1, capacity + s}, mask);
    }
    for (size_t i = 0; i < io_.cache.size(); ++i) feed[io_.cache[i].past] = cache.past(i);

    if (options.cancel.stopped())
      throw Error(options.cancel.reason() + " after " + std::to_string(out.size()) + " of " +
                      std::to_string(options.max_new_tokens) + " new tokens",
                  Error::Kind::cancelled);
    const auto t0 = std::chrono::steady_clock::now();
    TensorMap result = step.session->run(feed, nullptr, options.cancel);
    for (size_t i = 0; i < io_.cache.size(); ++i) {
      const std::string& fresh = step.new_positions[i];
      const std::string& name = fresh.empty() ? io_.cache[i].present : fresh;
      const auto found = result.find(name);
      if (found == result.end()) throw Error("decoder step returned no '" + name + "'");
      if (!fresh.empty()) cache.append(i, found->second, 0, s);
      else if (masked) cache.append(i, found->second, capacity, s);
      else cache.adopt(i, std::move(found->second));
    }
    cache.advance(s);
    const Tensor& logits = result.at(io_.logits);
    if (logits.dtype() != DType::f32 || logits.rank() < 2)
      throw Error("decoder output '" + io_.logits + "' is " + std::string(dtype_name(logits.dtype())) + " " +
                  shape_str(logits.shape()) + "; expected float32 [batch, tokens, vocabulary]");
    const int64_t vocabulary = logits.shape().back();
    const int64_t token = pick_token(logits.data<float>() + logits.numel() - vocabulary, vocabulary, options.sampling, rng);
    const double ms = ms_since(t0);
    if (prefill) {
      st.prefill_ms = ms;
      prefill = false;
    } else {
      st.step_ms.push_back(ms);
      st.step_planned.push_back(new_shape);
    }
    out.push_back(token);
    if (options.on_token && !options.on_token(token)) break;
    if (options.eos && token == *options.eos) break;
    ids.assign(1, token);
  }
  st.cache_capacity = cache.capacity();
  st.cache_bytes = cache.bytes();
  return out;
}

}  // namespace grove
