// The masters' leader election, on an etcd lease (docs/ARCHITECTURE.md,
// "The master's election"). Each master campaigns: it holds a lease and,
// under it, the key `<election_key>/<lease id>` (ipc/etcd/leader_record.h);
// the candidate whose key is oldest (lowest create_revision) leads, and that
// revision is its term, so terms only grow, from leader to leader and across
// etcd restarts.
//
// Safety: a master answers IsLeader() only while its lease is surely live
// at etcd. It renews every lease_ttl/3; each renewal sent at time t, on the
// monotonic clock, keeps the lease live at etcd until at least t + TTL (etcd
// starts the TTL when it receives the renewal, later than t), so the master
// holds leadership until t + lease_ttl - lease_ttl/10 (the tenth is slack
// for clocks that run at slightly different rates) and no longer. Another
// master can lead only after etcd deleted this one's key, when its lease has
// expired or was revoked, so never while this one still claims it. Every
// call to etcd ends by that deadline too, so a leader steps down on time
// (on_change(false)) even when etcd hangs rather than refuses. A lease that
// could not be renewed in time is given up for good: the master campaigns
// again under a new lease and, if it wins, with a new and higher term.
#ifndef NANOKV_MASTER_ELECTION_LEADER_ELECTION_H_
#define NANOKV_MASTER_ELECTION_LEADER_ELECTION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ipc/etcd/etcd_client.h"
#include "ipc/etcd/leader_record.h"
#include "nanokv/status.h"

namespace nanokv::master {

// Who leads: its candidate id, its gRPC address, its term.
using LeaderInfo = etcd::LeaderInfo;

struct ElectionOptions {
  std::vector<std::string> etcd_endpoints;
  std::string election_key = "/nanokv/default/leader";  // the prefix under which candidates register
  std::string candidate_id;      // this master's id
  std::string address;           // where its gRPC service listens, told to whoever asks who leads
  // At least 1 s (etcd's leases are whole seconds; etcd may grant more, to
  // its minimum, but the master holds leadership by this one). A killed
  // leader is replaced after about this long plus up to 0.5 s (etcd looks
  // for expired leases twice a second).
  std::chrono::milliseconds lease_ttl{3000};
  // TLS to etcd (etcd::EtcdOptions): CA, client certificate and key, PEM.
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
};

class LeaderElection {
 public:
  using OnChange = std::function<void(bool is_leader, const LeaderInfo& leader)>;

  // Checks the options (kInvalidArgument naming the fault) and starts
  // campaigning on a thread of its own; etcd need not be up yet. on_change
  // runs on that thread each time this master becomes leader (true, with its
  // term) or stops being leader (false, with the term it held: deposed, etcd
  // lost, lease lapsed, Stop). It must not call Stop.
  static Result<std::unique_ptr<LeaderElection>> Start(ElectionOptions options, OnChange on_change);
  ~LeaderElection();  // Stop()
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Who leads as last seen (self or another); nullopt when unknown (no
  // candidate, or this master lost touch with etcd).
  std::optional<LeaderInfo> Leader() const;
  // True only while this master's lease is surely still live; checks the
  // clock itself, so it turns false on time even if the election thread is
  // late. Cheap (two atomic loads): fit to guard every request.
  bool IsLeader() const;
  // This master's term while leader, 0 otherwise.
  uint64_t term() const;
  // Steps down (on_change(false) if leading), revokes the lease so a standby
  // takes over at once, and joins the thread. Idempotent.
  void Stop();

 private:
  LeaderElection(ElectionOptions options, OnChange on_change, std::unique_ptr<etcd::EtcdClient> client);

  // The election thread: Campaign after Campaign until Stop.
  void Run();
  // One lease: register, then lead or stand by, renewing, until the lease is
  // given up (an error says why) or Stop (OK).
  Status Campaign();
  // Reads the candidates; leads when ours is the oldest; (re)opens the watch.
  Status ReadAndDecide();
  // Renews the lease; kNotFound when it is gone.
  Status Renew();
  // Gives up the lease: steps down if leading; revoked at the next campaign.
  void GiveUpLease(const std::string& why);
  void BecomeLeader();
  void StepDown(const std::string& why);
  void SetWatch(std::unique_ptr<etcd::EtcdWatch> watch);
  // A call's deadline: a third of the TTL, never past the lease's validity.
  etcd::Deadline CallDeadline() const;
  // Waits until `deadline` or Stop.
  void Sleep(etcd::Deadline deadline);
  void Report(const Status& status);

  const ElectionOptions options_;
  const OnChange on_change_;
  const std::unique_ptr<etcd::EtcdClient> client_;
  const std::chrono::milliseconds renew_every_;  // lease_ttl / 3
  const std::chrono::milliseconds slack_;        // lease_ttl / 10
  const std::chrono::milliseconds retry_every_;  // lease_ttl / 10

  // The election thread's own state.
  int64_t lease_ = 0;            // 0: none
  int64_t abandoned_lease_ = 0;  // given up, still to revoke
  std::string key_;              // our candidate key
  int64_t revision_ = 0;         // its create_revision: our term if we lead
  etcd::Deadline valid_until_{}; // the lease is surely live before this
  etcd::Deadline renew_at_{};
  etcd::Deadline read_at_{};     // when to read the candidates again
  bool leading_ = false;
  std::string last_report_;      // the last error logged (repeats go to debug)

  // Read by other threads.
  std::atomic<int64_t> leader_until_ns_{0};  // steady ns; 0 when not leading
  std::atomic<uint64_t> term_{0};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::optional<LeaderInfo> leader_;          // guarded by mu_
  std::unique_ptr<etcd::EtcdWatch> watch_;    // replaced under mu_ (Stop cancels it)
  std::thread thread_;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_ELECTION_LEADER_ELECTION_H_
