// What an empty call to the master costs by the gRPC server API that serves
// it, against the floors of the machine measured in the same run: the
// master's Ping, empty, served by (1) the callback API (what the master
// used), (2) the synchronous API (the handler runs on the thread that
// polled the call), (3) the synchronous API beside a callback method, as a
// server with a callback stream would be, and (4) an async server whose one
// thread both polls and answers (a completion queue of its own). Floors: a
// futex ping-pong between two threads (one wake each way: the least any
// call between threads costs) and a one-byte ping-pong over loopback TCP
// (the kernel's part of any gRPC call). The servers run in a child process,
// as the master runs apart from its callers; the client is a synchronous
// stub on the parent's one thread, as ClusterClient's are. Rounds
// interleave the servers so a noisy machine spreads its noise over all of
// them. One JSON object.
//
//   grpc_call_bench [--calls N] [--rounds R]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/bench_util.h"
#include "ipc/proto/master.grpc.pb.h"

namespace nanokv::bench {
namespace {

using master::v1::Master;
using master::v1::PingReply;
using master::v1::PingRequest;

class CallbackPing final : public Master::CallbackService {
 public:
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context, const PingRequest*, PingReply* reply) override {
    reply->set_term(1);
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

class SyncPing final : public Master::Service {
 public:
  grpc::Status Ping(grpc::ServerContext*, const PingRequest*, PingReply* reply) override {
    reply->set_term(1);
    return grpc::Status::OK;
  }
};

class MixedPing final : public Master::WithCallbackMethod_NodeSession<Master::Service> {
 public:
  grpc::Status Ping(grpc::ServerContext*, const PingRequest*, PingReply* reply) override {
    reply->set_term(1);
    return grpc::Status::OK;
  }
};

// One thread polls the queue and answers every Ping itself.
class AsyncPing {
 public:
  void Build(grpc::ServerBuilder& builder) {
    builder.RegisterService(&service_);
    queue_ = builder.AddCompletionQueue();
  }
  void Start() {
    Request();
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    queue_->Shutdown();
    thread_.join();
  }

 private:
  struct Call {
    grpc::ServerContext context;
    PingRequest request;
    PingReply reply;
    grpc::ServerAsyncResponseWriter<PingReply> writer{&context};
    bool answered = false;
  };
  void Request() {
    auto* call = new Call;
    service_.RequestPing(&call->context, &call->request, &call->writer, queue_.get(), queue_.get(), call);
  }
  void Run() {
    void* tag = nullptr;
    bool ok = false;
    while (queue_->Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      if (!ok || call->answered) {
        delete call;
        continue;
      }
      Request();
      call->reply.set_term(1);
      call->answered = true;
      call->writer.Finish(call->reply, grpc::Status::OK, call);
    }
  }
  Master::AsyncService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  std::thread thread_;
};

grpc::ServerBuilder& Bound(grpc::ServerBuilder& builder, int* port) {
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  return builder;
}

constexpr int kServers = 4;
const char* const kNames[kServers] = {"callback_api", "sync_api", "sync_beside_callback_stream", "async_one_thread"};

// The child: the four servers, their ports written to `out`, until the
// parent closes `stop`.
[[noreturn]] void Serve(int out, int stop) {
  CallbackPing callback;
  SyncPing sync;
  MixedPing mixed;
  AsyncPing async;
  int ports[kServers] = {0, 0, 0, 0};
  grpc::ServerBuilder builders[kServers];
  Bound(builders[0], &ports[0]).RegisterService(&callback);
  Bound(builders[1], &ports[1]).RegisterService(&sync);
  Bound(builders[2], &ports[2]).RegisterService(&mixed);
  async.Build(Bound(builders[3], &ports[3]));
  std::unique_ptr<grpc::Server> servers[kServers];
  for (int s = 0; s < kServers; ++s) servers[s] = builders[s].BuildAndStart();
  async.Start();
  if (write(out, ports, sizeof(ports)) != sizeof(ports)) std::_Exit(1);
  char byte = 0;
  while (read(stop, &byte, 1) > 0) {
  }
  for (auto& server : servers) server->Shutdown();
  async.Stop();
  std::_Exit(0);
}

// Microseconds per empty call, one per sample.
std::vector<double> Calls(Master::Stub& stub, int calls) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext context;
    PingRequest request;
    PingReply reply;
    const double began = NowMicros();
    grpc::Status status = stub.Ping(&context, request, &reply);
    us.push_back(NowMicros() - began);
    if (!status.ok()) {
      std::fprintf(stderr, "grpc_call_bench: Ping failed: %s\n", status.error_message().c_str());
      std::exit(1);
    }
  }
  return us;
}

// Round trips between two threads through one futex word each way.
std::vector<double> FutexPingPong(int rounds) {
  std::atomic<int> ball{0};
  std::thread partner([&] {
    for (int i = 0; i < rounds; ++i) {
      ball.wait(0);
      ball.store(0);
      ball.notify_one();
    }
  });
  std::vector<double> us;
  for (int i = 0; i < rounds; ++i) {
    const double began = NowMicros();
    ball.store(1);
    ball.notify_one();
    ball.wait(1);
    us.push_back(NowMicros() - began);
  }
  partner.join();
  return us;
}

// A byte there and back over loopback TCP between two threads.
std::vector<double> TcpPingPong(int rounds) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("grpc_call_bench: loopback listen");
    std::exit(1);
  }
  std::thread echo([&] {
    int peer = accept(listener, nullptr, nullptr);
    char byte = 0;
    while (read(peer, &byte, 1) == 1) {
      if (write(peer, &byte, 1) != 1) break;
    }
    close(peer);
  });
  int client = socket(AF_INET, SOCK_STREAM, 0);
  int on = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    std::perror("grpc_call_bench: loopback connect");
    std::exit(1);
  }
  std::vector<double> us;
  char byte = 1;
  for (int i = 0; i < rounds; ++i) {
    const double began = NowMicros();
    if (write(client, &byte, 1) != 1 || read(client, &byte, 1) != 1) break;
    us.push_back(NowMicros() - began);
  }
  close(client);
  echo.join();
  close(listener);
  return us;
}

