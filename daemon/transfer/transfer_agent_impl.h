// The transfer agent's inside, shared by its files: transfer_agent.cc (the
// thread, endpoints, hello, timeouts) and transfer_ops.cc (put and get).
// Everything below the options is touched by the agent's thread only.
#ifndef NANOKV_DAEMON_TRANSFER_TRANSFER_AGENT_IMPL_H_
#define NANOKV_DAEMON_TRANSFER_TRANSFER_AGENT_IMPL_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/transfer/event_tally.h"
#include "daemon/transfer/hello_gate.h"
#include "daemon/transfer/transfer_agent.h"
#include "gpu/pinned_pool.h"
#include "ipc/ucx/transfer_wire.h"
#include "ipc/ucx/ucx.h"

namespace nanokv::kvd {

using Clock = std::chrono::steady_clock;

// What one endpoint may hold at once: reads in flight (each a lease of
// kvd's own caller, whose max_leases every peer shares) and put chunks
// queued for a staging buffer (each a rendezvous descriptor UCX keeps).
inline constexpr int kMaxGetsPerPeer = 64;
inline constexpr int kMaxQueuedPutsPerPeer = 256;

class TransferAgent::Impl {
 public:
  Impl(ObjectIndex& store, gpu::Backend& backend, TransferAgentOptions options);
  ~Impl();
  Status Open();
  void Run();
  void Stop();

  std::string address_;
  std::string mode_ = "staging";

  // One connected peer. Freed only once closed and nothing of its is in
  // flight (callbacks hold it).
  struct Peer {
    Impl* impl = nullptr;
    ucp_ep_h ep = nullptr;
    std::string host;           // where it connected from (HelloWaiters' bound)
    bool admitted = false;      // its hello carried the protocol and token
    bool close_after_reply = false;
    bool closing = false;
    void* close_request = nullptr;
    int outstanding = 0;        // our sends and receives on it not completed
    int gets = 0;               // its reads in flight (each holds a lease: bounded)
    int queued_puts = 0;        // its chunks waiting for a staging buffer (bounded)
    Clock::time_point last_heard = Clock::now();
  };
  // An active message a handler queued for the loop (handlers may not
  // progress the worker, and a rendezvous receive wants a staging buffer).
  struct Incoming {
    uint16_t id = 0;
    Peer* peer = nullptr;
    std::string header;
    void* descriptor = nullptr;  // rendezvous data, until received or released
    std::vector<std::byte> eager;
    size_t length = 0;
  };
  // A read in progress: the lease, the plan, the chunks sent and in flight.
  struct GetTransfer {
    Peer* peer = nullptr;
    uint64_t request_id = 0;
    std::string key;
    uint64_t lease_id = 0;
    Clock::time_point leased_at = Clock::now();  // renewed at half of lease_ttl
    ObjectPlan plan;
    const std::byte* source = nullptr;  // the payload in kvd's mapping
    uint64_t next = 0;
    int inflight = 0;
    bool failed = false;
    bool waiting = false;  // waiting for a staging buffer (Sweep pumps it)
  };
  // One send or receive in flight, for its callback.
  struct Op {
    Impl* impl = nullptr;
    Peer* peer = nullptr;
    std::string header;           // a send's header, alive until it completes
    std::byte* staging = nullptr;  // given back on completion
    GetTransfer* get = nullptr;   // a get's chunk
    transfer::v1::Put put;        // a put's chunk: where it goes
    size_t length = 0;
  };
  // The chunks of a remote write that have landed, by (key, epoch).
  struct WriteState {
    std::map<uint64_t, uint64_t> have;  // offset -> end, merged
    bool begun = false;
    Clock::time_point last = Clock::now();
  };

  // transfer_agent.cc
  static void OnConnection(ucp_conn_request_h request, void* arg);
  static void OnPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  // Queues a message for the loop (a handler may not progress the worker).
  static ucs_status_t OnMessage(uint16_t id, void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  template <uint16_t Id>
  static ucs_status_t OnMessageOf(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
    return OnMessage(Id, arg, header, header_length, data, length, param);
  }
  static void OnReplySent(void* request, ucs_status_t status, void* user_data);
  void Handle(Incoming& in);
  void HandleHello(Incoming& in);
  void Reply(Peer* peer, uint16_t id, const transfer::v1::Reply& reply);
  void Close(Peer* peer, bool force, const std::string& why);
  void Release(Incoming& in);
  static HelloWaiters::Id IdOf(const Peer* peer) { return reinterpret_cast<uintptr_t>(peer); }
  // Timeouts, closed peers freed, waiters given buffers. True if it did anything.
  bool Sweep();
  // Whether a read or a queued chunk still points at `peer`.
  bool Referenced(const Peer* peer) const;
  // A chunk's buffer; nullptr when staging_buffers are all in use.
  std::byte* TakeStaging() { return staging_.Take(options_.config.chunk_bytes); }
  bool StagingLeft() const { return staging_.CanTake(); }
  void GiveStaging(std::byte* buffer) { staging_.Give(buffer); }

  // transfer_ops.cc
  void HandlePut(Incoming& in);
  void HandleGet(Incoming& in);
  static void OnPutReceived(void* request, ucs_status_t status, size_t length, void* user_data);
  static void OnGetSent(void* request, ucs_status_t status, void* user_data);
  // Copies a chunk (at `bytes`) into the plan's space; READY after the last.
  void Land(Peer* peer, const transfer::v1::Put& put, const std::byte* bytes, size_t length);
  void Pump(GetTransfer* get);
  void FinishGet(GetTransfer* get);
  // A fresh lease for a read still in flight at half its lease_ttl (a slow
  // peer must not outlive the lease that keeps the space from reuse).
  void RenewLease(GetTransfer* get);
  Result<std::byte*> PayloadOf(const ObjectPlan& plan);

  ObjectIndex& store_;
  gpu::Backend& backend_;
  const TransferAgentOptions options_;
  std::unique_ptr<ucx::Context> context_;
  std::unique_ptr<ucx::Worker> worker_;
  std::unique_ptr<ucx::Listener> listener_;
  int stop_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  std::unordered_map<ucp_ep_h, std::unique_ptr<Peer>> peers_;
  // Peers whose endpoint closed while reads or chunks still point at them
  // (their endpoint's address may be a new peer's key by now).
  std::vector<std::unique_ptr<Peer>> closed_peers_;
  std::deque<Incoming> incoming_;
  std::deque<Incoming> waiting_puts_;  // rendezvous chunks waiting for a staging buffer
  std::list<std::unique_ptr<GetTransfer>> gets_;
  std::map<std::pair<std::string, uint32_t>, WriteState> writes_;
  gpu::PinnedPool staging_;
  HelloWaiters waiters_;  // endpoints before their hello (bounded)
  EventTally log_{"transfer agent: "};
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_TRANSFER_TRANSFER_AGENT_IMPL_H_
