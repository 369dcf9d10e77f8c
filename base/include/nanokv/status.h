// Errors as values. A Status is OK (no allocation) or carries a code, a message
// and, for driver failures, the call that failed and the driver's error name
// (e.g. "cuMemCreate", "CUDA_ERROR_OUT_OF_MEMORY"), so a log line can be grepped.
// Result<T> is a value or a non-OK Status. Library code never aborts on input.
#ifndef NANOKV_STATUS_H_
#define NANOKV_STATUS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace nanokv {

enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,     // the caller asked for something malformed
  kNotFound = 2,            // no such page, range, device, tenant, key
  kAlreadyExists = 3,       // e.g. a put on an existing key
  kOutOfMemory = 4,         // the device or host has no memory for it
  kResourceExhausted = 5,   // a limit we enforce: pool capacity, quota
  kPermissionDenied = 6,    // a peer or a call that is not allowed
  kFailedPrecondition = 7,  // right call, wrong state (map over a mapping)
  kUnavailable = 8,         // no driver, no device, daemon gone
  kUnsupported = 9,         // the platform or version cannot do it
  kIOError = 10,            // a system call failed
  kProtocolError = 11,      // a malformed or unexpected message
  kInternal = 12,           // a driver error we have no better code for
  kUnimplemented = 13,      // not built yet (the message names what would do it)
};
// The highest code: a code read from a peer is range-checked against it.
inline constexpr Code kLastCode = Code::kUnimplemented;

// "InvalidArgument", "OutOfMemory", ...
const char* CodeName(Code code);

// What a refusal tells a caller that acts on it, beyond its code. Carried as
// data so that no caller ever searches a message a person may reword.
enum class Hint : int {
  kNone = 0,
  // The refusal ends by itself once engines drop pages recycled away from
  // them ("held after recycle"): ask again after they answer the forget.
  kRetryAfterForget = 1,
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string_view message, std::string_view call = {},
         std::string_view error_name = {});
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view msg) { return {Code::kInvalidArgument, msg}; }
  static Status NotFound(std::string_view msg) { return {Code::kNotFound, msg}; }
  static Status AlreadyExists(std::string_view msg) { return {Code::kAlreadyExists, msg}; }
  static Status OutOfMemory(std::string_view msg) { return {Code::kOutOfMemory, msg}; }
  static Status ResourceExhausted(std::string_view msg) { return {Code::kResourceExhausted, msg}; }
  static Status PermissionDenied(std::string_view msg) { return {Code::kPermissionDenied, msg}; }
  static Status FailedPrecondition(std::string_view msg) { return {Code::kFailedPrecondition, msg}; }
  static Status Unavailable(std::string_view msg) { return {Code::kUnavailable, msg}; }
  static Status Unsupported(std::string_view msg) { return {Code::kUnsupported, msg}; }
  static Status ProtocolError(std::string_view msg) { return {Code::kProtocolError, msg}; }
  static Status Internal(std::string_view msg) { return {Code::kInternal, msg}; }
  static Status Unimplemented(std::string_view msg) { return {Code::kUnimplemented, msg}; }
  // A failed system call: code from errno (ENOMEM -> kOutOfMemory, EPERM/EACCES
  // -> kPermissionDenied, EINVAL -> kInvalidArgument, EAGAIN -> kUnavailable,
  // EMFILE/ENFILE -> kResourceExhausted, ENOENT -> kNotFound, else kIOError).
  static Status FromErrno(std::string_view call, int error_number, std::string_view context = {});

  bool ok() const { return state_ == nullptr; }
  Code code() const { return state_ ? state_->code : Code::kOk; }
  // Empty for OK.
  std::string_view message() const;
  std::string_view call() const;        // the failing call, if any
  std::string_view error_name() const;  // the driver's or errno's name, if any
  // kNone for OK. A copy keeps it; ToString() does not show it.
  Hint hint() const { return state_ ? state_->hint : Hint::kNone; }
  // The same refusal with `hint`. REQUIRES: !ok() (an OK status stays OK).
  Status WithHint(Hint hint) &&;
  // "OutOfMemory: cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY: device 0, 2097152 bytes"
  std::string ToString() const;

 private:
  struct State {
    Code code;
    std::string message;
    std::string call;
    std::string error_name;
    Hint hint;
  };
  std::unique_ptr<State> state_;  // null means OK, so the OK path costs nothing
};

// A value, or the Status that says why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  // By reference, never by value: a type aligned to 64 bytes (ObjectHeader)
  // passed by value is what GCC's note "the ABI for passing parameters with
  // 64-byte alignment has changed in GCC 4.6" is about.
  Result(const T& value) : value_(value) {}             // NOLINT: implicit by design
  Result(T&& value) : value_(std::move(value)) {}       // NOLINT
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("Result constructed from an OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok()
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace nanokv

#define NANOKV_CONCAT_INNER_(a, b) a##b
#define NANOKV_CONCAT_(a, b) NANOKV_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define NANOKV_RETURN_IF_ERROR(expr)                \
  do {                                              \
    ::nanokv::Status nanokv_status_ = (expr);       \
    if (!nanokv_status_.ok()) return nanokv_status_; \
  } while (0)

// `lhs = value of expr`, or return its Status. lhs may declare a variable.
#define NANOKV_ASSIGN_OR_RETURN(lhs, expr) \
  NANOKV_ASSIGN_OR_RETURN_IMPL_(NANOKV_CONCAT_(nanokv_result_, __LINE__), lhs, expr)
#define NANOKV_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#endif  // NANOKV_STATUS_H_
