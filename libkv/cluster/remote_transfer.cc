// ClusterClient's transfers with other nodes' agents (libkv/cluster/remote_transfer.h):
// endpoints, sends, the loop and the public calls; the answers are
// remote_transfer_replies.cc's.
#include <poll.h>

#include <algorithm>

#include "libkv/cluster/remote_transfer_impl.h"

namespace nanokv::cluster {
namespace v1 = transfer::v1;

RemoteTransfers::Impl::~Impl() {
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

Status RemoteTransfers::Impl::Ready() {
  if (worker_) return Status::OK();
  NANOKV_ASSIGN_OR_RETURN(context_, ucx::Context::Create());
  NANOKV_ASSIGN_OR_RETURN(worker_, ucx::Worker::Create(*context_));
  NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kHelloReply, &OnMessageOf<ucx::kHelloReply>, this));
  NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kPutReply, &OnMessageOf<ucx::kPutReply>, this));
  NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kGetData, &OnMessageOf<ucx::kGetData>, this));
  return Status::OK();
}

Result<RemoteTransfers::Impl::Conn*> RemoteTransfers::Impl::Connect(const std::string& address, const std::string& node) {
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
  transfer::v1::Hello hello;
  hello.set_protocol(ucx::kTransferProtocol);
  hello.set_token(data_path_key_);
  Send(raw, nullptr, ucx::kHello, hello.SerializeAsString(), nullptr, 0);
  return raw;
}

void RemoteTransfers::Impl::Send(Conn* conn, Job* job, uint16_t id, std::string header, const void* data, size_t length,
                                 std::byte* staging) {
  auto* op = new Op{conn, job, std::move(header), length, staging};
  ++conn->inflight;
  if (job != nullptr) ++job->sends;
  Status sent = ucx::SendAm(conn->ep, id, op->header, data, length, data != nullptr, &OnSent, op);
  if (!sent.ok()) {
    --conn->inflight;
    if (job != nullptr) --job->sends;
    if (staging != nullptr) PoolOf(job->backend()).Give(staging);
    delete op;
    Fail(conn, Status::Unavailable(conn->Name() + ": " + std::string(sent.message())));
  }
}

void RemoteTransfers::Impl::Fail(Conn* conn, const Status& why) {
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

void RemoteTransfers::Impl::SweepClosed() {
  for (auto it = closing_.begin(); it != closing_.end();) {
    if ((*it)->inflight == 0 && ucx::RequestDone((*it)->close_request)) {
      it = closing_.erase(it);
    } else {
      ++it;
    }
  }
}

void RemoteTransfers::Impl::OnSent(void* request, ucs_status_t status, void* user_data) {
  ucx::RequestFree(request);
  auto* op = static_cast<Op*>(user_data);
  --op->conn->inflight;
  op->conn->impl->last_progress_ = Clock::now();
  if (op->job != nullptr) {
    if (op->staging != nullptr) op->conn->impl->PoolOf(op->job->backend()).Give(op->staging);
    --op->job->sends;
    if (status != UCS_OK && !op->job->finished) {
      op->job->status = ucx::FromUcs(op->conn->Name() + ": a send", status);
      op->job->finished = true;
    }
  }
  delete op;
}

void RemoteTransfers::Impl::OnReceived(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
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
    if (op->staging != nullptr && !job->finished) {
      // A staged chunk: on to the device, while the others still move.
      Status copied = job->backend()->Copy(static_cast<std::byte*>(job->into->device) + op->offset, op->staging,
                                           op->length, gpu::CopyKind::kHostToDevice);
      if (!copied.ok()) {
        job->status = copied;
        job->finished = true;
      }
    }
    job->received += op->length;
    if (job->received == job->total) job->finished = true;
  }
  if (op->staging != nullptr) op->conn->impl->PoolOf(job->backend()).Give(op->staging);
  delete op;
}

void RemoteTransfers::Impl::Run() {
  last_progress_ = Clock::now();
  bool timed_out = false;
  for (;;) {
    while (!incoming_.empty()) {
      Incoming in = std::move(incoming_.front());
      incoming_.pop_front();
      Handle(in);
    }
    LandWaiting();
    Schedule();
    SweepClosed();
    bool settled = true;
    for (Job* job : jobs_) settled = settled && job->Settled();
    if (settled) {
      for (Waiting& left : waiting_) Release(left.in);  // chunks of jobs that failed
      waiting_.clear();
      FlushAcknowledgements();
      return;
    }
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

void RemoteTransfers::Impl::FlushAcknowledgements() {
  // The live endpoints this call's gets used (a job's conn may be closed and
  // freed by now: only compared, never followed).
  std::vector<void*> flushing;
  for (auto& [address, conn] : conns_) {
    const bool used = std::any_of(jobs_.begin(), jobs_.end(),
                                  [&](const Job* job) { return !job->is_put && job->conn == conn.get(); });
    if (!used || conn->closing) continue;
    if (void* request = ucx::FlushEndpoint(conn->ep)) flushing.push_back(request);
  }
  const auto deadline = Clock::now() + timeout_;
  while (!flushing.empty() && Clock::now() < deadline) {
    worker_->Progress();
    std::erase_if(flushing, [](void* request) { return ucx::RequestDone(request); });
  }
  for (void* request : flushing) ucx::RequestFree(request);  // UCX frees it when it ends
}

void RemoteTransfers::Impl::Start(std::vector<Job>& jobs, const std::vector<std::pair<std::string, std::string>>& where) {
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
    if (puts[i].bytes.device == nullptr && puts[i].bytes.host.size() != puts[i].plan.bytes_total) {
      jobs[i].status = Status::InvalidArgument("put of '" + puts[i].plan.key + "': " +
                                               std::to_string(puts[i].bytes.host.size()) + " bytes for a plan of " +
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

std::vector<Result<uint64_t>> RemoteTransfers::GetInto(const std::vector<RemoteGetInto>& gets) {
  std::lock_guard lock(impl_->mu_);
  Status ready = impl_->Ready();
  if (!ready.ok()) return std::vector<Result<uint64_t>>(gets.size(), ready);
  std::vector<Impl::Job> jobs(gets.size());
  std::vector<std::pair<std::string, std::string>> where;
  for (size_t i = 0; i < gets.size(); ++i) {
    jobs[i].is_put = false;
    jobs[i].get = &gets[i].from;
    jobs[i].into = &gets[i].to;
    where.emplace_back(gets[i].from.data_address, gets[i].from.node_id);
    const bool host = gets[i].to.host != nullptr, device = gets[i].to.device != nullptr && gets[i].to.backend != nullptr;
    if (host == device) {
      jobs[i].status = Status::InvalidArgument("get of '" + gets[i].from.key +
                                               "': give host memory or device memory with its backend");
      jobs[i].finished = true;
    }
  }
  impl_->Start(jobs, where);
  std::vector<Result<uint64_t>> out;
  for (Impl::Job& job : jobs) {
    if (job.status.ok()) {
      out.push_back(job.total);
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
