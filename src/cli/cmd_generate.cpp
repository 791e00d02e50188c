// grove generate: token-by-token generation with an ONNX decoder and its key/value cache
// (grove/generate.h, docs/generation.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/options.h"
#include "grove/generate.h"
#include "onnx/import.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace grove::cli {

namespace {

constexpr const char* kGenerateFooter = R"(
The model is an ONNX decoder as torch.onnx and Hugging Face's exporters write one: inputs
input_ids, past_key_values.N.key/.value (or past_N, past.N) and, optionally, attention_mask and
position_ids; outputs logits and present.N.key/.value. With attention_mask and position_ids the
cache's capacity grows by a quarter when full and each capacity is planned once; without them every step
has new shapes and is planned anew (slow). Batch 1. Greedy unless --temperature is set.

Examples:
  grove generate gpt2.onnx --prompt-ids 464,3290,318 --max-new-tokens 32
  grove generate gpt2.onnx --prompt-ids 464 --temperature 0.8 --top-k 40 --seed 7
  grove generate gpt2.onnx --prompt-ids 464 --precision bf16 --json
docs/generation.md
)";

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0)
      throw Error("--prompt-ids: '" + item + "' is not a token id (non-negative integers separated by commas)");
    ids.push_back(v);
  }
  if (ids.empty()) throw Error("--prompt-ids: no token ids");
  return ids;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

int run_generate(const GenerateCliOptions& o) {
  const std::vector<int64_t> prompt = parse_ids(o.prompt_ids);
  // A path that cannot be written fails now, not after the whole generation.
  if (!o.trace_path.empty() && !std::ofstream(o.trace_path)) throw Error(o.trace_path + ": cannot write the trace file");
  const auto t0 = std::chrono::steady_clock::now();
  Engine engine({.threads = o.threads});
  SessionOptions options{.schedule = o.schedule == "barrier" ? Schedule::barrier : Schedule::aspen,
                         .precision = parse_precision(o.precision),
                         .tuning = o.tuning};
  options.tiles_per_op = o.tiles_per_op;
  options.tile_pieces = o.pieces;
  options.cached_plans = 32;  // a prompt shape and one shape per cache capacity
  Session session(engine, model_from_graph(load_onnx(o.model, o.limits), {}, o.limits), options);
  Generator generator(session);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!generator.io().can_mask() && !o.json)
    std::printf("note: the model has no %s: every step plans a new shape\n",
                generator.io().attention_mask.empty() ? "attention_mask" : "position_ids");

  GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.sampling = {.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p, .seed = o.seed};
  if (o.eos >= 0) g.eos = o.eos;
  g.min_capacity = o.min_capacity;
  if (!o.json) {
    std::printf("tokens:");
    g.on_token = [](int64_t token) {
      std::printf(" %lld", static_cast<long long>(token));
      std::fflush(stdout);
      return true;
    };
  }
  // Untimed generations first: their plans (the prompt's shape, each cache capacity) and
  // packed weights stay in the session, so the timed one measures steady prefill and decode.
  for (int i = 0; i < o.warmup; ++i) {
    GenerateOptions quiet = g;
    quiet.on_token = nullptr;
    generator.generate(prompt, quiet);
  }
  GenerateStats st;
  const std::vector<int64_t> tokens = generator.generate(prompt, g, &st);
  // Untimed, like a warm-up (tracing costs a little per tile), after the timed report.
  auto trace_once = [&] {
    if (o.trace_path.empty()) return;
    GenerateOptions quiet = g;
    quiet.on_token = nullptr;
    engine.start_trace();
    generator.generate(prompt, quiet);
    write_trace(engine, o.trace_path, o.json ? stderr : stdout);  // --json keeps stdout one JSON object
  };

  // Steady decode: the steps that did not plan a new shape.
  std::vector<double> steady;
  for (size_t i = 0; i < st.step_ms.size(); ++i)
    if (!st.step_planned[i]) steady.push_back(st.step_ms[i]);
  const double per_token = median(steady.empty() ? st.step_ms : steady);
  const int planned = static_cast<int>(std::count(st.step_planned.begin(), st.step_planned.end(), true));
  if (o.json) {
    std::printf("{\"prompt\":[%s],\"tokens\":[%s],\"load_ms\":%.3f,\"prefill_ms\":%.3f,\"step_ms\":[", join(prompt).c_str(),
                join(tokens).c_str(), load_ms, st.prefill_ms);
    for (size_t i = 0; i < st.step_ms.size(); ++i) std::printf("%s%.4f", i ? "," : "", st.step_ms[i]);
    std::printf("],\"step_planned\":[");
    for (size_t i = 0; i < st.step_planned.size(); ++i) std::printf("%s%d", i ? "," : "", st.step_planned[i] ? 1 : 0);
    std::printf("],\"steps_planned\":%d,\"median_step_ms\":%.4f,\"tokens_per_s\":%.3f,\"cache_capacity\":%lld,"
                "\"cache_bytes\":%lld,\"threads\":%d}\n",
                planned, per_token, per_token > 0 ? 1000.0 / per_token : 0.0,
                static_cast<long long>(st.cache_capacity), static_cast<long long>(st.cache_bytes), engine.threads());
    std::fflush(stdout);
    trace_once();
    return 0;
  }
  std::printf("\n");
  std::printf("load: %s; prefill (%zu tokens%s): %s\n", milliseconds(load_ms / 1000).c_str(), prompt.size(),
              o.warmup > 0 ? "" : ", planning its shape included", milliseconds(st.prefill_ms / 1000).c_str());
  if (!st.step_ms.empty())
    std::printf("decode: %zu steps, median %s per token (%.1f tokens/s), %d of them planned a new cache capacity\n",
                st.step_ms.size(), milliseconds(per_token / 1000).c_str(), per_token > 0 ? 1000.0 / per_token : 0.0,
                planned);
  std::printf("cache: %lld positions, %.1f MB; %d thread%s, %s schedule, %s\n",
              static_cast<long long>(st.cache_capacity), st.cache_bytes / 1e6, engine.threads(),
              engine.threads() == 1 ? "" : "s", o.schedule.c_str(), o.precision.c_str());
  trace_once();
  return 0;
}

