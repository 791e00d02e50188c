#include "serve/inference_server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <set>

#include <nlohmann/json.hpp>

#include "graph/limits.h"
#include "plan/plan.h"
#include "serve/json_depth.h"
#include "serve/kserve_tensor.h"
#include "serve/live_page.h"
#include "serve/live_timeline.h"

namespace grove::serve {

using json = nlohmann::json;

namespace {

constexpr const char* kVersion = "0.1.0";

HttpResponse json_response(const json& body, int status = 200) {
  HttpResponse r;
  r.status = status;
  // Messages echo what the client sent (names), which need not be UTF-8: replace, never throw.
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

json shape_json(const ValueSpec& v) {
  json dims = json::array();
  for (int64_t d : v.dims) dims.push_back(d);
  return dims;
}

json tensor_metadata(const std::vector<ValueSpec>& values) {
  json out = json::array();
  for (const ValueSpec& v : values)
    out.push_back({{"name", v.name}, {"datatype", std::string(kserve_datatype(v.dtype))}, {"shape", shape_json(v)}});
  return out;
}

std::string names_of(const std::vector<ValueSpec>& values) {
  std::string s;
  for (const ValueSpec& v : values) s += (s.empty() ? "" : ", ") + v.name;
  return s;
}

const ValueSpec* find_spec(const std::vector<ValueSpec>& values, const std::string& name) {
  for (const ValueSpec& v : values)
    if (v.name == name) return &v;
  return nullptr;
}

// The member `key` of an object, or nullptr: a reference, never a copy, since copying a value
// recurses once per level of its nesting.
const json* member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool truthy(const json* object, const char* key) {
  const json* v = object ? member(*object, key) : nullptr;
  return v && v->is_boolean() && v->get<bool>();
}

// The request's JSON and, with the binary extension, the bytes after it.
struct SplitBody {
  std::string_view header;
  std::string_view binary;
};

SplitBody split_body(const HttpRequest& request) {
  const std::string* length = request.header("inference-header-content-length");
  if (!length) return {request.body, {}};
  size_t n = 0;
  try {
    size_t used = 0;
    long long v = std::stoll(*length, &used);
    if (used != length->size() || v < 0) throw std::invalid_argument("negative");
    n = static_cast<size_t>(v);
  } catch (const std::exception&) {
    throw HttpError(400, "Inference-Header-Content-Length is not a byte count: '" + *length + "'");
  }
  if (n > request.body.size())
    throw HttpError(400, "Inference-Header-Content-Length " + std::to_string(n) + " is past the body's " +
                             std::to_string(request.body.size()) + " bytes");
  std::string_view body = request.body;
  return {body.substr(0, n), body.substr(n)};
}

Shape parse_shape(const std::string& name, const json& shape) {
  if (!shape.is_array()) throw HttpError(400, "input '" + name + "': shape must be an array of integers");
  Shape out;
  for (const json& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw HttpError(400, "input '" + name + "': shape must be an array of non-negative integers");
    out.push_back(d.get<int64_t>());
  }
  return out;
}

void check_against_spec(const std::string& model, const ValueSpec& spec, DType dtype, const Shape& shape) {
  if (dtype != spec.dtype)
    throw HttpError(400, "input '" + spec.name + "': datatype " + std::string(kserve_datatype(dtype)) + ", model '" + model +
                             "' expects " + std::string(kserve_datatype(spec.dtype)));
  if (!spec.shape_known) return;
  bool ok = shape.size() == spec.dims.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = spec.dims[i] < 0 || spec.dims[i] == shape[i];
  if (!ok) {
    std::string want;
    for (size_t i = 0; i < spec.dims.size(); ++i)
      want += (i ? "x" : "") + (spec.dims[i] < 0 ? std::string("?") : std::to_string(spec.dims[i]));
    throw HttpError(400, "input '" + spec.name + "': shape " + shape_str(shape) + ", model '" + model + "' expects " +
                             (want.empty() ? "a scalar" : want));
  }
}

struct ParsedRequest {
  std::string id;
  TensorMap inputs;
  std::vector<std::string> outputs;  // in response order
  std::set<std::string> binary_outputs;
  // A dynamic model's sub-net (docs/dynamic.md): by name (parameters.subnet), or chosen by the
  // controller under parameters.latency_target_ms; -1 and 0 when neither is given.
  int subnet = -1;
  double latency_target_ms = 0;
};

// The request's top-level `subnet` / `latency_target_ms` parameters, checked against the model.
void parse_subnet_parameters(const ServedModel& model, const json* parameters, ParsedRequest& r) {
  if (!parameters) return;
  const json& params = *parameters;
  if (!params.is_object() || (!params.contains("subnet") && !params.contains("latency_target_ms"))) return;
  if (!model.dynamic)
    throw HttpError(400, "model '" + model.name + "' has no sub-nets (no grove.subnets metadata); drop the subnet "
                         "and latency_target_ms parameters");
  if (params.contains("subnet")) {
    const json& s = params.at("subnet");
    if (!s.is_string()) throw HttpError(400, "parameter 'subnet' must be a sub-net's name");
    r.subnet = model.dynamic->find(s.get<std::string>());
    if (r.subnet < 0) {
      std::string names;
      for (const auto& info : model.dynamic->subnets()) names += (names.empty() ? "" : ", ") + info.name;
      throw HttpError(400, "model '" + model.name + "' has no sub-net '" + s.get<std::string>() + "' (sub-nets: " + names + ")");
    }
  }
  if (params.contains("latency_target_ms")) {
    const json& t = params.at("latency_target_ms");
    if (!t.is_number() || !(t.get<double>() > 0))
      throw HttpError(400, "parameter 'latency_target_ms' must be a positive number of milliseconds");
    if (r.subnet >= 0) throw HttpError(400, "give 'subnet' or 'latency_target_ms', not both");
    r.latency_target_ms = t.get<double>();
  }
}

ParsedRequest parse_infer(const ServedModel& model, const HttpRequest& request, int max_json_depth) {
  SplitBody body = split_body(request);
  if (body.header.empty())
    throw HttpError(400, "empty request body: an inference needs a JSON object (sent with Content-Length or chunked)");
  check_json_depth(body.header, max_json_depth);
  json j;
  try {
    j = json::parse(body.header);
  } catch (const json::exception& e) {
    throw HttpError(400, std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw HttpError(400, "the request must be a JSON object");
  ParsedRequest r;
  if (j.contains("id")) {
    if (!j["id"].is_string()) throw HttpError(400, "'id' must be a string");
    r.id = j["id"].get<std::string>();
  }
  const json* request_params = member(j, "parameters");
  const bool all_binary = truthy(request_params, "binary_data_output");
  parse_subnet_parameters(model, request_params, r);
  if (!j.contains("inputs") || !j["inputs"].is_array()) throw HttpError(400, "the request needs an 'inputs' array");
  size_t offset = 0;
  for (const json& in : j["inputs"]) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string())
      throw HttpError(400, "every input needs a string 'name'");
    const std::string name = in["name"].get<std::string>();
    const ValueSpec* spec = find_spec(model.inputs, name);
    if (!spec) throw HttpError(400, "model '" + model.name + "' has no input named '" + name + "' (inputs: " + names_of(model.inputs) + ")");
    if (r.inputs.count(name)) throw HttpError(400, "input '" + name + "' is given twice");
    if (!in.contains("datatype") || !in["datatype"].is_string()) throw HttpError(400, "input '" + name + "' needs a string 'datatype'");
    const std::string datatype = in["datatype"].get<std::string>();
    DType dtype = dtype_from_kserve(datatype);
    if (dtype == DType::undefined) throw HttpError(400, "input '" + name + "': unsupported datatype '" + datatype + "'");
    if (!in.contains("shape")) throw HttpError(400, "input '" + name + "' needs a 'shape'");
    Shape shape = parse_shape(name, in["shape"]);
    check_against_spec(model.name, *spec, dtype, shape);
    const json* params = member(in, "parameters");
    if (const json* size_member = params ? member(*params, "binary_data_size") : nullptr) {
      const json& size = *size_member;
      if (!size.is_number_unsigned()) throw HttpError(400, "input '" + name + "': binary_data_size must be a byte count");
      uint64_t n = size.get<uint64_t>();
      if (n > body.binary.size() - offset)
        throw HttpError(400, "input '" + name + "': binary_data_size " + std::to_string(n) + " is past the end of the body");
      r.inputs[name] = tensor_from_bytes(name, dtype, shape, body.binary.substr(offset, n));
      offset += n;
    } else {
      if (!in.contains("data")) throw HttpError(400, "input '" + name + "' has neither 'data' nor binary_data_size");
      r.inputs[name] = tensor_from_json(name, dtype, shape, in["data"]);
    }
  }
  if (offset != body.binary.size())
    throw HttpError(400, std::to_string(body.binary.size() - offset) + " bytes of binary data belong to no input");
  for (const ValueSpec& spec : model.inputs)
    if (!r.inputs.count(spec.name)) throw HttpError(400, "missing input '" + spec.name + "' of model '" + model.name + "'");

  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) throw HttpError(400, "'outputs' must be an array");
    for (const json& out : j["outputs"]) {
      if (!out.is_object() || !out.contains("name") || !out["name"].is_string())
        throw HttpError(400, "every requested output needs a string 'name'");
      std::string name = out["name"].get<std::string>();
      if (!find_spec(model.outputs, name))
        throw HttpError(400, "model '" + model.name + "' has no output named '" + name + "' (outputs: " + names_of(model.outputs) + ")");
      r.outputs.push_back(name);
      if (all_binary || truthy(member(out, "parameters"), "binary_data")) r.binary_outputs.insert(name);
    }
  } else {
    for (const ValueSpec& spec : model.outputs) {
      r.outputs.push_back(spec.name);
      if (all_binary) r.binary_outputs.insert(spec.name);
    }
  }
  return r;
}

}  // namespace

