// kvd's engine-facing server: one thread, one epoll loop over the listening
// socket, every engine connection, a pidfd per engine (so a dead process is
// noticed even if a child inherited its socket), and a stop eventfd.
//
// Every datagram is decoded and checked (ipc/wire/codec.h) before NodeState
// sees it; a bad one gets an Error reply naming the fault, and a connection
// that keeps sending them, sends fds, or does not read its replies is closed.
// Closing a connection detaches its tenant: every page it held comes back.
#ifndef NANOKV_DAEMON_SERVER_NODE_SERVER_H_
#define NANOKV_DAEMON_SERVER_NODE_SERVER_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/config/group_config.h"
#include "daemon/node/node_state.h"
#include "daemon/server/message_arena.h"
#include "ipc/proto/nanokv.pb.h"
#include "ipc/ring/doorbell.h"
#include "ipc/ring/request_ring.h"
#include "ipc/uds/channel.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

class KvdMetrics;
class ObjectIndex;

struct ServerOptions {
  std::vector<uid_t> allowed_uids;  // besides root and kvd's own uid
  std::vector<gid_t> allowed_gids;
  // Who may join which tenant group (groups: in the config). An engine that
  // names none gets its uid's own group; root and kvd's uid may join any.
  GroupAccessMap groups;
  std::string segment_name;         // told to engines at attach
  std::string backend_name;         // told to engines: they open the same
  // By kvd's ordinal: each device's uuid (gpu::DeviceInfo::uuid), told to
  // engines at attach and in object plans so that one under another device
  // mask finds its own ordinal for it. Missing or empty: none sent.
  std::vector<std::string> device_uuids;
  uint32_t max_faults = 16;         // protocol faults before a connection is closed
  bool check_invariants = false;    // NodeState::CheckInvariants after each change; Run fails on a break
  // After a restart, how long pages held back for the previous kvd's engines
  // wait for those engines to reconnect and hand them back (NodeState::Adopt).
  uint32_t recovery_window_ms = 10'000;
  // Connection limits (daemon/server/fd_budget.h; docs/RELIABILITY.md, "Resource
  // limits"): a connection past one is answered kResourceExhausted and
  // closed. The per-process one keeps one runaway engine from taking the
  // connections (and fds) every other engine needs.
  uint32_t max_connections = 1024;
  uint32_t max_connections_per_process = 64;
  // After a turn that served a request, poll without sleeping this long
  // before blocking in epoll_wait again (0: block at once).
  uint32_t busy_poll_us = 0;
};

// What the server tells its owner about a connection, for the segment.
struct ConnectionView {
  TenantId tenant = 0;
  ipc::PeerCredentials peer;
};

class NodeServer {
 public:
  // `node` must remain live while the server exists. Takes the listener.
  NodeServer(NodeState& node, ipc::Listener listener, ServerOptions options);
  ~NodeServer();

  // Called after each loop turn in which the node changed, and at least once
  // a second, with the node (for the /dev/shm segment).
  void SetPublisher(std::function<void(const NodeState&)> publish) { publish_ = std::move(publish); }
  // The object store object requests go to (daemon/server/node_server_objects.cc);
  // nullptr: they are answered kUnavailable. `store` must outlive the server.
  void SetObjectStore(ObjectIndex* store) { objects_ = store; }
  // Where the server counts requests, refusals and pages for /metrics
  // (kvd_metrics.h); nullptr (the default): metrics off, nothing counted.
  // `metrics` must outlive the server.
  void SetMetrics(KvdMetrics* metrics) { metrics_ = metrics; }

  // Runs until Stop() (from any thread or a signal handler's thread). On
  // return every engine was told kvd is stopping and every connection closed.
  Status Run();
  void Stop();
  // Runs `task` on the server's thread, between requests, with the node
  // (kvd's SIGHUP reload: a new default limit, an instance's limit). Notices
  // it queues go out in that turn. Thread-safe; not from a signal handler.
  // Tasks posted after Run returned never run.
  void Post(std::function<void(NodeState&)> task);

  size_t connection_count() const { return connections_.size(); }
  // Connections accepted only to be closed at once because kvd was out of
  // file descriptors (EMFILE/ENFILE at accept).
  uint64_t shed_connections() const { return shed_connections_; }
  // After Run: whether engines held pages when kvd stopped (the page journal
  // is then kept for the next kvd; the server stops writing it at the stop).
  bool pages_held_at_stop() const { return pages_held_at_stop_; }