CLI::App* add_generate_command(CLI::App& app, GenerateCliOptions& o) {
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens with an ONNX decoder and its key/value cache");
  cmd->footer(kGenerateFooter);
  cmd->add_option("model", o.model, "The decoder's .onnx file")->required();
  cmd->add_option("--prompt-ids", o.prompt_ids, "The prompt's token ids, comma-separated, e.g. 464,3290,318")->required();
  cmd->add_option("-n,--max-new-tokens", o.max_new_tokens, "Tokens to generate")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--temperature", o.temperature, "0: greedy; else sample from softmax(logits / T)")
      ->capture_default_str()->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", o.top_k, "Sample among the k most likely tokens (0: all)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", o.top_p, "Sample among the most likely tokens whose probabilities sum to p")
      ->capture_default_str()->check(CLI::Range(1e-9, 1.0));
  cmd->add_option("--seed", o.seed, "Seed of the sampling")->capture_default_str();
  cmd->add_option("--eos", o.eos, "Stop after this token id (-1: never)")->capture_default_str();
  cmd->add_option("--min-capacity", o.min_capacity, "The cache's first capacity in positions; when full it grows by a quarter (at least this many)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--warmup", o.warmup,
                  "Untimed generations first (the same prompt and settings), so the timed one finds its shapes planned")
      ->capture_default_str()->check(CLI::Range(0, 100));
  add_threads_option(cmd, o.threads);
  cmd->add_option("--tiles-per-op", o.tiles_per_op, "Target tiles per op (0: by rule)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--pieces", o.pieces,
                  "on: a weight op's tiles run in pieces the faster core takes from the slower one's (docs/runtime.md); "
                  "off: every tile whole, for comparisons")
      ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"on", true}, {"off", false}}))
      ->default_str("on");
  add_schedule_option(cmd, o.schedule, "aspen or barrier");
  add_precision_option(cmd, o.precision, {"fp32", "bf16", "int8w"});
  add_tuning_option(cmd, o.tuning);
  cmd->add_flag("--json", o.json, "Print one JSON object: tokens, prefill and per-step milliseconds, tokens/s");
  cmd->add_option("--trace", o.trace_path,
                  "After the timed generation, one more (untimed, the same settings) traced to this .json file "
                  "(Chrome/Perfetto): its prefill and every decode step, tile by tile");
  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli
