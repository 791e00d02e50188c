// The gRPC front end of a grove built without gRPC (grpc_server.cpp otherwise): --grpc-port says so.
#ifndef GROVE_HAVE_GRPC
#include "grove/error.h"
#include "grpc_serve/grpc_server.h"

namespace grove::grpc_serve {

struct GrpcServer::Impl {};

bool grpc_available() { return false; }

GrpcServer::GrpcServer(serve::InferenceServer&, const GrpcOptions&) {
  throw Error("grove serve --grpc-port: this grove was built without gRPC (apt-get install libgrpc++-dev "
              "protobuf-compiler-grpc, then rebuild)");
}
GrpcServer::~GrpcServer() = default;
int GrpcServer::port() const { return -1; }
void GrpcServer::stop() {}

}  // namespace grove::grpc_serve
#endif  // GROVE_HAVE_GRPC
