// ClusterClient's transfers with other nodes' agents (libkv/cluster/remote_transfer.h).
#include "libkv/cluster/remote_transfer.h"

#include <poll.h>

#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <new>

#include "ipc/ucx/transfer_wire.h"
#include "ipc/ucx/ucx.h"

namespace nanokv::cluster {
namespace {
using Clock = std::chrono::steady_clock;
namespace v1 = transfer::v1;
}  // namespace

class RemoteTransfers::Impl {
 public:
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
    // get
    const RemoteGet* get = nullptr;
    bool asked = false;
    std::vector<std::byte> out;
    uint64_t total = 0;
    uint64_t received = 0;
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
  };

  Impl(std::string token, std::chrono::milliseconds timeout) : token_(std::move(token)), timeout_(timeout) {}
  ~Impl() {
    std::lock_guard lock(mu_);
    if (!worker_) return;
    for (auto& [address, conn] : conns_) closing_.push_back(std::move(conn));
    conns_.clear();
    for (auto& conn : closing_) {
      if (!conn->closing) {
        conn->closing = true;
        conn->close_request = ucx::CloseEndpoint(*worker_, conn->ep, false);
      }
    }
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (!closing_.empty() && Clock::now() < deadline) {
      worker_->Progress();
      for (Incoming& in : incoming_) Release(in);
      incoming_.clear();
      SweepClosed();
    }
  }