HttpResponse error_response(int status, const std::string& message) {
  return json_response({{"error", message}}, status);
}

constexpr int64_t kParseBytesPerBodyByte = 16;

int64_t default_serve_memory() { return default_max_memory() / 2 * 3; }

int64_t run_memory_estimate(ServedModel& model, const TensorMap& inputs, const CancelToken& cancel) {
  ShapeMap shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  {
    std::lock_guard<std::mutex> lock(model.estimates_mutex);
    auto it = model.memory_estimates.find(shapes);
    if (it != model.memory_estimates.end()) return it->second;
  }
  std::shared_ptr<const Plan> plan = plan_for(*model.session, shapes, cancel);
  if (!plan) {
    // No plan to read: a model with control flow, or shapes that depend on input values. Twice
    // the most one of its runs without a plan (in segments, or on the reference executor) has
    // held, since another input may make a longer Loop or a larger value-dependent shape; the
    // whole --max-memory until one has finished. Not cached: the measure grows.
    const int64_t limit = model.session->model().limits().memory_limit();
    const int64_t seen = largest_unplanned_peak(*model.session);
    return seen > 0 ? std::min(limit, 2 * seen) : limit;
  }
  int64_t bytes = 0;
  for (const PlannedValue& v : plan->values) {
    if (v.view_of >= 0 || v.slice_of >= 0) continue;  // inside another value's buffer
    bytes += numel(v.shape) * static_cast<int64_t>(dtype_size(v.dtype));
  }
  std::lock_guard<std::mutex> lock(model.estimates_mutex);
  if (model.memory_estimates.size() >= 64) model.memory_estimates.clear();
  model.memory_estimates[shapes] = bytes;
  return bytes;
}

