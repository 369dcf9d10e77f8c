// What other nodes' agents answer a ClusterClient, and what it sends next
// (libkv/cluster/remote_transfer_impl.h): replies checked as a hostile
// peer's, chunks landed in the result, put chunks scheduled by depth.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "libkv/cluster/remote_transfer_impl.h"

namespace nanokv::cluster {
namespace v1 = transfer::v1;

namespace {
// `out` sized to `bytes` for a get's chunks. Past glibc's mmap threshold
// (32 MiB at most) every allocation is fresh memory, and faulting it in 4
// KiB pages is most of a large get (115 ms of a 256 MiB one here, against
// 39 with huge pages, 2026-11-26): ask for huge pages before the touch.
Status SizeForBulk(std::vector<std::byte>& out, uint64_t bytes) {
  try {
    out.reserve(bytes);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(std::to_string(bytes) + " bytes");
  }
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<uintptr_t>(out.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<uintptr_t>(out.data()) + bytes) & ~(kHuge - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint
  out.resize(bytes);
  return Status::OK();
}
}  // namespace

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
    Status within = ucx::CheckHelloReply(reply);
    if (!within.ok()) return Fail(conn, Status::ProtocolError(conn->Name() + ": " + std::string(within.message())));
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
  Status fits = ucx::CheckGetChunk(reply, in.length, job->total);
  if (!fits.ok() || job->finished) {
    Release(in);
    if (!fits.ok()) Fail(conn, Status::ProtocolError(conn->Name() + ": " + std::string(fits.message())));
    return;
  }
  if (job->total == 0) {
    if (job->into != nullptr && total > job->into->capacity) {
      Release(in);
      job->status = NoRoom(job->get->key, total, job->into->capacity);
      job->finished = true;
      return;
    }
    if (job->into == nullptr) {
      Status sized = SizeForBulk(job->out, total);
      if (!sized.ok()) {
        Release(in);
        job->status = Status::OutOfMemory("get of '" + job->get->key + "': " + std::string(sized.message()));
        job->finished = true;
        return;
      }
    }
    job->total = total;
  }
  Land(in, job, reply.offset());
}

void RemoteTransfers::Impl::Land(Incoming& in, Job* job, uint64_t offset) {
  Conn* conn = job->conn;
  std::byte* at = nullptr;
  if (!job->staged()) {
    at = (job->into != nullptr ? job->into->host : job->out.data()) + offset;
  } else if (in.descriptor == nullptr) {  // a short chunk, eager: straight from UCX's copy of it
    Status copied = job->backend()->Copy(static_cast<std::byte*>(job->into->device) + offset, in.eager.data(),
                                         in.length, gpu::CopyKind::kHostToDevice);
    if (!copied.ok()) {
      job->status = copied;
      job->finished = true;
      return;
    }
  } else {
    at = PoolOf(job->backend()).Take(in.length);
    if (at == nullptr) {  // every buffer is in flight: one comes back with a receive's completion
      waiting_.push_back({std::move(in), job, offset});
      return;
    }
  }
  if (in.descriptor == nullptr) {
    if (at != nullptr) std::memcpy(at, in.eager.data(), in.length);
    job->received += in.length;
    if (job->received == job->total) job->finished = true;
    return;
  }
  auto* op = new Op{conn, job, "", in.length};
  if (job->staged()) {
    op->staging = at;
    op->offset = offset;
  }
  ++conn->inflight;
  ++job->recvs;
  Status started = ucx::ReceiveAmData(*worker_, in.descriptor, at, in.length, &OnReceived, op);
  in.descriptor = nullptr;
  if (!started.ok()) {
    --conn->inflight;
    --job->recvs;
    if (op->staging != nullptr) PoolOf(job->backend()).Give(op->staging);
    delete op;
    Fail(conn, Status::Unavailable(conn->Name() + ": " + std::string(started.message())));
  }
}

bool RemoteTransfers::Impl::LandWaiting() {
  bool did = false;
  while (!waiting_.empty()) {
    Waiting& first = waiting_.front();
    if (!first.job->finished && !PoolOf(first.job->backend()).CanTake()) break;
    Waiting next = std::move(first);
    waiting_.pop_front();
    if (next.job->finished) {
      Release(next.in);
    } else {
      Land(next.in, next.job, next.offset);
    }
    did = true;
  }
  return did;
}

Status NoRoom(std::string_view key, uint64_t size, uint64_t capacity) {
  return Status::InvalidArgument("get of '" + std::string(key.substr(0, 80)) + "': " + std::to_string(size) +
                                 " bytes for " + std::to_string(capacity) + " of room");
}

gpu::PinnedPool& RemoteTransfers::Impl::PoolOf(gpu::Backend* backend) {
  auto& pool = pools_[backend];
  if (pool == nullptr) pool = std::make_unique<gpu::PinnedPool>(*backend, kStagingBuffers, "cluster client");
  return *pool;
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
      const std::byte* data = nullptr;
      std::byte* staging = nullptr;
      if (!job->staged()) {
        data = job->put->bytes.host.data() + job->next;
      } else {
        staging = PoolOf(job->backend()).Take(length);
        if (staging == nullptr) break;  // one comes back with a send's completion
        Status copied = job->backend()->Copy(staging, static_cast<const std::byte*>(job->put->bytes.device) + job->next,
                                             length, gpu::CopyKind::kDeviceToHost);
        if (!copied.ok()) {
          PoolOf(job->backend()).Give(staging);
          job->status = copied;
          job->finished = true;
          break;
        }
        data = staging;
      }
      ++job->chunks_out;
      ++conn->window;
      job->next += length;
      Send(conn, job, ucx::kPut, put.SerializeAsString(), data, length, staging);
    }
  }
}

}  // namespace nanokv::cluster