 private:
  struct Connection {
    ipc::Channel channel;
    ipc::PeerCredentials peer;
    int pidfd = -1;
    TenantId tenant = 0;
    uint32_t faults = 0;
    // A peer kvd does not allow: it was sent the refusal and is closed once
    // what it sent is drained. Closing a socket with unread data would reset
    // the peer's end (ECONNRESET) before it could read why it was refused.
    bool refused = false;
    Status refusal;       // why, sent again for each message it sends
    uint64_t serial = 0;  // tells a refused connection from a later one on the same fd
    // Its shared-memory request ring, once asked for (node_server_rings.cc),
    // and whether the request being handled came through it (then so does
    // the reply, unless it carries fds).
    std::unique_ptr<ipc::RequestRing> ring;
    bool serving_ring = false;
    // The ring's doorbell (kvd's end), in epoll unless muted: rung
    // kMaxEmptyBells times in a row with nothing in the ring, it is left
    // out until the ring next holds a request (found by the turn's look).
    ipc::Doorbell doorbell;
    uint32_t empty_bells = 0;
    bool bell_muted = false;
    bool bell_muted_before = false;  // logged once per connection
  };
  // A refused connection still open: it is closed when the peer has read why
  // (it sends or hangs up) or at `deadline`, whichever comes first.
  struct Refusal {
    std::chrono::steady_clock::time_point deadline;
    int fd;
    uint64_t serial;
  };

  // epoll data tags: the low 32 bits carry the fd.
  static constexpr uint64_t kListenerTag = 1ull << 32;
  static constexpr uint64_t kStopTag = 2ull << 32;
  static constexpr uint64_t kSocketTag = 3ull << 32;
  static constexpr uint64_t kPidTag = 4ull << 32;
  static constexpr uint64_t kTaskTag = 5ull << 32;
  static constexpr uint64_t kRingTag = 6ull << 32;

  Status Setup();
  void RunPosted();
  // daemon/server/node_server_accept.cc: admission, limits, refusals.
  void Accept();
  // Why `peer` may not have another connection; OK if it may.
  Status Admit(const ipc::PeerCredentials& peer) const;
  void Refuse(std::unique_ptr<Connection> c, const Status& why);
  void CloseExpiredRefusals(bool all_over_cap);
  // Out of fds at accept: frees the spare fds, accepts one connection and,
  // unless it finds room after all (returned, to serve), tells the peer why
  // and closes it, so the listener stops being readable. With no spare to
  // free, pauses accepting (accepting_paused_) instead of spinning.
  std::optional<ipc::Channel> AcceptOutOfFds();
  // Reopens the spare fds that are missing; whether all are open.
  bool RefillSpares();
  void PauseAccepting();
  // Re-arms the listener once the pause is over; the loop's timeout, cut
  // to wake for that.
  int ResumeAcceptingIfDue(int timeout_ms);
  void OnReadable(int fd);
  void Handle(Connection& c, const std::vector<std::byte>& data, std::vector<int>* fds);
  void HandleAttach(Connection& c, const wire::Message& m);
  // The limit AttachRequest.device_fraction asks for, in bytes.
  uint64_t EngineDeviceShare(const wire::AttachRequest& a) const;
  void HandleGrant(Connection& c, uint64_t request_id, int device,
                   Result<std::vector<PageGrant>> granted);
  void HandleSetLimit(Connection& c, const wire::Message& m);
  void HandleEvict(Connection& c, const wire::Message& m);
  // Takes the datagram's fds (one per page) whatever the outcome.
  void HandleAdopt(Connection& c, const wire::Message& m, std::vector<int>* fds);
  // Any allowed peer, attached or not (objects are the node's).
  void HandleObject(Connection& c, const wire::Message& m);
  // Lease and release batches (node_server_object_batch.cc).
  void HandleObjectBatch(Connection& c, const wire::Message& m);
  // v2 slabs' grant and release (node_server_slabs.cc).
  void HandleSlab(Connection& c, const wire::Message& m);
  // Who a peer is to the object store when it acts on others' objects
  // (remove, pin, evict, a lease's release): its uid, or kOperator for root
  // and kvd's uid. A plan's own acts go by its plan's writer's uid alone
  // (node_server_objects.cc).
  static uint32_t ObjectPeer(const ipc::PeerCredentials& peer);
  // `gone` is closing: if no other connection has its uid, the pages that
  // uid held for writing go back to shared use.
  void ObjectPeerGone(const Connection& gone);
  bool PeerAllowed(const ipc::PeerCredentials& peer) const;
  // The group an attach from `peer` naming `asked` joins, or
  // kPermissionDenied naming the groups key that does not allow it.
  Result<std::string> GroupFor(const ipc::PeerCredentials& peer, const std::string& asked) const;
  // Sends or, if the peer cannot take it, closes the connection. False if closed.
  bool Send(Connection& c, const wire::Message& m, std::span<const int> fds = {});
  void SendError(Connection& c, uint64_t request_id, const Status& status);
  void Fault(Connection& c, uint64_t request_id, const Status& status);
  void DeliverNotices();
  void CloseConnection(int fd, const std::string& reason);
  // options_.device_uuids[device], or "" when there is none.
  const std::string& DeviceUuid(int device) const;
  void Shutdown();
  // daemon/server/node_server_rings.cc: the request rings.
  void HandleRingSetup(Connection& c, uint64_t request_id);
  // A doorbell rang: drains it and serves its ring.
  void OnDoorbell(int bell_fd);
  // Adds the connection's doorbell to epoll, or takes it out.
  void ListenToDoorbell(Connection& c, bool listen);
  // Serves what the connection's ring holds (a bounded number per turn).
  // True if it served anything.
  bool ServeRing(Connection& c);
  // ServeRing over every connection with a ring; true if any served.
  bool ServeRings();
  // Before sleeping: marks every ring's kvd side asleep and looks once
  // more; true when one already holds a request (then do not sleep).
  bool RingsAsleep();
  // Clears the marks, only after RingsAsleep: a store to the word at every
  // turn would take its cache line from each client that reads it per request.
  void RingsAwake();
  // Send's ring half: the reply to a ring request goes back on the ring
  // (fds, or no room, take the socket; the client is woken either way).
  // False when the ring is corrupt (the connection is then doomed).
  bool SendOnRing(Connection& c, const std::vector<std::byte>& bytes, bool* sent);