  Status Ready() {
    if (worker_) return Status::OK();
    NANOKV_ASSIGN_OR_RETURN(context_, ucx::Context::Create());
    NANOKV_ASSIGN_OR_RETURN(worker_, ucx::Worker::Create(*context_));
    NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kHelloReply, &OnMessageOf<ucx::kHelloReply>, this));
    NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kPutReply, &OnMessageOf<ucx::kPutReply>, this));
    NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kGetData, &OnMessageOf<ucx::kGetData>, this));
    return Status::OK();
  }

  Result<Conn*> Connect(const std::string& address, const std::string& node) {
    auto found = conns_.find(address);
    if (found != conns_.end()) return found->second.get();
    NANOKV_ASSIGN_OR_RETURN(sockaddr_storage to, ucx::ParseHostPort(address, "the data address of node " + node));
    auto conn = std::make_unique<Conn>();
    conn->impl = this;
    conn->address = address;
    conn->node = node;
    NANOKV_ASSIGN_OR_RETURN(conn->ep, ucx::ConnectEndpoint(*worker_, to, &OnPeerError, conn.get()));
    Conn* raw = conn.get();
    conns_[address] = std::move(conn);
    v1::Hello hello;
    hello.set_protocol(ucx::kTransferProtocol);
    hello.set_token(token_);
    Send(raw, nullptr, ucx::kHello, hello.SerializeAsString(), nullptr, 0);
    return raw;
  }

  void Send(Conn* conn, Job* job, uint16_t id, std::string header, const void* data, size_t length) {
    auto* op = new Op{conn, job, std::move(header), length};
    ++conn->inflight;
    if (job != nullptr) ++job->sends;
    Status sent = ucx::SendAm(conn->ep, id, op->header, data, length, data != nullptr, &OnSent, op);
    if (!sent.ok()) {
      --conn->inflight;
      if (job != nullptr) --job->sends;
      delete op;
      Fail(conn, Status::Unavailable(conn->Name() + ": " + std::string(sent.message())));
    }
  }

  // The conn's jobs fail with `why`; its endpoint closes (force: its
  // operations end at once, with an error).
  void Fail(Conn* conn, const Status& why) {
    if (conn->closing) return;
    conn->closing = true;
    for (Job* job : jobs_) {
      if (job->conn == conn && !job->finished) {
        job->status = why;
        job->finished = true;
      }
    }
    conn->close_request = ucx::CloseEndpoint(*worker_, conn->ep, true);
    auto it = conns_.find(conn->address);
    if (it != conns_.end() && it->second.get() == conn) {
      closing_.push_back(std::move(it->second));
      conns_.erase(it);
    }
  }

  void SweepClosed() {
    for (auto it = closing_.begin(); it != closing_.end();) {
      if ((*it)->inflight == 0 && ucx::CloseDone((*it)->close_request)) {
        it = closing_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Queued behind the messages that came before it: an agent that refuses
  // a hello answers, then closes, and the answer must be read first.
  static void OnPeerError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
    auto* conn = static_cast<Conn*>(arg);
    Incoming in;
    in.failed = conn;
    in.error = status;
    conn->impl->incoming_.push_back(std::move(in));
  }

  static void OnSent(void* request, ucs_status_t status, void* user_data) {
    ucx::RequestFree(request);
    auto* op = static_cast<Op*>(user_data);
    --op->conn->inflight;
    op->conn->impl->last_progress_ = Clock::now();
    if (op->job != nullptr) {
      --op->job->sends;
      if (status != UCS_OK && !op->job->finished) {
        op->job->status = ucx::FromUcs(op->conn->Name() + ": a send", status);
        op->job->finished = true;
      }
    }
    delete op;
  }

  static void OnReceived(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
    ucx::RequestFree(request);
    auto* op = static_cast<Op*>(user_data);
    --op->conn->inflight;
    op->conn->impl->last_progress_ = Clock::now();
    Job* job = op->job;
    --job->recvs;
    if (status != UCS_OK) {
      if (!job->finished) job->status = ucx::FromUcs(op->conn->Name() + ": a chunk", status);
      job->finished = true;
    } else {
      job->received += op->length;
      if (job->received == job->total) job->finished = true;
    }
    delete op;
  }

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

  Job* JobOf(uint64_t request_id, Conn* conn, bool is_put) {
    auto it = pending_.find(request_id);
    if (it == pending_.end() || it->second->conn != conn || it->second->is_put != is_put) return nullptr;
    return it->second;
  }

  void Handle(Incoming& in) {
    if (in.failed != nullptr) {
      return Fail(in.failed, Status::Unavailable(in.failed->Name() + " failed: " + ucx::StatusString(in.error)));
    }
    Conn* conn = nullptr;
    for (auto& [address, c] : conns_) {
      if (c->ep == in.ep) conn = c.get();
    }
    v1::Reply reply;
    if (conn == nullptr || !ucx::DecodeHeader(in.header.data(), in.header.size(), "reply", &reply).ok()) {
      Release(in);
      if (conn != nullptr) Fail(conn, Status::ProtocolError(conn->Name() + ": a reply that does not parse"));
      return;
    }
    const Status status = ucx::StatusOf(reply, conn->Name());
    if (in.id == ucx::kHelloReply) {
      Release(in);
      if (!status.ok()) return Fail(conn, status);
      if (reply.chunk_bytes() < 4096 || reply.chunk_bytes() > ucx::kMaxChunkBytes || reply.depth() < 1 ||
          reply.depth() > ucx::kMaxDepth) {
        return Fail(conn, Status::ProtocolError(conn->Name() + ": a hello reply past the limits"));
      }
      conn->hello_done = true;
      conn->chunk = reply.chunk_bytes();
      conn->depth = reply.depth();
      conn->mode = reply.mode().substr(0, 16);
      return;
    }
    Job* job = JobOf(reply.request_id(), conn, in.id == ucx::kPutReply);
    if (job == nullptr) {  // a late answer to a job that ended: nothing waits for it
      Release(in);
      return;
    }
    if (in.id == ucx::kPutReply) {
      if (job->chunks_out > 0) {
        --job->chunks_out;
        --conn->window;
      }
      if (!status.ok() && !job->finished) {
        job->status = status;
        job->finished = true;
      }
      job->complete_seen = job->complete_seen || reply.complete();
      if (job->chunks_out == 0 && job->next == job->put->plan.bytes_total && !job->finished) {
        job->finished = true;  // every chunk answered: the object must be whole now
        if (!job->complete_seen) {
          job->status = Status::ProtocolError(conn->Name() + ": every chunk of '" + job->put->plan.key +
                                              "' landed but the object was not made READY");
        }
      }
      return;
    }
    // kGetData: an error, or a chunk of the object.
    if (!status.ok()) {
      Release(in);
      if (!job->finished) job->status = status;
      job->finished = true;
      return;
    }
    const uint64_t total = reply.bytes_total();
    const bool fits = total >= 1 && total <= ucx::kMaxObjectBytes && (job->total == 0 || job->total == total) &&
                      reply.offset() < total && in.length > 0 && in.length <= total - reply.offset();
    if (!fits || job->finished) {
      Release(in);
      if (!fits) Fail(conn, Status::ProtocolError(conn->Name() + ": a chunk outside the object"));
      return;
    }
    if (job->total == 0) {
      try {
        job->out.resize(total);
      } catch (const std::bad_alloc&) {
        Release(in);
        job->status = Status::OutOfMemory("get of '" + job->get->key + "': " + std::to_string(total) + " bytes");
        job->finished = true;
        return;
      }
      job->total = total;
    }
    std::byte* at = job->out.data() + reply.offset();
    if (in.descriptor == nullptr) {
      std::memcpy(at, in.eager.data(), in.length);
      job->received += in.length;
      if (job->received == job->total) job->finished = true;
      return;
    }
    auto* op = new Op{conn, job, "", in.length};
    ++conn->inflight;
    ++job->recvs;
    Status started = ucx::ReceiveAmData(*worker_, in.descriptor, at, in.length, &OnReceived, op);
    in.descriptor = nullptr;
    if (!started.ok()) {
      --conn->inflight;
      --job->recvs;
      delete op;
      Fail(conn, Status::Unavailable(conn->Name() + ": " + std::string(started.message())));
    }
  }

  // Starts what may start: gets asked, put chunks up to each node's depth.
  void Schedule() {
    for (Job* job : jobs_) {
      Conn* conn = job->conn;
      if (job->finished || conn == nullptr || conn->closing || !conn->hello_done) continue;
      if (!job->is_put) {
        if (job->asked) continue;
        job->asked = true;
        v1::Get get;
        get.set_request_id(job->request_id);
        get.set_key(job->get->key);
        Send(conn, job, ucx::kGet, get.SerializeAsString(), nullptr, 0);
        continue;
      }
      const uint64_t total = job->put->plan.bytes_total;
      while (!job->finished && !conn->closing && job->next < total && conn->window < conn->depth) {
        const uint64_t length = std::min<uint64_t>(conn->chunk, total - job->next);
        v1::Put put;
        put.set_request_id(job->request_id);
        put.set_key(job->put->plan.key);
        put.set_epoch(job->put->plan.epoch);
        put.set_offset(job->next);
        ++job->chunks_out;
        ++conn->window;
        const std::byte* data = job->put->bytes.data() + job->next;
        job->next += length;
        Send(conn, job, ucx::kPut, put.SerializeAsString(), data, length);
      }
    }
  }

  // Runs the call's jobs until each is settled.
  void Run() {
    last_progress_ = Clock::now();
    bool timed_out = false;
    for (;;) {
      while (!incoming_.empty()) {
        Incoming in = std::move(incoming_.front());
        incoming_.pop_front();
        Handle(in);
      }
      Schedule();
      SweepClosed();
      bool settled = true;
      for (Job* job : jobs_) settled = settled && job->Settled();
      if (settled) return;
      if (worker_->Progress() != 0 || !incoming_.empty()) continue;
      if (Clock::now() - last_progress_ > timeout_) {
        if (timed_out) return;  // force-closed and still not settled: give up waiting
        timed_out = true;
        const Status silent = Status::Unavailable("no progress within " + std::to_string(timeout_.count()) +
                                                  " ms (request_timeout_ms)");
        std::vector<Conn*> stuck;
        for (Job* job : jobs_) {
          if (!job->Settled() && job->conn != nullptr) stuck.push_back(job->conn);
        }
        for (Conn* conn : stuck) Fail(conn, Status::Unavailable(conn->Name() + ": " + std::string(silent.message())));
        last_progress_ = Clock::now();
        continue;
      }
      const ucs_status_t armed = worker_->Arm();
      if (armed == UCS_ERR_BUSY) continue;
      pollfd p{worker_->event_fd(), POLLIN, 0};
      poll(&p, 1, 100);
    }
  }

  // Jobs of one call: registered, run, then forgotten.
  void Start(std::vector<Job>& jobs, const std::vector<std::pair<std::string, std::string>>& where) {
    jobs_.clear();
    for (size_t i = 0; i < jobs.size(); ++i) {
      Job& job = jobs[i];
      job.request_id = next_request_++;
      jobs_.push_back(&job);
      pending_[job.request_id] = &job;
      auto conn = Connect(where[i].first, where[i].second);
      if (!conn.ok()) {
        job.status = conn.status();
        job.finished = true;
      } else {
        job.conn = *conn;
      }
    }
    Run();
    for (Job& job : jobs) {
      pending_.erase(job.request_id);
      if (!job.Settled()) job.status = Status::Internal("a transfer did not end after its endpoint closed");
    }
    jobs_.clear();
  }

  std::mutex mu_;
  const std::string token_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<ucx::Context> context_;
  std::unique_ptr<ucx::Worker> worker_;
  std::map<std::string, std::unique_ptr<Conn>> conns_;  // by data address
  std::list<std::unique_ptr<Conn>> closing_;
  std::deque<Incoming> incoming_;
  std::map<uint64_t, Job*> pending_;
  std::vector<Job*> jobs_;
  uint64_t next_request_ = 1;
  Clock::time_point last_progress_ = Clock::now();
};

RemoteTransfers::RemoteTransfers(std::string token, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::move(token), timeout)) {}
RemoteTransfers::~RemoteTransfers() = default;

