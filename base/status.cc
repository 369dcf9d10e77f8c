#include "nanokv/status.h"

#include <cerrno>
#include <cstring>

namespace nanokv {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kOutOfMemory: return "OutOfMemory";
    case Code::kResourceExhausted: return "ResourceExhausted";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kFailedPrecondition: return "FailedPrecondition";
    case Code::kUnavailable: return "Unavailable";
    case Code::kUnsupported: return "Unsupported";
    case Code::kIOError: return "IOError";
    case Code::kProtocolError: return "ProtocolError";
    case Code::kInternal: return "Internal";
    case Code::kUnimplemented: return "Unimplemented";
  }
  return "Unknown";
}

Status::Status(Code code, std::string_view message, std::string_view call,
               std::string_view error_name) {
  if (code == Code::kOk) return;
  state_ = std::make_unique<State>(
      State{code, std::string(message), std::string(call), std::string(error_name), Hint::kNone});
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  return *this;
}

std::string_view Status::message() const { return state_ ? std::string_view(state_->message) : ""; }
std::string_view Status::call() const { return state_ ? std::string_view(state_->call) : ""; }
std::string_view Status::error_name() const {
  return state_ ? std::string_view(state_->error_name) : "";
}

Status Status::WithHint(Hint hint) && {
  if (state_) state_->hint = hint;
  return std::move(*this);
}

std::string Status::ToString() const {
  if (!state_) return "OK";
  std::string out = CodeName(state_->code);
  if (!state_->call.empty()) out += ": " + state_->call;
  if (!state_->error_name.empty()) out += ": " + state_->error_name;
  if (!state_->message.empty()) out += ": " + state_->message;
  return out;
}

Status Status::FromErrno(std::string_view call, int error_number, std::string_view context) {
  Code code = Code::kIOError;
  switch (error_number) {
    case ENOMEM: code = Code::kOutOfMemory; break;
    case EPERM:
    case EACCES: code = Code::kPermissionDenied; break;
    case EINVAL: code = Code::kInvalidArgument; break;
    case ENOENT: code = Code::kNotFound; break;
    case EMFILE:
    case ENFILE: code = Code::kResourceExhausted; break;
    case EAGAIN: code = Code::kUnavailable; break;  // would block: try later
    default: break;
  }
  std::string message = std::strerror(error_number);
  if (!context.empty()) message = std::string(context) + ": " + message;
  const char* name = strerrorname_np(error_number);
  return Status(code, message, call, name ? name : "");
}

}  // namespace nanokv