InferenceServer::InferenceServer(Engine& engine, ModelRepository& models, ServerOptions options)
    : engine_(engine),
      models_(models),
      options_(options),
      memory_(options.max_serve_memory > 0 ? options.max_serve_memory : default_serve_memory()),
      mt_graph_(engine, {.pair_window_ms = options.mt_graph_window_ms}) {}

HttpResponse InferenceServer::handle(const HttpRequest& request) {
  try {
    if (static_cast<int64_t>(request.body.size()) > options_.max_body_bytes)
      throw HttpError(413, "request body of " + std::to_string(request.body.size()) + " bytes is over the limit of " +
                               std::to_string(options_.max_body_bytes) + " (--max-body-bytes)");
    return route(request);
  } catch (const HttpError& e) {
    return error_response(e.status(), e.what());
  } catch (const Error& e) {
    return error_response(400, e.what());
  } catch (const std::bad_alloc&) {
    return error_response(500, "out of memory");
  } catch (const std::exception& e) {
    return error_response(500, e.what());
  }
}

HttpResponse InferenceServer::route(const HttpRequest& request) {
  const std::vector<std::string> p = split_path(request.path);
  const bool get = request.method == "GET" || request.method == "HEAD", post = request.method == "POST";
  auto need = [&](bool ok) {
    if (!ok) throw HttpError(405, "method " + request.method + " is not allowed on " + request.path);
  };
  if (p.size() == 1 && p[0] == "metrics") {
    need(get);
    return metrics();
  }
  if (p.empty()) {  // the live page
    need(get);
    return {.status = 200, .content_type = "text/html; charset=utf-8", .headers = {}, .body = std::string(live_page_html()), .stream = {}};
  }
  if (p.size() == 2 && p[0] == "v2" && p[1] == "timeline") {
    need(get);
    // One recording at a time: the engine has one trace. It holds an HTTP thread for the
    // window, as a slow request would.
    std::unique_lock<std::mutex> recording(timeline_mutex_, std::try_to_lock);
    if (!recording.owns_lock()) throw HttpError(503, "a timeline is being recorded for another client; retry");
    return {.status = 200, .content_type = "application/json", .headers = {},
            .body = record_timeline(engine_, kTimelineWindowSeconds, kTimelineJobs), .stream = {}};
  }
  if (p.size() == 2 && p[0] == "v2" && p[1] == "mtgraph") {
    need(get);
    return mt_graph_schedules();
  }
  if (p.empty() || p[0] != "v2") throw HttpError(404, "no such endpoint: " + request.path);
  if (p.size() == 1) {
    need(get);
    return json_response({{"name", "grove"},
                          {"version", kVersion},
                          {"extensions", {"binary_tensor_data", "model_repository"}}});
  }
  if (p[1] == "health" && p.size() == 3 && (p[2] == "live" || p[2] == "ready")) {
    need(get);
    if (p[2] == "live") return json_response({{"live", true}});
    bool ready = !draining_.load();
    return json_response({{"ready", ready}}, ready ? 200 : 503);
  }
  if (p[1] == "repository" && p.size() == 3 && p[2] == "index") {
    need(post);
    json out = json::array();
    for (const RepositoryEntry& e : models_.index()) {
      json entry = {{"name", e.name}, {"state", e.state}};
      if (e.state == "READY") entry["version"] = "1";
      if (!e.reason.empty()) entry["reason"] = e.reason;
      out.push_back(entry);
    }
    return json_response(out);
  }
  if (p[1] == "repository" && p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) {
    need(post);
    if (p[4] == "load") models_.load(p[3]);
    else models_.unload(p[3]);
    return json_response(json::object());
  }
  if (p[1] == "models" && p.size() >= 3) {
    std::shared_ptr<ServedModel> model = models_.find(p[2]);
    size_t rest = 3;
    if (p.size() >= 5 && p[3] == "versions") {
      if (model && p[4] != "1") throw HttpError(404, "model '" + p[2] + "' has no version '" + p[4] + "' (versions: 1)");
      rest = 5;
    }
    if (!model) throw HttpError(404, "unknown model '" + p[2] + "'");
    if (p.size() == rest) {
      need(get);
      return model_metadata(*model);
    }
    if (p.size() == rest + 1 && p[rest] == "ready") {
      need(get);
      return json_response({{"name", model->name}, {"ready", true}});
    }
    if (p.size() == rest + 1 && p[rest] == "infer") {
      need(post);
      return infer(*model, request);
    }
    if (p.size() == rest + 1 && p[rest] == "generate") {
      need(post);
      return generate(*model, request);
    }
    if (p.size() == rest + 1 && p[rest] == "generate_stream") {
      need(post);
      return generate_stream(*model, request);
    }
  }
  throw HttpError(404, "no such endpoint: " + request.path);
}

