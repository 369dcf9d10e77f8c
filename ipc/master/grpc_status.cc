#include "ipc/master/grpc_status.h"

#include <charconv>
#include <string>

namespace nanokv::master {
namespace {

constexpr size_t kMaxMessageBytes = 1024;

grpc::StatusCode GrpcCode(Code code) {
  switch (code) {
    case Code::kOk: return grpc::StatusCode::OK;
    case Code::kInvalidArgument:
    case Code::kProtocolError: return grpc::StatusCode::INVALID_ARGUMENT;
    case Code::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case Code::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case Code::kOutOfMemory:
    case Code::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Code::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case Code::kFailedPrecondition:
    case Code::kUnsupported: return grpc::StatusCode::FAILED_PRECONDITION;
    case Code::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case Code::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case Code::kIOError:
    case Code::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

// A status that came without our code: what the transport's code means here.
Code NanokvCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return Code::kOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: return Code::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND: return Code::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS: return Code::kAlreadyExists;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return Code::kResourceExhausted;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED: return Code::kPermissionDenied;
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED: return Code::kFailedPrecondition;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED: return Code::kUnavailable;
    case grpc::StatusCode::UNIMPLEMENTED: return Code::kUnimplemented;
    default: return Code::kInternal;
  }
}

bool ValidCode(uint64_t code) { return code >= 1 && code <= static_cast<uint64_t>(kLastCode); }

std::string Bounded(std::string_view text) {
  return std::string(text.substr(0, kMaxMessageBytes));
}

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(GrpcCode(status.code()), Bounded(status.ToString()),
                      std::to_string(static_cast<int>(status.code())));
}

Status FromGrpcStatus(const grpc::Status& status, std::string_view peer) {
  if (status.ok()) return Status::OK();
  Code code = NanokvCode(status.error_code());
  const std::string& details = status.error_details();
  uint64_t ours = 0;
  auto parsed = std::from_chars(details.data(), details.data() + details.size(), ours);
  if (!details.empty() && parsed.ec == std::errc() && parsed.ptr == details.data() + details.size() &&
      ValidCode(ours)) {
    code = static_cast<Code>(ours);
  }
  std::string message = Bounded(status.error_message());
  if (message.empty()) message = "gRPC status " + std::to_string(static_cast<int>(status.error_code()));
  return Status(code, std::string(peer) + ": " + message);
}

void ToItem(const Status& status, v1::ItemStatus* out) {
  out->set_code(static_cast<uint32_t>(status.code()));
  if (!status.ok()) out->set_message(Bounded(status.ToString()));
}

Status FromItem(const v1::ItemStatus& item, std::string_view peer) {
  if (item.code() == 0) return Status::OK();
  if (!ValidCode(item.code())) {
    return Status::ProtocolError(std::string(peer) + ": status code " + std::to_string(item.code()) +
                                 " is not one of nanokv's");
  }
  return Status(static_cast<Code>(item.code()), std::string(peer) + ": " + Bounded(item.message()));
}

}  // namespace nanokv::master