std::vector<Status> RemoteTransfers::Put(const std::vector<RemotePut>& puts) {
  std::lock_guard lock(impl_->mu_);
  Status ready = impl_->Ready();
  if (!ready.ok()) return std::vector<Status>(puts.size(), ready);
  std::vector<Impl::Job> jobs(puts.size());
  std::vector<std::pair<std::string, std::string>> where;
  for (size_t i = 0; i < puts.size(); ++i) {
    jobs[i].put = &puts[i];
    where.emplace_back(puts[i].data_address, puts[i].node_id);
    if (puts[i].bytes.size() != puts[i].plan.bytes_total) {
      jobs[i].status = Status::InvalidArgument("put of '" + puts[i].plan.key + "': " +
                                               std::to_string(puts[i].bytes.size()) + " bytes for a plan of " +
                                               std::to_string(puts[i].plan.bytes_total));
      jobs[i].finished = true;
    }
  }
  impl_->Start(jobs, where);
  std::vector<Status> out;
  for (Impl::Job& job : jobs) out.push_back(job.status);
  return out;
}

std::vector<Result<std::vector<std::byte>>> RemoteTransfers::Get(const std::vector<RemoteGet>& gets) {
  std::lock_guard lock(impl_->mu_);
  Status ready = impl_->Ready();
  if (!ready.ok()) return std::vector<Result<std::vector<std::byte>>>(gets.size(), ready);
  std::vector<Impl::Job> jobs(gets.size());
  std::vector<std::pair<std::string, std::string>> where;
  for (size_t i = 0; i < gets.size(); ++i) {
    jobs[i].is_put = false;
    jobs[i].get = &gets[i];
    where.emplace_back(gets[i].data_address, gets[i].node_id);
  }
  impl_->Start(jobs, where);
  std::vector<Result<std::vector<std::byte>>> out;
  for (Impl::Job& job : jobs) {
    if (job.status.ok()) {
      out.push_back(std::move(job.out));
    } else {
      out.push_back(job.status);
    }
  }
  return out;
}

std::string RemoteTransfers::ModeOf(const std::string& data_address) {
  std::lock_guard lock(impl_->mu_);
  auto it = impl_->conns_.find(data_address);
  return it == impl_->conns_.end() ? "" : it->second->mode;
}

}  // namespace nanokv::cluster
