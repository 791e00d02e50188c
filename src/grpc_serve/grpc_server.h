#pragma once
// `grove serve --grpc-port`: the KServe v2 protocol over gRPC (kserve_v2.proto), beside the
// REST listener and over the same InferenceServer: every call becomes the REST request that
// means the same (binary tensor data for the tensors), so limits, memory budget, timeouts,
// metrics and error messages are the REST ones; an HTTP status becomes the gRPC status code
// that means the same, with the same one-line message.
#include <memory>
#include <string>

#include "serve/inference_server.h"

namespace grove::grpc_serve {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 0;                          // 0: any free port (port() says which)
  int64_t max_message_bytes = 64 << 20;  // a larger request gets RESOURCE_EXHAUSTED
  int max_threads = 256;                 // calls served at once
};

// Whether this grove was built with gRPC (Debian's libgrpc++-dev and protobuf-compiler-grpc).
bool grpc_available();

class GrpcServer {
 public:
  // Binds and starts serving; Error when the address cannot be bound or gRPC is not built in.
  GrpcServer(serve::InferenceServer& server, const GrpcOptions& options);
  ~GrpcServer();  // stop()
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  int port() const;
  // Refuses new calls and waits for the calls in flight (they end at their --request-timeout).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grove::grpc_serve
