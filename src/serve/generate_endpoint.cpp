// POST /v2/models/{name}/generate: token-by-token generation with a served decoder
// (grove/generate.h), answered in one JSON reply once the tokens are chosen:
//   {"prompt_ids": [464, 3290], "max_new_tokens": 32, "temperature": 0.8, "top_k": 40,
//    "top_p": 0.95, "seed": 7, "eos": 50256}
//   -> {"model_name", "tokens": [...], "prefill_ms", "median_step_ms", "tokens_per_s"}
// It takes a place among --max-concurrent, reserves the cache's and the steps' memory from the
// server budget, and stops at the request deadline (504) like an inference.
#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "grove/generate.h"
#include "serve/inference_server.h"
#include "serve/json_depth.h"

namespace grove::serve {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxPromptTokens = 8192;
constexpr int64_t kMaxNewTokens = 4096;
// What a step holds besides the cache, for the memory reservation (activations of one token,
// logits): a bound for decoders of a few billion parameters, not a measurement.
constexpr int64_t kStepBytes = int64_t{64} << 20;

int64_t integer(const json& j, const char* key, int64_t fallback, int64_t lowest, int64_t highest) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lowest || v.get<int64_t>() > highest)
    throw HttpError(400, std::string("'") + key + "' must be an integer in [" + std::to_string(lowest) + ", " +
                             std::to_string(highest) + "]");
  return v.get<int64_t>();
}

double number(const json& j, const char* key, double fallback, double lowest, double highest) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  if (!v.is_number() || v.get<double>() < lowest || v.get<double>() > highest)
    throw HttpError(400, std::string("'") + key + "' must be a number in [" + std::to_string(lowest) + ", " +
                             std::to_string(highest) + "]");
  return v.get<double>();
}

// Bytes of one cache position over every cache input (batch 1), from the declared dims.
int64_t bytes_per_position(const std::vector<ValueSpec>& inputs, const DecoderIo& io) {
  int64_t total = 0;
  for (const DecoderIo::CacheEntry& c : io.cache)
    for (const ValueSpec& s : inputs) {
      if (s.name != c.past) continue;
      int64_t n = static_cast<int64_t>(dtype_size(s.dtype));
      for (size_t d = 1; d < s.dims.size(); ++d)
        if (static_cast<int>(d) != c.axis && s.dims[d] > 0) n *= s.dims[d];
      total += n;
    }
  return total;
}

HttpResponse reply(const json& body, int status = 200) {
  return {.status = status, .content_type = "application/json", .headers = {}, .body = body.dump()};
}

}  // namespace

HttpResponse InferenceServer::generate(ServedModel& model, const HttpRequest& request) {
  if (draining_.load()) throw HttpError(503, "the server is shutting down");
  check_json_depth(request.body, options_.max_json_depth);
  json j;
  try {
    j = json::parse(request.body);
  } catch (const json::exception& e) {
    throw HttpError(400, std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw HttpError(400, "the request must be a JSON object");
  if (!j.contains("prompt_ids") || !j["prompt_ids"].is_array() || j["prompt_ids"].empty() ||
      j["prompt_ids"].size() > static_cast<size_t>(kMaxPromptTokens))
    throw HttpError(400, "'prompt_ids' must be an array of 1 to " + std::to_string(kMaxPromptTokens) + " token ids");
  std::vector<int64_t> prompt;
  for (const json& t : j["prompt_ids"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0) throw HttpError(400, "'prompt_ids' holds a value that is not a token id");
    prompt.push_back(t.get<int64_t>());
  }
  GenerateOptions o;
  o.max_new_tokens = static_cast<int>(integer(j, "max_new_tokens", 16, 1, kMaxNewTokens));
  o.sampling.temperature = number(j, "temperature", 0.0, 0.0, 100.0);
  o.sampling.top_k = static_cast<int>(integer(j, "top_k", 0, 0, 1 << 30));
  o.sampling.top_p = number(j, "top_p", 1.0, 1e-9, 1.0);
  o.sampling.seed = static_cast<uint64_t>(integer(j, "seed", 0, 0, INT64_MAX));
  if (j.contains("eos")) o.eos = integer(j, "eos", 0, 0, INT64_MAX);

  std::unique_ptr<Generator> generator;
  try {
    generator = std::make_unique<Generator>(*model.session);
  } catch (const Error& e) {
    throw HttpError(400, "model '" + model.name + "' cannot generate: " + e.what());
  }
  InFlight in_flight(*this, model);

  // The cache at its last capacity, a present of it per step and the model's own copy into
  // the presents: three times the cache, plus a step's other activations.
  const int64_t positions = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
  const int64_t need = 3 * bytes_per_position(model.inputs, generator->io()) * (positions + positions / 4 + 64) + kStepBytes;
  o.cancel = CancelToken::after(options_.request_timeout_s);
  const MemoryBudget::Reservation reservation = memory_.reserve(
      need, std::min(o.cancel.deadline(), MemoryBudget::Clock::now() + std::chrono::duration_cast<MemoryBudget::Clock::duration>(
                                                                        std::chrono::duration<double>(options_.memory_wait_s))));
  if (!reservation)
    throw HttpError(503, "server memory budget exhausted: a generation of " + std::to_string(positions) + " positions needs " +
                             std::to_string(need) + " bytes, " + std::to_string(memory_.reserved()) + " of the " +
                             std::to_string(memory_.capacity()) + " bytes (--max-serve-memory) are reserved; retry later");
  GenerateStats st;
  std::vector<int64_t> tokens;
  try {
    tokens = generator->generate(prompt, o, &st);
  } catch (const Error& e) {
    if (e.kind() == Error::Kind::cancelled) throw HttpError(504, timed_out_message(model));
    throw HttpError(400, "model '" + model.name + "': " + e.what());
  }
  std::vector<double> steps = st.step_ms;
  std::sort(steps.begin(), steps.end());
  const double median = steps.empty() ? 0.0 : steps[steps.size() / 2];
  in_flight.succeeded();
  return reply({{"model_name", model.name},
                {"tokens", tokens},
                {"prefill_ms", st.prefill_ms},
                {"median_step_ms", median},
                {"tokens_per_s", median > 0 ? 1000.0 / median : 0.0}});
}

}  // namespace grove::serve