HttpResponse InferenceServer::model_metadata(const ServedModel& model) const {
  return json_response({{"name", model.name},
                        {"versions", {"1"}},
                        {"platform", "onnx"},
                        {"inputs", tensor_metadata(model.inputs)},
                        {"outputs", tensor_metadata(model.outputs)}});
}

// A sub-net runs on the request's own thread (DynamicSession::run, which times it for the
// controller) and stops at the request's deadline as any run does.
TensorMap InferenceServer::run_subnet(ServedModel& model, const TensorMap& inputs, int subnet, double target_ms,
                                      int& chosen, const CancelToken& cancel) {
  try {
    if (subnet >= 0) {
      chosen = subnet;
      return model.dynamic->run(inputs, subnet, nullptr, cancel);
    }
    SubnetChoice choice;
    TensorMap out = model.dynamic->run_within(inputs, target_ms, &choice, cancel);
    chosen = choice.subnet;
    return out;
  } catch (const Error& e) {
    if (e.cancelled()) throw HttpError(504, timed_out_message(model));
    throw HttpError(500, e.what());
  }
}

std::string InferenceServer::timed_out_message(const ServedModel& model, const char* what_then) const {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", options_.request_timeout_s);
  return "inference of model '" + model.name + "' took over " + limit + " s (--request-timeout)" + what_then;
}

