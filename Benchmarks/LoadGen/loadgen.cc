// groupd-loadgen: a closed-loop gRPC load generator for `make bench-writes`, on C++ gRPC's
// generic stub (a client nobody here wrote), so requests can differ call by call: each call
// takes the next record of a requests file (its metadata and its serialized message).
//
//   loadgen --target 127.0.0.1:PORT --method /groupd.v1.MessageService/SendGroupMessage \
//           --requests FILE [--connections 8] [--inflight 32] [--duration 10] [--warmup 1] [--cycle]
//   loadgen --target … --method /groupd.v1.EventService/Subscribe --requests FILE --stream N
//
// With --stream N it makes one server-streaming call with the first record instead, reads N
// responses and prints how long they took (from the call's start) and their rate.
//
// Requests file: records, little-endian: u16 metadata count, then per entry u16 name length,
// name, u16 value length, value; then u32 message length and the message (protobuf bytes,
// without the gRPC prefix). Without --cycle every record is sent once and the run ends when
// they are used up (or at the duration); with --cycle records are reused round robin.
//
// Prints one JSON object: calls counted in the measured window (after the warm-up), their
// rate, latency percentiles (µs, from the call's start to its status) and status codes.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Record {
  std::vector<std::pair<std::string, std::string>> metadata;
  grpc::ByteBuffer message;
};

using Clock = std::chrono::steady_clock;

std::vector<Record> ReadRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Record> records;
  size_t at = 0;
  auto need = [&](size_t n) {
    if (at + n > data.size()) {
      std::fprintf(stderr, "truncated requests file at byte %zu\n", at);
      std::exit(2);
    }
  };
  auto u16 = [&]() { need(2); uint16_t v = uint8_t(data[at]) | uint16_t(uint8_t(data[at + 1])) << 8; at += 2; return v; };
  auto u32 = [&]() {
    need(4);
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | uint8_t(data[at + i]);
    at += 4;
    return v;
  };
  auto bytes = [&](size_t n) { need(n); std::string s = data.substr(at, n); at += n; return s; };
  while (at < data.size()) {
    Record record;
    uint16_t count = u16();
    for (uint16_t i = 0; i < count; ++i) {
      std::string name = bytes(u16());
      std::string value = bytes(u16());
      record.metadata.emplace_back(std::move(name), std::move(value));
    }
    std::string body = bytes(u32());
    grpc::Slice slice(body);
    record.message = grpc::ByteBuffer(&slice, 1);
    records.push_back(std::move(record));
  }
  return records;
}

struct Run {
  std::string method;
  std::vector<Record> records;
  bool cycle = false;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stopping{false};
  std::atomic<int> active{0};
  Clock::time_point windowStart, windowEnd;
  std::mutex mutex;
  std::condition_variable done;
  std::vector<uint32_t> latencies;  // µs, calls that ended inside the window
  std::map<int, uint64_t> codes;     // every call, by status code
  uint64_t inWindow = 0;
};

struct Slot {
  Run* run;
  grpc::GenericStub* stub;
  grpc::ClientContext* context = nullptr;
  grpc::ByteBuffer response;
  Clock::time_point started;

  void Start() {
    if (run->stopping.load()) { Finish(); return; }
    uint64_t index = run->next.fetch_add(1);
    if (!run->cycle && index >= run->records.size()) { Finish(); return; }
    const Record& record = run->records[index % run->records.size()];
    delete context;
    context = new grpc::ClientContext();
    for (auto& [name, value] : record.metadata) context->AddMetadata(name, value);
    started = Clock::now();
    stub->UnaryCall(context, run->method, grpc::StubOptions(), &record.message, &response,
                    [this](grpc::Status status) { Completed(status); });
  }

  void Completed(const grpc::Status& status) {
    auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(run->mutex);
      run->codes[status.error_code()] += 1;
      if (started >= run->windowStart && now <= run->windowEnd) {
        run->latencies.push_back(
            uint32_t(std::chrono::duration_cast<std::chrono::microseconds>(now - started).count()));
        run->inWindow += 1;
      }
    }
    if (status.error_code() != grpc::StatusCode::OK && run->codes[status.error_code()] <= 3) {
      std::fprintf(stderr, "status %d: %s\n", status.error_code(), status.error_message().c_str());
    }
    response.Clear();
    Start();
  }

  void Finish() {
    if (run->active.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(run->mutex);
      run->done.notify_all();
    }
  }
};

// One server-streaming call: the first record's request, then `items` responses read.
int RunStream(const std::string& target, const std::string& method, const Record& record, long items) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    std::fprintf(stderr, "cannot connect to %s\n", target.c_str());
    return 2;
  }
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  for (auto& [name, value] : record.metadata) context.AddMetadata(name, value);
  auto started = Clock::now();
  auto call = stub.PrepareCall(&context, method, &queue);
  void* tag;
  bool ok;
  auto step = [&](const char* what) {
    if (!queue.Next(&tag, &ok) || !ok) {
      std::fprintf(stderr, "stream: %s failed\n", what);
      return false;
    }
    return true;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (!step("start")) return 3;
  call->WriteLast(record.message, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  if (!step("write")) return 3;
  grpc::ByteBuffer response;
  long received = 0;
  size_t bytes = 0;
  while (received < items) {
    call->Read(&response, reinterpret_cast<void*>(3));
    if (!queue.Next(&tag, &ok) || !ok) break;
    bytes += response.Length();
    received += 1;
  }
  double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("{\"items\": %ld, \"bytes\": %zu, \"seconds\": %.3f, \"rate\": %.1f}\n", received, bytes, seconds,
              seconds > 0 ? double(received) / seconds : 0.0);
  std::fflush(stdout);
  std::_Exit(received == items ? 0 : 3);
}

}  // namespace