int Main(int argc, char** argv) {
  LogToStderr("grpc_call_bench");
  int calls = 2000, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--calls") {
      calls = std::stoi(argv[i + 1]);
    } else if (flag == "--rounds") {
      rounds = std::stoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: grpc_call_bench [--calls N] [--rounds R]\n");
      return 2;
    }
  }
  // Forked before this process touches gRPC, whose threads a fork would
  // not carry.
  int ports_pipe[2], stop_pipe[2];
  if (pipe(ports_pipe) != 0 || pipe(stop_pipe) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(ports_pipe[0]);
    close(stop_pipe[1]);
    Serve(ports_pipe[1], stop_pipe[0]);
  }
  close(ports_pipe[1]);
  close(stop_pipe[0]);
  int ports[kServers] = {};
  if (child < 0 || read(ports_pipe[0], ports, sizeof(ports)) != sizeof(ports)) {
    std::fprintf(stderr, "grpc_call_bench: the servers did not start\n");
    return 1;
  }
  std::unique_ptr<Master::Stub> stubs[kServers];
  for (int s = 0; s < kServers; ++s) {
    stubs[s] = Master::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(ports[s]), grpc::InsecureChannelCredentials()));
    Calls(*stubs[s], calls / 10);  // connect and warm
  }
  std::map<std::string, std::vector<double>> samples;
  auto add = [&samples](const std::string& name, const std::vector<double>& us) {
    samples[name].insert(samples[name].end(), us.begin(), us.end());
  };
  for (int r = 0; r < rounds; ++r) {
    add("floor_futex_ping_pong", FutexPingPong(calls));
    add("floor_tcp_loopback_ping_pong", TcpPingPong(calls));
    for (int s = 0; s < kServers; ++s) add(kNames[s], Calls(*stubs[s], calls));
  }
  close(stop_pipe[1]);
  int status = 0;
  waitpid(child, &status, 0);

  JsonObject out;
  out.Add("bench", "grpc_call_bench")
      .Add("what", "an empty unary call (Master.Ping) over loopback by server API; sync stub client")
      .Add("cpus", static_cast<long long>(std::thread::hardware_concurrency()))
      .Add("calls_per_round", static_cast<long long>(calls))
      .Add("rounds", static_cast<long long>(rounds));
  for (const auto& [name, us] : samples) out.AddPercentiles(name + "_us", us);
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv::bench

int main(int argc, char** argv) { return nanokv::bench::Main(argc, argv); }
