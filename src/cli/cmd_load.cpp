// grove load: a load generator for a KServe v2 server (grove serve or any other): C clients
// with keep-alive connections send N inference requests of seeded random inputs, then the
// throughput, latency percentiles, errors, and whether every answer was the same.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench_stats.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "graph/error.h"
#include "graph/tensor.h"
#include "serve/kserve_tensor.h"

namespace grove::cli {
namespace {

using json = nlohmann::json;

// Seeded random data for one input, like `grove run`'s: floats in [-1, 1), integers in
// [0, 100), bools 0/1.
Tensor random_input(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  Tensor t(dtype, shape);
  if (dtype == DType::f16) {
    std::uniform_real_distribution<double> u(-1, 1);
    auto* h = reinterpret_cast<uint16_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) h[i] = f64_to_f16(u(rng));
    return t;
  }
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) p[i] = (rng() & 1) != 0;
      else if constexpr (std::is_floating_point_v<T>) p[i] = static_cast<T>(std::uniform_real_distribution<double>(-1, 1)(rng));
      else p[i] = static_cast<T>(rng() % 100);
    }
  });
  return t;
}

struct Request {
  std::string body;
  std::string content_type;
  httplib::Headers headers;
};

Request build_request(const json& metadata, bool binary, uint64_t seed) {
  std::mt19937_64 rng(seed);
  json request = {{"inputs", json::array()}};
  std::string bytes;
  for (const json& in : metadata.at("inputs")) {
    DType dtype = serve::dtype_from_kserve(in.at("datatype").get<std::string>());
    if (dtype == DType::undefined) throw Error("grove load: input '" + in.at("name").get<std::string>() + "' has datatype " +
                                               in.at("datatype").get<std::string>() + ", which grove load cannot generate");
    Shape shape;
    for (const json& d : in.at("shape")) shape.push_back(std::max<int64_t>(1, d.get<int64_t>()));  // dynamic dims: 1
    Tensor t = random_input(dtype, shape, rng);
    json entry = {{"name", in.at("name")}, {"datatype", in.at("datatype")}, {"shape", shape}};
    if (binary) {
      entry["parameters"] = {{"binary_data_size", t.bytes()}};
      bytes.append(reinterpret_cast<const char*>(t.raw()), t.bytes());
    } else {
      entry["data"] = serve::tensor_to_json(t);
    }
    request["inputs"].push_back(entry);
  }
  if (binary) request["parameters"] = {{"binary_data_output", true}};
  Request r;
  r.body = request.dump();
  r.content_type = "application/json";
  if (binary) {
    r.headers.emplace("Inference-Header-Content-Length", std::to_string(r.body.size()));
    r.body += bytes;
    r.content_type = "application/octet-stream";
  }
  return r;
}

}  // namespace

int run_load(const LoadOptions& o) {
  if (o.model.empty()) throw Error("grove load: give --model NAME");
  if (o.concurrency < 1 || o.requests < 1) throw Error("grove load: --concurrency and --requests must be at least 1");
  httplib::Client probe(o.url);
  probe.set_connection_timeout(5, 0);
  auto meta = probe.Get(("/v2/models/" + o.model).c_str());
  if (!meta) throw Error("grove load: cannot reach " + o.url + " (" + httplib::to_string(meta.error()) + ")");
  if (meta->status != 200) throw Error("grove load: " + o.url + "/v2/models/" + o.model + " answered " + std::to_string(meta->status) + ": " + meta->body);
  json metadata;
  try {
    metadata = json::parse(meta->body);
  } catch (const json::exception& e) {
    throw Error(std::string("grove load: the model metadata is not JSON: ") + e.what());
  }
  const Request request = build_request(metadata, o.binary, o.seed);
  const std::string path = "/v2/models/" + o.model + "/infer";

  std::atomic<int> next{0};
  std::mutex mutex;
  std::vector<double> latencies_ms;
  std::map<std::string, int> errors;  // "status: first line" -> count
  std::string first_answer;
  int mismatches = 0;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < o.concurrency; ++c) {
    clients.emplace_back([&] {
      httplib::Client client(o.url);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);  // a request written as header then body must not wait for an ACK
      client.set_read_timeout(120, 0);
      while (next.fetch_add(1) < o.requests) {
        auto t0 = std::chrono::steady_clock::now();
        auto res = client.Post(path.c_str(), request.headers, request.body, request.content_type.c_str());
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mutex);
        if (!res) {
          errors["no answer: " + httplib::to_string(res.error())]++;
        } else if (res->status != 200) {
          errors[std::to_string(res->status) + ": " + res->body.substr(0, 200)]++;
        } else {
          latencies_ms.push_back(ms);
          if (first_answer.empty()) first_answer = res->body;
          else if (res->body != first_answer) ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int failed = 0;
  for (const auto& [what, n] : errors) failed += n;
  const double throughput = static_cast<double>(latencies_ms.size()) / seconds;
  if (o.json) {
    json out = {{"model", o.model}, {"requests", o.requests}, {"concurrency", o.concurrency}, {"binary", o.binary},
                {"ok", latencies_ms.size()}, {"errors", failed}, {"mismatches", mismatches}, {"seconds", seconds},
                {"throughput_rps", throughput}, {"p50_ms", percentile(latencies_ms, 50)},
                {"p90_ms", percentile(latencies_ms, 90)}, {"p99_ms", percentile(latencies_ms, 99)}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("grove load: %d requests to '%s' at %s, %d clients, %s tensors\n", o.requests, o.model.c_str(), o.url.c_str(),
                o.concurrency, o.binary ? "binary" : "JSON");
    std::printf("  ok %zu, errors %d, answers differing from the first %d\n", latencies_ms.size(), failed, mismatches);
    std::printf("  throughput %.1f requests/s over %.2f s\n", throughput, seconds);
    std::printf("  latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms\n", percentile(latencies_ms, 50),
                percentile(latencies_ms, 90), percentile(latencies_ms, 99));
    for (const auto& [what, n] : errors) std::printf("  %d x %s\n", n, what.c_str());
  }
  return failed == 0 && mismatches == 0 ? 0 : 1;
}

constexpr const char* kLoadCommandFooter = R"(
Reads the model's metadata from the server, builds one request of seeded random inputs
(floats in [-1, 1), integers in [0, 100), bools; dynamic dims as 1) and sends it --requests
times from --concurrency clients with keep-alive connections. Prints throughput, latency
p50/p90/p99, errors by status, and how many answers differed from the first (a deterministic
server: 0). Exit status 1 when any request failed or differed.

Examples:
  grove load http://127.0.0.1:8000 --model resnet -c 16 -n 1000
  grove load http://127.0.0.1:8000 --model bert --binary --json
)";


CLI::App* add_load_command(CLI::App& app, LoadOptions& o) {
  CLI::App* cmd = app.add_subcommand("load", "Load-test a KServe v2 server: throughput and latency percentiles");
  cmd->footer(kLoadCommandFooter);
  cmd->add_option("url", o.url, "The server")->capture_default_str();
  cmd->add_option("--model", o.model, "Model name on the server")->required();
  cmd->add_option("--concurrency,-c", o.concurrency, "Clients sending at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--requests,-n", o.requests, "Requests in all")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--binary", o.binary, "Send and ask for tensors as binary data, not JSON");
  add_seed_option(cmd, o.seed);
  cmd->add_flag("--json", o.json, "Print the results as JSON");
  return cmd;
}

}  // namespace grove::cli
