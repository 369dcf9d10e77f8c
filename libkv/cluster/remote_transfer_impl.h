// RemoteTransfers' inside (libkv/cluster/remote_transfer.h), shared by its
// files: remote_transfer.cc (endpoints, sends, the loop, the public calls)
// and remote_transfer_replies.cc (what agents answer, what to send next).
// Everything is touched under mu_ only, by the thread in a call.
#ifndef NANOKV_LIBKV_CLUSTER_REMOTE_TRANSFER_IMPL_H_
#define NANOKV_LIBKV_CLUSTER_REMOTE_TRANSFER_IMPL_H_

#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpu/pinned_pool.h"
#include "ipc/master/master_auth.h"
#include "ipc/ucx/transfer_wire.h"
#include "ipc/ucx/ucx.h"

#include "libkv/cluster/remote_transfer.h"

namespace nanokv::cluster {

// Staging buffers per backend (chunks of device memory in flight): 4 MiB
// each at the agents' default chunk, so 64 MiB of pinned memory at most.
inline constexpr size_t kStagingBuffers = 16;

class RemoteTransfers::Impl {
 public:
  using Clock = std::chrono::steady_clock;
  struct Conn;
  // One put or get of a call.
  struct Job {
    bool is_put = true;
    Conn* conn = nullptr;
    uint64_t request_id = 0;
    Status status;
    bool finished = false;
    int sends = 0;  // our sends not completed (a put's chunks read the caller's bytes)
    int recvs = 0;  // a get's chunks still landing in `out`
    // put
    const RemotePut* put = nullptr;
    uint64_t next = 0;
    int chunks_out = 0;  // chunks without a reply yet
    bool complete_seen = false;
    // get: into `out`, or the caller's memory (`into`)
    const RemoteGet* get = nullptr;
    const GetLanding* into = nullptr;
    bool asked = false;
    std::vector<std::byte> out;
    uint64_t total = 0;
    uint64_t received = 0;
    // Device memory on either side: staged through `pool`.
    gpu::Backend* backend() const {
      return put != nullptr ? put->bytes.backend : into != nullptr ? into->backend : nullptr;
    }
    bool staged() const { return put != nullptr ? put->bytes.device != nullptr : into != nullptr && into->device != nullptr; }
    bool Settled() const { return finished && sends == 0 && recvs == 0; }
  };
  struct Conn {
    Impl* impl = nullptr;
    std::string address;
    std::string node;
    ucp_ep_h ep = nullptr;
    bool hello_done = false;
    bool closing = false;
    void* close_request = nullptr;
    uint64_t chunk = 0;
    uint32_t depth = 1;
    uint32_t window = 0;  // chunks without a reply, all jobs
    std::string mode;
    int inflight = 0;     // sends and receives not completed
    std::string Name() const { return "node " + node + "'s transfer agent (" + address + ")"; }
  };
  struct Incoming {
    uint16_t id = 0;     // 0: `failed` reports its endpoint's error
    Conn* failed = nullptr;
    ucs_status_t error = UCS_OK;
    ucp_ep_h ep = nullptr;
    std::string header;
    void* descriptor = nullptr;
    std::vector<std::byte> eager;
    size_t length = 0;
  };
  struct Op {
    Conn* conn = nullptr;
    Job* job = nullptr;
    std::string header;
    size_t length = 0;
    std::byte* staging = nullptr;  // a staged chunk's buffer, given back on completion
    uint64_t offset = 0;           // where a staged get chunk goes in the device memory
  };

  // The hello carries a key made from the token, never the token itself.
  Impl(std::string token, std::chrono::milliseconds timeout)
      : data_path_key_(master::DataPathKey(token)), timeout_(timeout) {}
  ~Impl();  // closes every endpoint (flushing), at most 2 s

