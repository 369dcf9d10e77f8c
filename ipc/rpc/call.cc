#include "ipc/rpc/call.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "ipc/wire/codec.h"

namespace nanokv::ipc {
namespace {

using Clock = Transport::Clock;

constexpr Clock::time_point kLookOnce = Transport::kLookOnce;
// Looks between two readings of the clock while spinning: a look at a ring
// is a load, a clock read costs as much as several.
constexpr unsigned kLooksPerClockRead = 8;

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

std::string Duration(std::chrono::milliseconds timeout) {
  if (timeout.count() >= 1000 && timeout.count() % 1000 == 0) {
    return std::to_string(timeout.count() / 1000) + " s";
  }
  return std::to_string(timeout.count()) + " ms";
}

// The next message: looks without sleeping for up to `spin`, then blocks
// until `deadline`.
Result<Transport::Received> NextMessage(Transport& transport, std::vector<std::byte>* data,
                                        std::vector<int>* fds, Clock::time_point deadline,
                                        std::chrono::microseconds spin) {
  if (spin.count() > 0) {
    const Clock::time_point spin_until = std::min(Clock::now() + spin, deadline);
    unsigned looks = 0;
    do {
      NANOKV_ASSIGN_OR_RETURN(Transport::Received received,
                              transport.Receive(data, fds, kLookOnce));
      if (received != Transport::Received::kTimedOut) return received;
    } while (++looks % kLooksPerClockRead != 0 || Clock::now() < spin_until);
  }
  return transport.Receive(data, fds, deadline);
}

// The refusal a peer sent just before it closed the connection (kvd out of
// fds closes at once), when the send or receive found the connection gone:
// read before the close, so the caller hears why instead of a reset.
std::optional<Status> RefusalLeftBehind(Transport& transport) {
  std::vector<std::byte> data;
  std::vector<int> fds;
  auto received = transport.Receive(&data, &fds, kLookOnce);
  CloseAll(&fds);
  if (!received.ok() || *received != Transport::Received::kMessage) return std::nullopt;
  wire::Message message;
  if (!wire::Decode(data, &message).ok()) return std::nullopt;
  if (message.request_id() != 0 || !message.has_error()) return std::nullopt;
  return wire::StatusFromError(message.error());
}

}  // namespace

Result<Reply> Call(Transport& transport, uint64_t request_id, wire::Message request,
                   std::span<const int> request_fds, const CallOptions& options) {
  if (request_id == 0) {
    return Status::InvalidArgument("request id 0 is a notice's, not a request's");
  }
  // Named in failures only: the answered path builds no string.
  const char* body = wire::BodyName(request);
  auto asked = [&] { return std::string(body) + " (request " + std::to_string(request_id) + ")"; };
  request.set_request_id(request_id);
  if (Status sent = transport.Send(wire::Encode(std::move(request)), request_fds); !sent.ok()) {
    // Only where the peer is gone: any other failure leaves what it sent unread.
    const std::string_view why = sent.error_name();
    if (why == "EPIPE" || why == "ECONNRESET" || why == "ECONNREFUSED" || why == "ENOTCONN") {
      if (auto refusal = RefusalLeftBehind(transport)) return *refusal;
    }
    return sent;
  }
  // From the send, as a blocked poll would count it.
  const Clock::time_point deadline =
      options.timeout ? Clock::now() + *options.timeout : Transport::kNoDeadline;

  std::vector<std::byte> data;
  std::vector<int> fds;  // empty at the top of each turn
  for (;;) {
    auto received = NextMessage(transport, &data, &fds, deadline, options.spin);
    if (!received.ok()) {
      CloseAll(&fds);
      return received.status();
    }
    if (*received == Transport::Received::kTimedOut) {
      transport.Close();
      // Only a call with a timeout gets here.
      const auto waited = options.timeout.value_or(std::chrono::milliseconds::zero());
      return Status::Unavailable(std::string(options.peer) + " did not answer " + asked() +
                                 " within " + Duration(waited) + " (busy or hung?)");
    }
    if (*received == Transport::Received::kClosed) {
      CloseAll(&fds);
      auto refusal = RefusalLeftBehind(transport);
      transport.Close();
      if (refusal) return *refusal;
      return Status::Unavailable(std::string(options.peer) +
                                 " closed the connection before answering " + asked());
    }
    wire::Message message;
    Status decoded = wire::Decode(data, &message);
    if (!decoded.ok()) {
      CloseAll(&fds);
      if (decoded.code() == Code::kUnsupported) {  // another wire version: say who
        return Status::Unsupported(std::string(options.peer) + ": " + std::string(decoded.message()));
      }
      return decoded;
    }
    if (!fds.empty() && options.reply_fds != ReplyFds::kKeep) {
      CloseAll(&fds);
      if (options.reply_fds == ReplyFds::kRefuse) {
        return Status::ProtocolError(std::string(options.peer) + "'s " + wire::BodyName(message) +
                                     " carried fds");
      }
    }
    if (message.request_id() == request_id) {
      if (message.has_error()) {
        CloseAll(&fds);
        return wire::StatusFromError(message.error());
      }
      return Reply{std::move(message), std::move(fds)};
    }
    CloseAll(&fds);  // a notice's or a stray's: the caller asked for none of them
    if (message.request_id() == 0 && message.has_error()) {
      // The peer refused the connection (kvd at accept: a uid not allowed,
      // a connection limit): that is the answer, whatever was asked.
      transport.Close();
      return wire::StatusFromError(message.error());
    }
    if (message.request_id() == 0 && options.on_notice) {
      NANOKV_RETURN_IF_ERROR(options.on_notice(message));
      continue;
    }
    if (options.stray_replies == StrayReplies::kRefuse) {
      return Status::ProtocolError(
          std::string(options.peer) + " sent " + wire::BodyName(message) +
          (message.request_id() == 0 ? std::string(" on its own")
                                     : " for request " + std::to_string(message.request_id())) +
          " while " + asked() + " waited");
    }
  }
}

}  // namespace nanokv::ipc