int main(int argc, char** argv) {
  std::string target, method, requests;
  int connections = 8, inflight = 32;
  double duration = 10, warmup = 1;
  bool cycle = false;
  long stream = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", arg.c_str()); std::exit(2); }
      return std::string(argv[++i]);
    };
    if (arg == "--target") target = value();
    else if (arg == "--method") method = value();
    else if (arg == "--requests") requests = value();
    else if (arg == "--connections") connections = std::stoi(value());
    else if (arg == "--inflight") inflight = std::stoi(value());
    else if (arg == "--duration") duration = std::stod(value());
    else if (arg == "--warmup") warmup = std::stod(value());
    else if (arg == "--cycle") cycle = true;
    else if (arg == "--stream") stream = std::stol(value());
    else { std::fprintf(stderr, "unknown argument %s\n", arg.c_str()); return 2; }
  }
  if (target.empty() || method.empty() || requests.empty()) {
    std::fprintf(stderr, "usage: loadgen --target HOST:PORT --method PATH --requests FILE [--connections N] "
                         "[--inflight N] [--duration S] [--warmup S] [--cycle]\n");
    return 2;
  }
  if (stream > 0) return RunStream(target, method, ReadRecords(requests).at(0), stream);
  Run run;
  run.method = method;
  run.cycle = cycle;
  run.records = ReadRecords(requests);
  if (run.records.empty()) { std::fprintf(stderr, "no records in %s\n", requests.c_str()); return 2; }

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  for (int c = 0; c < connections; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("groupd.loadgen.channel", c);  // a distinct channel, so a distinct connection
    args.SetMaxReceiveMessageSize(64 << 20);
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "cannot connect to %s\n", target.c_str());
      return 2;
    }
    channels.push_back(channel);
    stubs.push_back(std::make_unique<grpc::GenericStub>(channel));
  }

  auto begin = Clock::now();
  run.windowStart = begin + std::chrono::microseconds(int64_t(warmup * 1e6));
  run.windowEnd = run.windowStart + std::chrono::microseconds(int64_t(duration * 1e6));
  std::vector<std::unique_ptr<Slot>> slots;
  for (int c = 0; c < connections; ++c) {
    for (int m = 0; m < inflight; ++m) {
      auto slot = std::make_unique<Slot>();
      slot->run = &run;
      slot->stub = stubs[c].get();
      slots.push_back(std::move(slot));
    }
  }
  run.active = int(slots.size());
  for (auto& slot : slots) slot->Start();
  {
    std::unique_lock<std::mutex> lock(run.mutex);
    run.done.wait_until(lock, run.windowEnd, [&] { return run.active.load() == 0; });
  }
  auto windowClosed = std::min(Clock::now(), run.windowEnd);
  run.stopping = true;
  {
    std::unique_lock<std::mutex> lock(run.mutex);
    run.done.wait_for(lock, std::chrono::seconds(60), [&] { return run.active.load() == 0; });
  }
  std::lock_guard<std::mutex> lock(run.mutex);
  double seconds = std::chrono::duration<double>(windowClosed - run.windowStart).count();
  std::vector<uint32_t>& lat = run.latencies;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) -> uint32_t {
    if (lat.empty()) return 0;
    size_t i = std::min(lat.size() - 1, size_t(double(lat.size()) * p));
    return lat[i];
  };
  uint64_t failed = 0, total = 0;
  std::string codes;
  for (auto& [code, count] : run.codes) {
    total += count;
    if (code != 0) failed += count;
    if (!codes.empty()) codes += ", ";
    codes += "\"" + std::to_string(code) + "\": " + std::to_string(count);
  }
  std::printf("{\"calls\": %llu, \"seconds\": %.3f, \"rate\": %.1f, \"p50_us\": %u, \"p90_us\": %u, "
              "\"p99_us\": %u, \"max_us\": %u, \"total_calls\": %llu, \"failed\": %llu, \"codes\": {%s}, "
              "\"records\": %zu}\n",
              (unsigned long long)run.inWindow, seconds, seconds > 0 ? double(run.inWindow) / seconds : 0.0,
              pct(0.5), pct(0.9), pct(0.99), lat.empty() ? 0 : lat.back(), (unsigned long long)total,
              (unsigned long long)failed, codes.c_str(), run.records.size());
  // Calls still in flight after the grace period are abandoned with the process.
  std::fflush(stdout);
  std::_Exit(run.active.load() == 0 ? 0 : 3);
}
