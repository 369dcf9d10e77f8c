// The transfer agent's gate before a peer's hello: whether a hello admits
// its peer, and which endpoints may wait for one. An endpoint costs kvd fds
// and UCX memory from its connection on, before any token was shown, so the
// endpoints waiting for their hello are bounded per host and in all. A
// newcomer past a bound ends the oldest waiter (of its host, else of all)
// instead of being refused: a flood holding every place cannot keep out a
// real peer, whose hello follows its connection by a round trip. Plain
// bookkeeping, no UCX (fuzz/fuzz_transfer_headers.cc drives it).
#ifndef NANOKV_DAEMON_TRANSFER_HELLO_GATE_H_
#define NANOKV_DAEMON_TRANSFER_HELLO_GATE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ipc/proto/transfer.pb.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

inline constexpr size_t kMaxHelloWaitersPerHost = 64;
inline constexpr size_t kMaxHelloWaiters = 512;

// OK when `hello` speaks this kvd's protocol and, where the agent has a
// `token`, carries the same one (compared in constant time); else
// kUnsupported or kPermissionDenied naming master.token_file.
Status HelloVerdict(const transfer::v1::Hello& hello, std::string_view token);

// The endpoints waiting for their hello, oldest first.
class HelloWaiters {
 public:
  using Id = uint64_t;
  explicit HelloWaiters(size_t per_host = kMaxHelloWaitersPerHost, size_t total = kMaxHelloWaiters);

  // Records `id` (not waiting yet) from `host`. When `host` is at its bound,
  // its oldest waiter is taken out and returned to be ended; else when all
  // are, the oldest of all; else nullopt.
  std::optional<Id> Add(Id id, const std::string& host);
  // `id` was admitted or ended; nothing when it is not waiting.
  void Remove(Id id);
  bool Waiting(Id id) const { return by_id_.contains(id); }
  size_t size() const { return order_.size(); }
  size_t Of(const std::string& host) const;
  size_t per_host() const { return per_host_; }
  size_t total() const { return total_; }

 private:
  struct Waiter {
    Id id;
    std::string host;
  };
  void Erase(std::list<Waiter>::iterator at);

  const size_t per_host_;
  const size_t total_;
  std::list<Waiter> order_;
  std::unordered_map<Id, std::list<Waiter>::iterator> by_id_;
  std::unordered_map<std::string, size_t> per_host_count_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_TRANSFER_HELLO_GATE_H_
