// With gRPC (GROVE_HAVE_GRPC, src/grpc_serve/CMakeLists.txt); grpc_unavailable.cpp otherwise.
#ifdef GROVE_HAVE_GRPC
#include "grpc_serve/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "grove/error.h"
#include "kserve_v2.grpc.pb.h"

namespace grove::grpc_serve {

namespace {

using nlohmann::json;
using serve::HttpRequest;
using serve::HttpResponse;

// The gRPC code that means what an HTTP status of the REST protocol means.
grpc::StatusCode code_for(int http_status) {
  switch (http_status) {
    case 400: case 415: return grpc::StatusCode::INVALID_ARGUMENT;
    case 404: return grpc::StatusCode::NOT_FOUND;
    case 405: case 501: return grpc::StatusCode::UNIMPLEMENTED;
    case 408: case 504: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case 413: case 431: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 503: return grpc::StatusCode::UNAVAILABLE;
    default: return grpc::StatusCode::INTERNAL;
  }
}

// OK for a 2xx; else the status with the REST answer's one-line message.
grpc::Status status_of(const HttpResponse& r) {
  if (r.status >= 200 && r.status < 300) return grpc::Status::OK;
  const json body = json::parse(r.body, nullptr, false);
  const std::string message =
      body.is_object() && body.contains("error") && body["error"].is_string() ? body["error"].get<std::string>() : r.body;
  return grpc::Status(code_for(r.status), message);
}

grpc::Status invalid(const std::string& message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); }

std::string model_path(const std::string& name, const std::string& version) {
  return "/v2/models/" + name + (version.empty() ? "" : "/versions/" + version);
}

// A typed `contents` field as the tensor's raw bytes.
template <class To, class Field>
std::string bytes_of(const Field& values) {
  std::string out(static_cast<size_t>(values.size()) * sizeof(To), '\0');
  To* p = reinterpret_cast<To*>(out.data());
  for (int i = 0; i < values.size(); ++i) p[i] = static_cast<To>(values.Get(i));
  return out;
}

// The input's bytes from its typed contents; Status not OK when the datatype has no typed
// field grove reads.
grpc::Status typed_bytes(const inference::ModelInferRequest::InferInputTensor& in, std::string& out) {
  const inference::InferTensorContents& c = in.contents();
  const std::string& t = in.datatype();
  if (t == "FP32") out = bytes_of<float>(c.fp32_contents());
  else if (t == "FP64") out = bytes_of<double>(c.fp64_contents());
  else if (t == "INT64") out = bytes_of<int64_t>(c.int64_contents());
  else if (t == "INT32") out = bytes_of<int32_t>(c.int_contents());
  else if (t == "INT16") out = bytes_of<int16_t>(c.int_contents());
  else if (t == "INT8") out = bytes_of<int8_t>(c.int_contents());
  else if (t == "UINT64") out = bytes_of<uint64_t>(c.uint64_contents());
  else if (t == "UINT32") out = bytes_of<uint32_t>(c.uint_contents());
  else if (t == "UINT16") out = bytes_of<uint16_t>(c.uint_contents());
  else if (t == "UINT8") out = bytes_of<uint8_t>(c.uint_contents());
  else if (t == "BOOL") out = bytes_of<uint8_t>(c.bool_contents());
  else
    return invalid("input '" + in.name() + "': datatype " + t +
                   " has no typed contents grove reads (FP16 and others go in raw_input_contents)");
  return grpc::Status::OK;
}

json parameter_value(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: return p.bool_param();
    case inference::InferParameter::kInt64Param: return p.int64_param();
    case inference::InferParameter::kStringParam: return p.string_param();
    default: return nullptr;
  }
}