// Planning input shapes not seen before is not cut at the deadline: the request leaves with a
// 504 and the planning goes on (a few shapes at a time per model; requests of other new shapes
// wait for a free slot), so that a shape whose planning outlasts --request-timeout is served
// once it is done.
HttpError InferenceServer::planning_error(const ServedModel& model, const Error& e) const {
  if (e.cancelled())
    return HttpError(504, timed_out_message(model, " while planning input shapes not seen before; the planning goes on, "
                                                   "and requests of these shapes are served once it is done"));
  return HttpError(400, e.what());  // inputs the model cannot bind or plan
}

InferenceServer::InFlight::InFlight(InferenceServer& server, ServedModel& model)
    : server_(server), model_(model), start_(std::chrono::steady_clock::now()) {
  if (server.in_flight_.fetch_add(1) >= server.options_.max_concurrent) {
    server.in_flight_.fetch_sub(1);
    throw HttpError(503, "server busy: " + std::to_string(server.options_.max_concurrent) +
                             " inferences in flight (--max-concurrent)");
  }
  model.metrics.started();
}

InferenceServer::InFlight::~InFlight() {
  server_.in_flight_.fetch_sub(1);
  model_.metrics.finished(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), ok_);
}

HttpResponse InferenceServer::infer(ServedModel& model, const HttpRequest& request) {
  if (draining_.load()) throw HttpError(503, "the server is shutting down");
  InFlight in_flight(*this, model);

  ParsedRequest parsed;
  {
    // The parse holds the body as a JSON DOM: 16 bytes a value (plus container slack) for at
    // least 2 bytes of text each, and object keys in map nodes. 16 bytes per body byte are
    // reserved while it lasts, so that --max-concurrent large bodies parsed at once cannot
    // take more memory than the budget holds.
    const int64_t parse_bytes = kParseBytesPerBodyByte * static_cast<int64_t>(request.body.size());
    const MemoryBudget::Reservation parsing = memory_.reserve(
        parse_bytes, MemoryBudget::Clock::now() + std::chrono::duration_cast<MemoryBudget::Clock::duration>(
                                                      std::chrono::duration<double>(options_.memory_wait_s)));
    if (!parsing) {
      const std::string what = "parsing a request body of " + std::to_string(request.body.size()) + " bytes needs " +
                               std::to_string(parse_bytes) + " bytes";
      if (parse_bytes > memory_.capacity())
        throw HttpError(503, what + ", over the server memory budget of " + std::to_string(memory_.capacity()) +
                                 " bytes (--max-serve-memory)");
      throw HttpError(503, "server memory budget exhausted: " + what + ", " + std::to_string(memory_.reserved()) +
                               " of the " + std::to_string(memory_.capacity()) +
                               " bytes (--max-serve-memory) are reserved; retry later");
    }
    parsed = parse_infer(model, request, options_.max_json_depth);
  }
  // The run's deadline is the request's: past it, its tiles, segments and Loop iterations
  // not yet started are dropped. A wait for the memory budget counts into it.
  const CancelToken cancel = CancelToken::after(options_.request_timeout_s);
  int64_t need = 0;
  try {
    need = run_memory_estimate(model, parsed.inputs, cancel);
  } catch (const Error& e) {
    throw planning_error(model, e);
  }
  // Held until this function returns, which is after the run has really stopped (a timed-out
  // run's future is waited for below), so released bytes are never still in use.
  const MemoryBudget::Reservation reservation = memory_.reserve(
      need, std::min(cancel.deadline(), MemoryBudget::Clock::now() + std::chrono::duration_cast<MemoryBudget::Clock::duration>(
                                                                      std::chrono::duration<double>(options_.memory_wait_s))));
  if (!reservation) {
    const int64_t budget = memory_.capacity();
    if (need > budget)
      throw HttpError(503, "inference of model '" + model.name + "' needs " + std::to_string(need) +
                               " bytes, over the server memory budget of " + std::to_string(budget) +
                               " bytes (--max-serve-memory)");
    throw HttpError(503, "server memory budget exhausted: inference of model '" + model.name + "' needs " +
                             std::to_string(need) + " bytes, " + std::to_string(memory_.reserved()) + " of the " +
                             std::to_string(budget) + " bytes (--max-serve-memory) are reserved by runs in flight; retry later");
  }
  TensorMap outputs;
  int subnet = -1;
  if (parsed.subnet >= 0 || parsed.latency_target_ms > 0) {
    outputs = run_subnet(model, parsed.inputs, parsed.subnet, parsed.latency_target_ms, subnet, cancel);
  } else {
    std::future<TensorMap> pending;
    try {
      // Requests of two models that arrive together run as one MT-Graph compound task
      // (mt_graph_pairs.h); a model of its own, or batched, runs alone.
      pending = model.batcher              ? model.batcher->submit(std::move(parsed.inputs), cancel)
                : models_.loaded_count() > 1 ? mt_graph_.submit(model, std::move(parsed.inputs), cancel)
                                           : model.session->submit(std::move(parsed.inputs), cancel);
    } catch (const Error& e) {
      throw planning_error(model, e);
    }
    if (pending.wait_until(cancel.deadline()) != std::future_status::ready) {
      // Stopped now rather than at the run's next look at the clock; and this request's slot
      // (in_flight_, --max-concurrent) is kept until the run has really stopped, which is
      // when its future is ready: a 504 never leaves work running behind it.
      cancel.cancel("--request-timeout passed");
      pending.wait();
    }
    try {
      outputs = pending.get();
    } catch (const Error& e) {
      if (e.cancelled()) throw HttpError(504, timed_out_message(model));
      throw HttpError(500, e.what());  // a failing tile names its node and op
    }
  }

  json response = {{"model_name", model.name}, {"model_version", "1"}, {"outputs", json::array()}};
  if (!parsed.id.empty()) response["id"] = parsed.id;
  if (subnet >= 0) response["parameters"] = {{"subnet", model.dynamic->subnets()[static_cast<size_t>(subnet)].name}};
  std::string binary;
  for (const std::string& name : parsed.outputs) {
    const Tensor& t = outputs.at(name);
    std::string datatype(kserve_datatype(t.dtype()));
    if (datatype.empty()) throw HttpError(500, "output '" + name + "' has dtype " + std::string(dtype_name(t.dtype())) + ", which the protocol cannot carry");
    json out = {{"name", name}, {"datatype", datatype}, {"shape", t.shape()}};
    if (parsed.binary_outputs.count(name)) {
      out["parameters"] = {{"binary_data_size", t.bytes()}};
      binary.append(reinterpret_cast<const char*>(t.raw()), t.bytes());
    } else {
      out["data"] = tensor_to_json(t);
    }
    response["outputs"].push_back(std::move(out));
  }
  HttpResponse r = json_response(response);
  if (!parsed.binary_outputs.empty()) {
    r.headers["Inference-Header-Content-Length"] = std::to_string(r.body.size());
    r.content_type = "application/octet-stream";
    r.body += binary;
  }
  in_flight.succeeded();
  return r;
}