  NodeState& node_;  // must remain live while the server exists
  ObjectIndex* objects_ = nullptr;
  KvdMetrics* metrics_ = nullptr;
  ipc::Listener listener_;
  ServerOptions options_;
  std::function<void(const NodeState&)> publish_;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;  // eventfd
  int task_fd_ = -1;  // eventfd: Post wrote a task
  size_t rings_ = 0;  // connections with a ring
  std::map<int, int> doorbells_;  // a ring's doorbell (kvd's end) -> socket fd
  bool rings_marked_asleep_ = false;
  std::mutex tasks_mu_;
  std::vector<std::function<void(NodeState&)>> tasks_;  // guarded by tasks_mu_
  std::map<int, std::unique_ptr<Connection>> connections_;  // by socket fd
  std::map<int, int> pidfds_;                                // pidfd -> socket fd
  std::map<TenantId, int> tenant_fds_;                       // tenant -> socket fd
  std::vector<int> doomed_;  // connections to close at the end of this turn
  std::map<pid_t, uint32_t> per_process_;  // admitted connections by peer pid
  std::deque<Refusal> refusals_;           // oldest first; some may be closed already
  size_t refused_open_ = 0;                // refused connections still open
  uint64_t next_serial_ = 1;
  size_t live_slabs_ = 0;  // v2 slabs at the last loop turn
  // /dev/null, given up when out of fds: one for the accept, the rest for
  // what telling that peer why may open (a sanitizer runtime checks memory
  // through a pipe: found by ASan/UBSan in CI, a false "invalid vptr").
  std::array<int, 3> spare_fds_{-1, -1, -1};
  uint64_t shed_connections_ = 0;
  bool accepting_paused_ = false;
  uint64_t accept_pauses_ = 0;
  std::chrono::steady_clock::time_point accepting_resumes_;
  bool dirty_ = true;
  bool pages_held_at_stop_ = false;
  ArenaBlock request_block_;  // each request's decoded message (Handle)
  ArenaBlock reply_block_;    // a batch's reply (HandleObjectBatch)
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_SERVER_NODE_SERVER_H_
