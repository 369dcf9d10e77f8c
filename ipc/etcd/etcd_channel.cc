#include "ipc/etcd/etcd_channel.h"

#include <charconv>

#include <grpc/grpc.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "base/small_file.h"

namespace nanokv::etcd {
namespace {

constexpr size_t kMaxMessageBytes = 512;

Result<std::string> ReadPem(const std::string& path, const char* what) {
  return ReadPemFile(path, std::string("etcd: the ") + what);
}

struct ParsedEndpoint {
  std::string target;  // host:port, what gRPC dials
  bool tls = false;
};

Result<ParsedEndpoint> ParseEndpoint(const std::string& endpoint, bool tls_files) {
  ParsedEndpoint parsed;
  std::string_view rest = endpoint;
  parsed.tls = tls_files;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    parsed.tls = false;
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    parsed.tls = true;
  }
  if (rest.ends_with("/")) rest.remove_suffix(1);
  size_t colon = rest.rfind(':');
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("etcd endpoint '" + endpoint + "': " + why +
                                   " (want host:port, http://host:port or https://host:port)");
  };
  if (colon == std::string_view::npos || colon == 0) return bad("no host:port");
  std::string_view host = rest.substr(0, colon);
  std::string_view port_text = rest.substr(colon + 1);
  unsigned port = 0;
  auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    return bad("the port is not a number in 1-65535");
  }
  for (char c : host) {
    if (c <= ' ' || c > '~' || c == '/') return bad("the host has a character hosts do not have");
  }
  parsed.target = std::string(rest);
  return parsed;
}

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  // A member that comes back is tried again within a second, not after
  // gRPC's default backoff of up to two minutes. (Not the minimum connect
  // timeout, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: with gRPC 1.51 any value of
  // it made every connection to etcd fail its handshake.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Pings find a connection to a hung member (a watch on it would wait
  // forever). etcd refuses pings more often than every 5 s by default.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  // Each client its own connections: two clients in one process (two
  // candidates in a test) must not share a TCP connection gRPC pooled.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

}  // namespace

Result<std::vector<std::unique_ptr<Endpoint>>> OpenEndpoints(const EtcdOptions& options) {
  if (options.endpoints.empty()) return Status::InvalidArgument("etcd: no endpoints given");
  if (options.cert_file.empty() != options.key_file.empty()) {
    return Status::InvalidArgument("etcd: cert_file and key_file come together (client certificate auth)");
  }
  if (options.dial_timeout.count() < 0) return Status::InvalidArgument("etcd: dial_timeout is negative");
  grpc::SslCredentialsOptions ssl;
  if (!options.ca_file.empty()) {
    NANOKV_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(options.ca_file, "CA file"));
  }
  if (!options.cert_file.empty()) {
    NANOKV_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(options.cert_file, "certificate file"));
    NANOKV_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(options.key_file, "key file"));
  }
  const bool tls_files = !options.ca_file.empty() || !options.cert_file.empty();

  std::vector<std::unique_ptr<Endpoint>> endpoints;
  for (const std::string& name : options.endpoints) {
    NANOKV_ASSIGN_OR_RETURN(ParsedEndpoint parsed, ParseEndpoint(name, tls_files));
    auto credentials = parsed.tls ? grpc::SslCredentials(ssl) : grpc::InsecureChannelCredentials();
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->name = name;
    endpoint->channel = grpc::CreateCustomChannel(parsed.target, credentials, ChannelArgs());
    endpoint->kv = etcdserverpb::KV::NewStub(endpoint->channel);
    endpoint->lease = etcdserverpb::Lease::NewStub(endpoint->channel);
    endpoint->watch = etcdserverpb::Watch::NewStub(endpoint->channel);
    endpoints.push_back(std::move(endpoint));
  }
  return endpoints;
}

Status FromGrpc(const grpc::Status& status, std::string_view endpoint, std::string_view what) {
  if (status.ok()) return Status::OK();
  std::string message = status.error_message().substr(0, kMaxMessageBytes);
  if (message.empty()) message = "gRPC status " + std::to_string(static_cast<int>(status.error_code()));
  std::string text = "etcd " + std::string(endpoint) + ": " + std::string(what) + ": " + message;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return Status::Unavailable(text);
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(text);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return Status::InvalidArgument(text);
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
      return Status::FailedPrecondition(text);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status::PermissionDenied(text);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(text);
    case grpc::StatusCode::UNIMPLEMENTED:
      return Status::Unsupported(text);
    default:
      return Status::Internal(text);
  }
}

std::chrono::system_clock::time_point ToSystemDeadline(Deadline deadline) {
  auto left = deadline - Clock::now();
  if (left < Clock::duration::zero()) left = Clock::duration::zero();
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(left);
}

}  // namespace nanokv::etcd
