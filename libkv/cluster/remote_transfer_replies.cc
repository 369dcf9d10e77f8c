// What other nodes' agents answer a ClusterClient, and what it sends next
// (libkv/cluster/remote_transfer_impl.h): replies checked as a hostile
// peer's, chunks landed in the result, put chunks scheduled by depth.
#include <cstring>
#include <new>

#include "libkv/cluster/remote_transfer_impl.h"

namespace nanokv::cluster {
namespace v1 = transfer::v1;

RemoteTransfers::Impl::Job* RemoteTransfers::Impl::JobOf(uint64_t request_id, Conn* conn, bool is_put) {
  auto it = pending_.find(request_id);
  if (it == pending_.end() || it->second->conn != conn || it->second->is_put != is_put) return nullptr;
  return it->second;
}

void RemoteTransfers::Impl::Handle(Incoming& in) {
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

void RemoteTransfers::Impl::Schedule() {
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

}  // namespace nanokv::cluster
