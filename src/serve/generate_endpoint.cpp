// POST /v2/models/{name}/generate: token-by-token generation with a served decoder
// (grove/generate.h), answered in one JSON reply once the tokens are chosen:
//   {"prompt_ids": [464, 3290], "max_new_tokens": 32, "temperature": 0.8, "top_k": 40,
//    "top_p": 0.95, "seed": 7, "eos": 50256}
//   -> {"model_name", "tokens": [...], "prefill_ms", "median_step_ms", "tokens_per_s"}
// POST /v2/models/{name}/generate_stream takes the same request and answers with Server-Sent
// Events, one per token as it is chosen, then the reply above with "done": true:
//   data: {"index": 0, "token": 4}\n\n ... data: {"done": true, "tokens": [...], ...}\n\n
// A failure after the first event is an `event: error` with {"error"}; a client that goes
// away stops the generation at its next token.
// Both take a place among --max-concurrent, reserve the cache's and the steps' memory from the
// server budget, and stop at the request deadline (504) like an inference.
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

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
  return {.status = status, .content_type = "application/json", .headers = {}, .body = body.dump(), .stream = {}};
}

std::string event(const json& data, const char* name = nullptr) {
  return (name ? std::string("event: ") + name + "\n" : std::string()) + "data: " + data.dump() + "\n\n";
}

}  // namespace

// One accepted generation: what it holds from the server until it ends (a place among
// --max-concurrent, reserved memory), and what it runs.
struct InferenceServer::Generation {
  Generation(InferenceServer& server, ServedModel& m) : model(m), in_flight(server, m) {}
  ServedModel& model;
  InFlight in_flight;
  std::optional<MemoryBudget::Reservation> reservation;  // taken after the place
  std::unique_ptr<Generator> generator;
  std::vector<int64_t> prompt;
  GenerateOptions options;

  // The final reply's fields.
  json summary(const std::vector<int64_t>& tokens, const GenerateStats& st) const {
    std::vector<double> steps = st.step_ms;
    std::sort(steps.begin(), steps.end());
    const double median = steps.empty() ? 0.0 : steps[steps.size() / 2];
    return {{"model_name", model.name},
            {"tokens", tokens},
            {"prefill_ms", st.prefill_ms},
            {"median_step_ms", median},
            {"tokens_per_s", median > 0 ? 1000.0 / median : 0.0}};
  }
};

std::shared_ptr<InferenceServer::Generation> InferenceServer::start_generation(ServedModel& model, const HttpRequest& request) {
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
  auto g = std::make_shared<Generation>(*this, model);

  // The cache at its last capacity, a present of it per step and the model's own copy into
  // the presents: three times the cache, plus a step's other activations. (A decoder whose
  // presents the step session drops, generate/decoder_step.h, holds one cache: the bound
  // stays the worst case, for models whose presents are copied.)
  const int64_t positions = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
  const int64_t need = 3 * bytes_per_position(model.inputs, generator->io()) * (positions + positions / 4 + 64) + kStepBytes;
  o.cancel = CancelToken::after(options_.request_timeout_s);
  g->reservation.emplace(memory_.reserve(
      need, std::min(o.cancel.deadline(), MemoryBudget::Clock::now() + std::chrono::duration_cast<MemoryBudget::Clock::duration>(
                                                                        std::chrono::duration<double>(options_.memory_wait_s)))));
  if (!*g->reservation)
    throw HttpError(503, "server memory budget exhausted: a generation of " + std::to_string(positions) + " positions needs " +
                             std::to_string(need) + " bytes, " + std::to_string(memory_.reserved()) + " of the " +
                             std::to_string(memory_.capacity()) + " bytes (--max-serve-memory) are reserved; retry later");
  g->generator = std::move(generator);
  g->prompt = std::move(prompt);
  g->options = std::move(o);
  return g;
}

HttpResponse InferenceServer::generate(ServedModel& model, const HttpRequest& request) {
  std::shared_ptr<Generation> g = start_generation(model, request);
  GenerateStats st;
  std::vector<int64_t> tokens;
  try {
    tokens = g->generator->generate(g->prompt, g->options, &st);
  } catch (const Error& e) {
    if (e.kind() == Error::Kind::cancelled) throw HttpError(504, timed_out_message(model));
    throw HttpError(400, "model '" + model.name + "': " + e.what());
  }
  g->in_flight.succeeded();
  return reply(g->summary(tokens, st));
}

HttpResponse InferenceServer::generate_stream(ServedModel& model, const HttpRequest& request) {
  std::shared_ptr<Generation> g = start_generation(model, request);
  HttpResponse r{.status = 200, .content_type = "text/event-stream", .headers = {{"Cache-Control", "no-cache"}}, .body = {}, .stream = {}};
  // The generation's place and memory are given back when it ends, not when the response
  // holding it is destroyed.
  r.stream = [this, g](const HttpResponse::Write& write) mutable {
    if (!g) return;  // streamed already
    const std::shared_ptr<Generation> held = std::move(g);
    bool client_gone = false;
    int64_t index = 0;
    GenerateOptions o = held->options;
    o.on_token = [&](int64_t token) {
      client_gone = !write(event({{"index", index++}, {"token", token}}));
      return !client_gone;
    };
    GenerateStats st;
    std::string last;
    try {
      const std::vector<int64_t> tokens = held->generator->generate(held->prompt, o, &st);
      if (client_gone) return;
      json done = held->summary(tokens, st);
      done["done"] = true;
      last = event(done);
      held->in_flight.succeeded();
    } catch (const Error& e) {
      last = event({{"error", e.kind() == Error::Kind::cancelled ? timed_out_message(held->model)
                                                                 : "model '" + held->model.name + "': " + e.what()}},
                   "error");
    } catch (const std::exception& e) {
      last = event({{"error", std::string("internal error: ") + e.what()}}, "error");
    }
    write(last);
  };
  return r;
}

}  // namespace grove::serve