HttpResponse InferenceServer::mt_graph_schedules() const {
  json pairs = json::array();
  for (const MtGraphPairState& p : mt_graph_.pairs())
    pairs.push_back({{"models", p.models}, {"phase", p.phase}, {"pointers", p.rho}, {"pair_runs", p.pair_runs},
                     {"schedules_profiled", p.schedules_profiled}, {"plain_ms", p.plain_ms}, {"staged_ms", p.staged_ms},
                     {"gain", p.gain}});
  json body = {{"enabled", mt_graph_.enabled()}, {"pair_window_ms", options_.mt_graph_window_ms}, {"pairs", pairs}};
  return {.status = 200, .content_type = "application/json", .headers = {}, .body = body.dump(), .stream = {}};
}

HttpResponse InferenceServer::metrics() const {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  EngineStats s = engine_.stats();
  auto line = [&](const char* help, const char* type, const char* name, double value) {
    char number[64];
    std::snprintf(number, sizeof number, "%.17g", value);
    r.body += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + number + "\n";
  };
  line("Worker threads of the engine.", "gauge", "grove_engine_threads", s.threads);
  line("Runs submitted to the ready pool and not finished (queued or running).", "gauge", "grove_engine_jobs_in_flight",
       static_cast<double>(s.jobs_in_flight));
  line("Runs submitted to the ready pool.", "counter", "grove_engine_jobs_total", static_cast<double>(s.jobs_submitted));
  line("Tiles run.", "counter", "grove_engine_tiles_total", static_cast<double>(s.tiles_run));
  line("Seconds the workers spent running tiles.", "counter", "grove_engine_busy_seconds_total", s.busy_seconds);
  line("Busy seconds over worker-seconds since start.", "gauge", "grove_engine_busy_fraction",
       s.uptime_seconds > 0 ? s.busy_seconds / (s.uptime_seconds * std::max(1, s.threads)) : 0);
  line("Inference requests in flight, all models.", "gauge", "grove_inferences_in_flight", static_cast<double>(in_flight()));
  line("The server memory budget (--max-serve-memory).", "gauge", "grove_serve_memory_budget_bytes",
       static_cast<double>(memory_.capacity()));
  line("Bytes of the memory budget reserved by runs in flight.", "gauge", "grove_serve_memory_reserved_bytes",
       static_cast<double>(memory_.reserved()));
  line("Inferences refused (503) for want of memory budget.", "counter", "grove_serve_memory_refusals_total",
       static_cast<double>(memory_.refusals()));
  if (const BackgroundCalibration* c = options_.calibration) {
    const BackgroundCalibrationStatus cs = c->status();
    r.body += "# HELP grove_calibration_state The background calibration of the performance model to this machine "
              "(docs/tuning.md): 1 for the state it is in.\n# TYPE grove_calibration_state gauge\n";
    for (const char* state : {"waiting", "measuring", "fitting", "done", "not needed", "stopped", "failed"})
      r.body += std::string("grove_calibration_state{state=\"") + state + "\"} " + (cs.state == state ? "1" : "0") + "\n";
    line("Sampled conv layers the background calibration has measured.", "gauge", "grove_calibration_layers_measured",
         cs.layers_measured);
    line("Sampled conv layers the background calibration measures in all.", "gauge", "grove_calibration_layers_total",
         cs.layers_total);
    line("Layers the background calibration gave up because a request arrived.", "counter",
         "grove_calibration_interruptions_total", static_cast<double>(cs.interruptions));
  }
  if (mt_graph_.enabled()) {
    const std::vector<MtGraphPairState> pairs = mt_graph_.pairs();
    auto pair_family = [&](const char* name, const char* type, const char* help, auto&& value) {
      r.body += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
      for (const MtGraphPairState& p : pairs) {
        char number[64];
        std::snprintf(number, sizeof number, "%.17g", double(value(p)));
        r.body += std::string(name) + "{models=\"" + p.models[0] + "+" + p.models[1] + "\"} " + number + "\n";
      }
    };
    pair_family("grove_mtgraph_pair_runs_total", "counter",
                "Requests of two models run together as one MT-Graph compound task (GET /v2/mtgraph).",
                [](const MtGraphPairState& p) { return p.pair_runs; });
    pair_family("grove_mtgraph_schedule_staged", "gauge",
                "1 where a staged MT-Graph schedule is in force for the pair, 0 while it is searched or where none won (the requests run apart).",
                [](const MtGraphPairState& p) { return p.phase == "in force" ? 1 : 0; });
    pair_family("grove_mtgraph_gain", "gauge",
                "Plain co-execution's latency over the schedule in force's, measured on live pairs (1 when plain).",
                [](const MtGraphPairState& p) { return p.gain; });
  }
  // Per-model families, each family's samples together (the exposition format wants that).
  std::vector<std::pair<std::string, ModelMetrics::Snapshot>> per_model;
  for (const std::shared_ptr<ServedModel>& m : models_.loaded()) per_model.emplace_back(m->name, m->metrics.snapshot());
  auto family = [&](const char* name, const char* type, const char* help, auto&& value) {
    r.body += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const auto& [model, snap] : per_model) r.body += value(name, "model=\"" + model + "\"", snap);
  };
  auto sample = [](const std::string& name, const std::string& labels, double v) {
    char number[64];
    std::snprintf(number, sizeof number, "%.17g", v);
    return name + "{" + labels + "} " + number + "\n";
  };
  using Snap = ModelMetrics::Snapshot;
  family("grove_requests_total", "counter", "Inference requests answered.",
         [&](const char* n, const std::string& l, const Snap& s) { return sample(n, l, static_cast<double>(s.requests)); });
  family("grove_request_failures_total", "counter", "Inference requests answered with an error.",
         [&](const char* n, const std::string& l, const Snap& s) { return sample(n, l, static_cast<double>(s.failures)); });
  family("grove_requests_in_flight", "gauge", "Inference requests being served.",
         [&](const char* n, const std::string& l, const Snap& s) { return sample(n, l, static_cast<double>(s.in_flight)); });
  r.body += "# HELP grove_batches_total Runs of joined requests (dynamic batching).\n# TYPE grove_batches_total counter\n";
  std::string batched = "# HELP grove_batched_requests_total Requests served in those runs.\n# TYPE grove_batched_requests_total counter\n";
  for (const std::shared_ptr<ServedModel>& m : models_.loaded())
    if (m->batcher) {
      BatchStats b = m->batcher->stats();
      r.body += sample("grove_batches_total", "model=\"" + m->name + "\"", static_cast<double>(b.batches));
      batched += sample("grove_batched_requests_total", "model=\"" + m->name + "\"", static_cast<double>(b.requests));
    }
  r.body += batched;
  family("grove_request_duration_seconds", "histogram", "Inference latency, arrival to response.",
         [&](const char* n, const std::string& l, const Snap& s) {
           std::string out, name = n;
           for (size_t b = 0; b < ModelMetrics::kBuckets.size(); ++b) {
             char le[32];
             std::snprintf(le, sizeof le, "%g", ModelMetrics::kBuckets[b]);
             out += sample(name + "_bucket", l + ",le=\"" + le + "\"", static_cast<double>(s.cumulative[b]));
           }
           out += sample(name + "_bucket", l + ",le=\"+Inf\"", static_cast<double>(s.requests));
           out += sample(name + "_sum", l, s.sum_seconds);
           out += sample(name + "_count", l, static_cast<double>(s.requests));
           return out;
         });
  return r;
}

}  // namespace grove::serve
