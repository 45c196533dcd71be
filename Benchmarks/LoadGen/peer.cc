// groupd-peer: the C++ gRPC server `make bench-writes` measures beside groupd in the same run,
// for the ratios its targets are stated in. C++ gRPC 1.51 (Debian), callback API:
//   - grpc.health.v1.Health/Check: the library's default health service (SERVING);
//   - /peer.v1.Peer/Stream: a server stream of `x-count` messages (default 100,000), each the
//     18-byte protobuf of a message with one 16-byte bytes field (as bench.v1.EchoResponse).
//   peer PORT
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

class StreamReactor final : public grpc::ServerGenericBidiReactor {
 public:
  StreamReactor(grpc::GenericCallbackServerContext* context) {
    const auto& metadata = context->client_metadata();
    auto found = metadata.find("x-count");
    left_ = found == metadata.end() ? 100000 : std::stol(std::string(found->second.data(), found->second.size()));
    std::string payload = std::string("\x0a\x10", 2) + std::string(16, 'a');
    grpc::Slice slice(payload);
    message_ = grpc::ByteBuffer(&slice, 1);
    StartRead(&request_);
  }
  void OnReadDone(bool) override { Next(); }
  void OnWriteDone(bool ok) override {
    if (!ok) { Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed")); return; }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (left_ == 0) { Finish(grpc::Status::OK); return; }
    --left_;
    StartWrite(&message_);
  }
  long left_;
  grpc::ByteBuffer request_, message_;
};

class Unimplemented final : public grpc::ServerGenericBidiReactor {
 public:
  Unimplemented() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
  void OnDone() override { delete this; }
};

class Service final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override {
    if (context->method() == "/peer.v1.Peer/Stream") return new StreamReactor(context);
    return new Unimplemented();
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string address = std::string("127.0.0.1:") + (argc > 1 ? argv[1] : "50061");
  grpc::EnableDefaultHealthCheckService(true);
  Service service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  builder.RegisterCallbackGenericService(&service);
  auto server = builder.BuildAndStart();
  if (!server) { std::fprintf(stderr, "cannot listen on %s\n", address.c_str()); return 1; }
  std::printf("peer listening on %s\n", address.c_str());
  std::fflush(stdout);
  server->Wait();
}
