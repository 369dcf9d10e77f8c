// ipc::Call: one synchronous request and its reply, over any Transport. The
// caller has one request outstanding on the connection and waits for it:
// the attach handshake and the re-adopt of a reconnect (libkv/client), the
// object store's client, kvctl's operator channel. A connection with many
// requests in flight routes replies by id on a reader thread instead
// (libkv/client/client_requests.cc) and does not use this.
//
// Why ipc/rpc/ and not ipc/uds/ or ipc/wire/: the rules here (request ids,
// notices, stray replies, error replies, the deadline and the spin) belong to
// the protocol, not to the socket; wire/ only encodes and decodes, and uds/
// is one transport of possibly several. A shared-memory ring goes beside
// uds/ as a second Transport and every caller of Call runs over it unchanged.
//
// Vocabulary: the *reply* is the message echoing the request's id; a
// *notice* is a message the peer sends on its own (request id 0: kvd's
// reclaim, forget, shutdown, a refusal at connect); a *stray* is a reply to
// another request (one a previous call gave up on, or a peer's mistake).
#ifndef NANOKV_IPC_RPC_CALL_H_
#define NANOKV_IPC_RPC_CALL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ipc/proto/nanokv.pb.h"
#include "ipc/rpc/transport.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

// The fds that come with a message while the call waits.
enum class ReplyFds {
  kRefuse,  // none expected: any message with fds is kProtocolError (fds closed)
  kClose,   // not wanted: closed on arrival (an operator is granted nothing)
  kKeep,    // the reply's are handed to the caller; a notice's or stray's are closed
};

// A reply to another request than the one waiting.
enum class StrayReplies {
  kRefuse,  // kProtocolError: nothing else can be in flight on this connection
  kSkip,    // dropped (its fds closed): a late answer to a call that gave up
};

struct CallOptions {
  // Names the other side in every message of the call's own failures, e.g.
  // "kvd" or "kvd at /tmp/nanokv/nanokv.sock". Must outlive the call.
  std::string_view peer = "the peer";
  // How long to wait for the reply once the request is sent; nullopt: until
  // it comes or the peer closes.
  std::optional<std::chrono::milliseconds> timeout;
  // Look without sleeping for this long before each blocking wait: a reply
  // that comes within it saves the wake-up of a blocked thread (the object
  // store's plan round trip, docs/BENCHMARKS.md). Costs this thread's CPU.
  std::chrono::microseconds spin{0};
  ReplyFds reply_fds = ReplyFds::kRefuse;
  StrayReplies stray_replies = StrayReplies::kRefuse;
  // Called with each notice that arrives while the call waits, in the peer's
  // order, on the calling thread. OK: keep waiting; an error ends the call
  // with it. Unset: notices are treated as strays (skipped or refused).
  std::function<Status(const wire::Message& notice)> on_notice;
};

struct Reply {
  wire::Message message;  // never an Error: those come back as their Status
  std::vector<int> fds;   // ReplyFds::kKeep only; the caller owns and closes them
};

// Sends `request` as request `request_id` (not 0, which is a notice's) with
// `request_fds` attached (the caller keeps them) and waits for its reply.
//
// The call's own failures, besides the transport's errors:
//   - kUnavailable when the timeout passes or the peer closes first; the
//     transport is then closed, so a late reply cannot be taken for the
//     answer to a later request;
//   - kProtocolError for a message that does not decode, fds against
//     ReplyFds::kRefuse, a stray against StrayReplies::kRefuse;
//   - kUnsupported for a message of another wire version (the peer is of
//     another release), naming the peer and both versions;
//   - an Error reply becomes its Status (the peer's code and message), and
//     so does an Error with request id 0: the peer's refusal of the
//     connection (kvd's at accept), after which the transport is closed.
// The transport stays open for any other outcome.
Result<Reply> Call(Transport& transport, uint64_t request_id, wire::Message request,
                   std::span<const int> request_fds, const CallOptions& options);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_RPC_CALL_H_
