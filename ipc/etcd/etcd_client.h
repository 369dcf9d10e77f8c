// An etcd v3 client over gRPC (etcd 3.4 serves gRPC on its client URL):
// the KV calls (Range, Put, DeleteRange, Txn), leases (grant, revoke, keep
// alive, time to live) and watches; what the master's election stands on,
// and what kvd and kvctl may use to find the leader (leader_record.h).
//
// Every call takes a deadline (monotonic) and returns by it: kUnavailable
// when no endpoint answered in time, never a call that blocks on a hung
// etcd. With several endpoints a call goes first to the one that answered
// last and, when that one is unreachable, hung or without a raft leader,
// to the next, each try getting an equal share of the time left. A write
// that timed out at one member may still have been applied there; callers
// that must not apply twice guard the write with a Txn compare (as the
// election does).
//
// Thread-safe: calls may run from several threads at once.
#ifndef NANOKV_IPC_ETCD_ETCD_CLIENT_H_
#define NANOKV_IPC_ETCD_ETCD_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/etcd/etcd_channel.h"
#include "ipc/etcd/etcd_types.h"
#include "ipc/etcd/etcd_watch.h"
#include "nanokv/status.h"

namespace nanokv::etcd {

class KeepAliveStream;

class EtcdClient {
 public:
  // Checks the options and opens a channel per endpoint; then waits up to
  // dial_timeout for one to connect (kUnavailable naming them all if none
  // does). dial_timeout 0 returns at once.
  static Result<std::unique_ptr<EtcdClient>> Connect(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  Result<RangeResult> Range(const RangeSpec& spec, Deadline deadline);
  // One key, or nullopt when it does not exist.
  Result<std::optional<KeyValue>> Get(std::string key, Deadline deadline);
  // Returns the revision of the write.
  Result<int64_t> Put(std::string key, std::string value, int64_t lease, Deadline deadline);
  // Deletes `key`, or [key, range_end); returns how many keys went.
  Result<int64_t> Delete(std::string key, std::string range_end, Deadline deadline);
  Result<TxnResult> Txn(const TxnSpec& spec, Deadline deadline);

  // etcd's leases are whole seconds, and etcd raises a TTL under its minimum
  // (1.5 election timeouts, rounded up: 2 s with etcd's defaults): the
  // answer says what was granted.
  Result<LeaseGrant> GrantLease(std::chrono::seconds ttl, Deadline deadline);
  // kNotFound when the lease does not exist (expired, or revoked before).
  Status RevokeLease(int64_t id, Deadline deadline);
  // Renews the lease once, on this client's keep-alive stream (kept open
  // between calls, opened again after a failure); returns the TTL it now has.
  // kNotFound when the lease has expired or was revoked.
  Result<std::chrono::seconds> KeepAliveOnce(int64_t id, Deadline deadline);
  Result<LeaseTimeToLive> TimeToLive(int64_t id, bool with_keys, Deadline deadline);

  // A watch on `spec`, confirmed by etcd before it returns.
  Result<std::unique_ptr<EtcdWatch>> Watch(const WatchSpec& spec, Deadline deadline);

  const std::vector<std::string>& endpoints() const { return names_; }
  // The endpoint the next call tries first: the last one that answered.
  size_t current_endpoint() const { return current_.load(std::memory_order_relaxed); }

 private:
  explicit EtcdClient(std::vector<std::unique_ptr<Endpoint>> endpoints);

  // Calls `attempt(endpoint, try_deadline)` on the endpoints in turn, from
  // the current one, each try with an equal share of the time left, until
  // one returns OK or an error another endpoint would give too (anything but
  // kUnavailable). With several endpoints that all failed, it goes round
  // them again after a short pause while the deadline allows (a cluster
  // electing a new raft leader). `what` names the call in the error.
  Status Failover(std::string_view what, Deadline deadline,
                  const std::function<Status(size_t index, Deadline try_deadline)>& attempt);
  // One renewal on endpoint `index`, opening the stream there if needed.
  // REQUIRES: this thread holds the stream (keep_alive_busy_ set by it).
  Result<std::chrono::seconds> KeepAliveAt(size_t index, int64_t id, Deadline deadline);

  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::vector<std::string> names_;
  std::atomic<size_t> current_{0};

  // One renewal at a time on the keep-alive stream; a renewal that fails or
  // times out closes it (a late reply must not answer the next renewal). A
  // flag under a mutex rather than a std::timed_mutex held across the call:
  // a waiter gives up at its own deadline either way, and TSan does not
  // model timed_mutex's pthread_mutex_clocklock.
  std::mutex keep_alive_mu_;
  std::condition_variable keep_alive_free_;
  bool keep_alive_busy_ = false;  // guarded by keep_alive_mu_
  std::unique_ptr<KeepAliveStream> keep_alive_;
  size_t keep_alive_endpoint_ = 0;
};

}  // namespace nanokv::etcd

#endif  // NANOKV_IPC_ETCD_ETCD_CLIENT_H_