  // remote_transfer.cc
  // UCX loaded, the worker made and its handlers set (once).
  Status Ready();
  // The endpoint to `address`, made (and its hello sent) when there is none.
  Result<Conn*> Connect(const std::string& address, const std::string& node);
  // An active message (rendezvous when it has data); a failure fails `conn`.
  // `staging`: data's buffer, given back when the send ends.
  void Send(Conn* conn, Job* job, uint16_t id, std::string header, const void* data, size_t length,
            std::byte* staging = nullptr);
  // The conn's jobs fail with `why`; its endpoint closes (force: its
  // operations end at once, with an error).
  void Fail(Conn* conn, const Status& why);
  // Frees closed endpoints with nothing in flight.
  void SweepClosed();

  // Queued behind the messages that came before it: an agent that refuses
  // a hello answers, then closes, and the answer must be read first.
  static void OnPeerError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
    auto* conn = static_cast<Conn*>(arg);
    Incoming in;
    in.failed = conn;
    in.error = status;
    conn->impl->incoming_.push_back(std::move(in));
  }

  static void OnSent(void* request, ucs_status_t status, void* user_data);

  static void OnReceived(void* request, ucs_status_t status, size_t /*length*/, void* user_data);

  template <uint16_t Id>
  static ucs_status_t OnMessageOf(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
    auto* impl = static_cast<Impl*>(arg);
    const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0 || header_length > ucx::kMaxHeaderBytes) {
      return rendezvous ? UCS_ERR_REJECTED : UCS_OK;
    }
    Incoming in;
    in.id = Id;
    in.ep = param->reply_ep;
    in.header.assign(static_cast<const char*>(header), header_length);
    in.length = length;
    if (rendezvous) {
      in.descriptor = data;
    } else if (length > 0) {
      const auto* bytes = static_cast<const std::byte*>(data);
      in.eager.assign(bytes, bytes + length);
    }
    impl->incoming_.push_back(std::move(in));
    impl->last_progress_ = Clock::now();
    return rendezvous ? UCS_INPROGRESS : UCS_OK;
  }

  void Release(Incoming& in) {
    ucx::ReleaseAmData(*worker_, in.descriptor);
    in.descriptor = nullptr;
  }

  // remote_transfer_replies.cc
  Job* JobOf(uint64_t request_id, Conn* conn, bool is_put);
  // One queued message (or endpoint error): a reply, a chunk, a failure.
  void Handle(Incoming& in);
  // Starts what may start: gets asked, put chunks up to each node's depth.
  void Schedule();
  // A get chunk's bytes to their place: the job's vector or the caller's
  // host memory straight from UCX; device memory through a staging buffer
  // (queued in waiting_ while none is free).
  void Land(Incoming& in, Job* job, uint64_t offset);
  // Waiting chunks, while buffers are free. True if any went.
  bool LandWaiting();
  // The staging buffers for device memory of `backend`.
  gpu::PinnedPool& PoolOf(gpu::Backend* backend);

  // remote_transfer.cc: runs the call's jobs until each is settled.
  void Run();
  // A rendezvous receive acknowledges its sender after it completes, from
  // this worker's progress; a call returning first would leave the agent's
  // send, and the read lease it holds, waiting for this client's next call
  // (a remove right after a get was refused for that lease). Pushed out
  // here, at most timeout_.
  void FlushAcknowledgements();
  // Jobs of one call: registered, run, then forgotten.
  void Start(std::vector<Job>& jobs, const std::vector<std::pair<std::string, std::string>>& where);

  std::mutex mu_;
  const std::string data_path_key_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<ucx::Context> context_;
  std::unique_ptr<ucx::Worker> worker_;
  std::map<std::string, std::unique_ptr<Conn>> conns_;  // by data address
  std::list<std::unique_ptr<Conn>> closing_;
  std::deque<Incoming> incoming_;
  struct Waiting {
    Incoming in;
    Job* job = nullptr;
    uint64_t offset = 0;
  };
  std::deque<Waiting> waiting_;  // get chunks waiting for a staging buffer
  std::map<gpu::Backend*, std::unique_ptr<gpu::PinnedPool>> pools_;
  std::map<uint64_t, Job*> pending_;
  std::vector<Job*> jobs_;
  uint64_t next_request_ = 1;
  Clock::time_point last_progress_ = Clock::now();
};

}  // namespace nanokv::cluster

#endif  // NANOKV_LIBKV_CLUSTER_REMOTE_TRANSFER_IMPL_H_