class Service final : public inference::GRPCInferenceService::Service {
 public:
  explicit Service(serve::InferenceServer& server) : server_(server) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* out) override {
    const HttpResponse r = get("/v2/health/live");
    out->set_live(r.status == 200);
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* out) override {
    out->set_ready(get("/v2/health/ready").status == 200);
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* in,
                          inference::ModelReadyResponse* out) override {
    const HttpResponse r = get(model_path(in->name(), in->version()) + "/ready");
    if (r.status == 404) return status_of(r);
    out->set_ready(r.status == 200);
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* out) override {
    const HttpResponse r = get("/v2");
    if (grpc::Status s = status_of(r); !s.ok()) return s;
    const json j = json::parse(r.body);
    out->set_name(j.value("name", ""));
    out->set_version(j.value("version", ""));
    for (const json& e : j.value("extensions", json::array())) out->add_extensions(e.get<std::string>());
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* in,
                             inference::ModelMetadataResponse* out) override {
    const HttpResponse r = get(model_path(in->name(), in->version()));
    if (grpc::Status s = status_of(r); !s.ok()) return s;
    const json j = json::parse(r.body);
    out->set_name(j.value("name", ""));
    for (const json& v : j.value("versions", json::array())) out->add_versions(v.get<std::string>());
    out->set_platform(j.value("platform", ""));
    auto tensors = [](const json& list, auto add) {
      for (const json& t : list) {
        auto* m = add();
        m->set_name(t.value("name", ""));
        m->set_datatype(t.value("datatype", ""));
        for (const json& d : t.value("shape", json::array())) m->add_shape(d.get<int64_t>());
      }
    };
    tensors(j.value("inputs", json::array()), [&] { return out->add_inputs(); });
    tensors(j.value("outputs", json::array()), [&] { return out->add_outputs(); });
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* in,
                          inference::ModelInferResponse* out) override {
    const bool raw = in->raw_input_contents_size() > 0;
    if (raw && in->raw_input_contents_size() != in->inputs_size())
      return invalid("raw_input_contents has " + std::to_string(in->raw_input_contents_size()) + " entries for " +
                     std::to_string(in->inputs_size()) + " inputs: give one per input, in order, or none");
    // The REST request that means the same: a JSON header, then every tensor's bytes.
    json header = {{"inputs", json::array()}};
    if (!in->id().empty()) header["id"] = in->id();
    json parameters = json::object();
    for (const auto& [key, value] : in->parameters()) parameters[key] = parameter_value(value);
    std::string tensors;
    for (int i = 0; i < in->inputs_size(); ++i) {
      const auto& t = in->inputs(i);
      std::string typed;
      if (!raw) {
        if (!t.has_contents()) return invalid("input '" + t.name() + "' has neither contents nor raw_input_contents");
        if (grpc::Status s = typed_bytes(t, typed); !s.ok()) return s;
      }
      const std::string& bytes = raw ? in->raw_input_contents(i) : typed;
      header["inputs"].push_back({{"name", t.name()},
                                  {"datatype", t.datatype()},
                                  {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
                                  {"parameters", {{"binary_data_size", bytes.size()}}}});
      tensors += bytes;
    }
    if (in->outputs_size() == 0) {
      parameters["binary_data_output"] = true;
    } else {
      header["outputs"] = json::array();
      for (const auto& o : in->outputs()) header["outputs"].push_back({{"name", o.name()}, {"parameters", {{"binary_data", true}}}});
    }
    if (!parameters.empty()) header["parameters"] = parameters;
    HttpRequest request{"POST", model_path(in->model_name(), in->model_version()) + "/infer", {}, header.dump()};
    request.headers["inference-header-content-length"] = std::to_string(request.body.size());
    request.body += tensors;
    const HttpResponse r = server_.handle(request);
    if (grpc::Status s = status_of(r); !s.ok()) return s;

    auto length = r.headers.find("Inference-Header-Content-Length");
    const size_t json_bytes = length == r.headers.end() ? r.body.size() : std::stoull(length->second);
    const json answer = json::parse(r.body.substr(0, json_bytes));
    out->set_model_name(answer.value("model_name", in->model_name()));
    out->set_model_version(answer.value("model_version", "1"));
    out->set_id(answer.value("id", ""));
    size_t at = json_bytes;
    for (const json& o : answer.value("outputs", json::array())) {
      auto* t = out->add_outputs();
      t->set_name(o.value("name", ""));
      t->set_datatype(o.value("datatype", ""));
      for (const json& d : o.value("shape", json::array())) t->add_shape(d.get<int64_t>());
      const size_t n = o.contains("parameters") ? o["parameters"].value("binary_data_size", size_t{0}) : 0;
      if (at + n > r.body.size()) return grpc::Status(grpc::StatusCode::INTERNAL, "output '" + t->name() + "' is cut short");
      out->add_raw_output_contents(r.body.substr(at, n));
      at += n;
    }
    if (answer.contains("parameters") && answer["parameters"].contains("subnet")) {
      (*out->mutable_parameters())["subnet"].set_string_param(answer["parameters"]["subnet"].get<std::string>());
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext*, const inference::RepositoryIndexRequest* in,
                               inference::RepositoryIndexResponse* out) override {
    const HttpResponse r = server_.handle({"POST", "/v2/repository/index", {}, ""});
    if (grpc::Status s = status_of(r); !s.ok()) return s;
    for (const json& e : json::parse(r.body)) {
      if (in->ready() && e.value("state", "") != "READY") continue;
      auto* m = out->add_models();
      m->set_name(e.value("name", ""));
      m->set_version(e.value("version", ""));
      m->set_state(e.value("state", ""));
      m->set_reason(e.value("reason", ""));
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext*, const inference::RepositoryModelLoadRequest* in,
                                   inference::RepositoryModelLoadResponse*) override {
    return status_of(server_.handle({"POST", "/v2/repository/models/" + in->model_name() + "/load", {}, ""}));
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext*, const inference::RepositoryModelUnloadRequest* in,
                                     inference::RepositoryModelUnloadResponse*) override {
    return status_of(server_.handle({"POST", "/v2/repository/models/" + in->model_name() + "/unload", {}, ""}));
  }

 private:
  HttpResponse get(const std::string& path) { return server_.handle({"GET", path, {}, ""}); }

  serve::InferenceServer& server_;
};

}  // namespace

struct GrpcServer::Impl {
  explicit Impl(serve::InferenceServer& s) : service(s) {}
  Service service;
  std::unique_ptr<grpc::Server> server;
  int port = -1;
  bool stopped = false;
};

bool grpc_available() { return true; }

GrpcServer::GrpcServer(serve::InferenceServer& server, const GrpcOptions& options)
    : impl_(std::make_unique<Impl>(server)) {
  grpc::ServerBuilder builder;
  const std::string address = (options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host) +
                              ":" + std::to_string(options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl_->port);
  builder.RegisterService(&impl_->service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(-1);
  grpc::ResourceQuota quota("grove-serve");
  quota.SetMaxThreads(std::max(2, options.max_threads));
  builder.SetResourceQuota(quota);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port <= 0)
    throw Error("grove serve --grpc-port: cannot listen on " + address + " (in use, or not an address of this machine)");
}

GrpcServer::~GrpcServer() { stop(); }

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown();  // refuses new calls, waits for the ones in flight
  impl_->server->Wait();
}

}  // namespace grove::grpc_serve
#endif  // GROVE_HAVE_GRPC
