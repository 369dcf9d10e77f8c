// The transfer agent's put and get (daemon/transfer/transfer_agent.h): a
// remote write lands only in its plan's space, found in kvd's own index;
// a remote read copies out under a read lease.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "daemon/transfer/transfer_agent_impl.h"
#include "nanokv/object_header.h"

namespace nanokv::kvd {

Result<std::byte*> TransferAgent::Impl::PayloadOf(const ObjectPlan& plan) {
  NANOKV_ASSIGN_OR_RETURN(uintptr_t base, store_.StoreBase(plan.device));
  return reinterpret_cast<std::byte*>(base + plan.payload_offset);
}

void TransferAgent::Impl::HandlePut(Incoming& in) {
  Peer* peer = in.peer;
  transfer::v1::Put put;
  if (!ucx::DecodeHeader(in.header.data(), in.header.size(), "put", &put).ok() || !CheckKey(put.key()).ok() ||
      in.length == 0) {
    Release(in);
    return Close(peer, true, "a put header that does not parse, names no valid key or carries no bytes");
  }
  auto plan = store_.WritingPlan(put.key(), put.epoch());
  if (!plan.ok()) {
    Release(in);
    return Reply(peer, ucx::kPutReply, ucx::ReplyOf(put.request_id(), plan.status()));
  }
  Status inside = ucx::CheckPutChunk(put, in.length, plan->bytes_total);
  if (!inside.ok()) {
    Release(in);
    peer->close_after_reply = true;  // a peer writing past its plan is not trusted further
    return Reply(peer, ucx::kPutReply, ucx::ReplyOf(put.request_id(), inside));
  }
  if (in.descriptor == nullptr) return Land(peer, put, in.eager.data(), in.length);
  std::byte* buffer = TakeStaging();
  if (buffer == nullptr) {
    if (peer->queued_puts >= kMaxQueuedPutsPerPeer) {
      Release(in);
      return Close(peer, true, "more than " + std::to_string(kMaxQueuedPutsPerPeer) + " put chunks queued");
    }
    ++peer->queued_puts;
    waiting_puts_.push_back(std::move(in));  // Sweep hands it a buffer when one is back
    return;
  }
  auto* op = new Op;
  op->impl = this;
  op->peer = peer;
  op->staging = buffer;
  op->put = std::move(put);
  op->length = in.length;
  ++peer->outstanding;
  Status received = ucx::ReceiveAmData(*worker_, in.descriptor, buffer, in.length, &Impl::OnPutReceived, op);
  in.descriptor = nullptr;
  if (!received.ok()) {
    --peer->outstanding;
    GiveStaging(buffer);
    delete op;
    Close(peer, true, "a chunk could not be received: " + received.ToString());
  }
}

void TransferAgent::Impl::OnPutReceived(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
  ucx::RequestFree(request);
  auto* op = static_cast<Op*>(user_data);
  Impl* impl = op->impl;
  --op->peer->outstanding;
  op->peer->last_heard = Clock::now();
  if (status == UCS_OK && !op->peer->closing) impl->Land(op->peer, op->put, op->staging, op->length);
  impl->GiveStaging(op->staging);
  delete op;
}

void TransferAgent::Impl::Land(Peer* peer, const transfer::v1::Put& put, const std::byte* bytes, size_t length) {
  // Looked up again: the write may have been revoked or reclaimed while its
  // bytes moved. (As for a local producer's copies, a reclaim between this
  // look-up and the copy is not guarded; write_timeout makes it a stalled
  // write's.)
  auto plan = store_.WritingPlan(put.key(), put.epoch());
  Status landed = plan.status();
  auto& write = writes_[{put.key(), put.epoch()}];
  write.last = Clock::now();
  std::byte* payload = nullptr;
  if (landed.ok()) {
    auto at = PayloadOf(*plan);
    landed = at.status();
    if (at.ok()) payload = *at;
  }
  auto* header = payload == nullptr ? nullptr
                                    : reinterpret_cast<ObjectHeader*>(payload - plan->payload_offset +
                                                                      plan->header_offset);
  if (landed.ok() && !write.begun) {
    // WRITING before the first byte, as a producer's copies do.
    const ObjectHeader writing = WritingHeaderOf(*plan, SteadyNowNs());
    landed = backend_.Copy(header, &writing, sizeof(writing), gpu::CopyKind::kHostToDevice);
    write.begun = landed.ok();
  }
  if (landed.ok()) landed = backend_.Copy(payload + put.offset(), bytes, length, gpu::CopyKind::kHostToDevice);
  bool complete = false;
  if (landed.ok()) {
    // The ranges landed, merged: whole when one range covers the object.
    uint64_t begin = put.offset(), end = put.offset() + length;
    auto it = write.have.upper_bound(begin);
    if (it != write.have.begin() && std::prev(it)->second >= begin) {
      --it;
      begin = it->first;
      end = std::max(end, it->second);
      it = write.have.erase(it);
    }
    while (it != write.have.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = write.have.erase(it);
    }
    write.have[begin] = end;
    complete = write.have.size() == 1 && begin == 0 && end == plan->bytes_total;
  }
  if (complete) {
    // READY after the last byte (one aligned 4-byte copy, as PublishByCopy).
    const auto ready = static_cast<uint32_t>(ObjectState::kReady);
    landed = backend_.Copy(&header->state, &ready, sizeof(ready), gpu::CopyKind::kHostToDevice);
    writes_.erase({put.key(), put.epoch()});
  }
  transfer::v1::Reply reply = ucx::ReplyOf(put.request_id(), landed);
  reply.set_complete(complete && landed.ok());
  Reply(peer, ucx::kPutReply, reply);
}

void TransferAgent::Impl::HandleGet(Incoming& in) {
  Peer* peer = in.peer;
  transfer::v1::Get request;
  if (!ucx::DecodeHeader(in.header.data(), in.header.size(), "get", &request).ok() ||
      !CheckKey(request.key()).ok()) {
    return Close(peer, true, "a get header that does not parse or names no valid key");
  }
  if (peer->gets >= kMaxGetsPerPeer) {
    return Reply(peer, ucx::kGetData,
                 ucx::ReplyOf(request.request_id(),
                              Status::ResourceExhausted("transfer: " + std::to_string(kMaxGetsPerPeer) +
                                                        " gets already in flight on this endpoint")));
  }
  const uint64_t now = SteadyNowNs();
  auto lease = store_.AcquireLease(request.key(), ObjectIndex::kOperator, now);
  if (!lease.ok()) return Reply(peer, ucx::kGetData, ucx::ReplyOf(request.request_id(), lease.status()));
  auto plan = store_.GetLocation(request.key(), now);
  if (plan.ok() && plan->tier != ObjectTier::kGpu) {
    // The agent reads the store only; the get queued the object's promotion.
    plan = Status::Unavailable("object '" + request.key() +
                               "' is in the host tier: kvd is moving it back into "
                               "the store; ask again");
  }
  Result<std::byte*> payload = plan.ok() ? PayloadOf(*plan) : Result<std::byte*>(plan.status());
  if (!payload.ok()) {
    (void)store_.ReleaseLease(request.key(), lease->id, now, ObjectIndex::kOperator);
    return Reply(peer, ucx::kGetData, ucx::ReplyOf(request.request_id(), payload.status()));
  }
  auto get = std::make_unique<GetTransfer>();
  get->peer = peer;
  get->request_id = request.request_id();
  get->key = request.key();
  get->lease_id = lease->id;
  get->plan = *plan;
  get->source = *payload;
  GetTransfer* raw = get.get();
  ++peer->gets;
  gets_.push_back(std::move(get));
  Pump(raw);
}

void TransferAgent::Impl::Pump(GetTransfer* get) {
  const uint64_t total = get->plan.bytes_total;
  while (!get->failed && !get->peer->closing && get->inflight < static_cast<int>(options_.config.depth) &&
         get->next < total) {
    std::byte* buffer = TakeStaging();
    if (buffer == nullptr) {
      get->waiting = true;  // Sweep pumps again when a buffer is back
      return;
    }
    const size_t length = std::min<uint64_t>(options_.config.chunk_bytes, total - get->next);
    Status copied = backend_.Copy(buffer, get->source + get->next, length, gpu::CopyKind::kDeviceToHost);
    if (!copied.ok()) {
      GiveStaging(buffer);
      get->failed = true;
      return Reply(get->peer, ucx::kGetData, ucx::ReplyOf(get->request_id, copied));
    }
    transfer::v1::Reply chunk = ucx::ReplyOf(get->request_id, Status::OK());
    chunk.set_bytes_total(total);
    chunk.set_offset(get->next);
    auto* op = new Op;
    op->impl = this;
    op->peer = get->peer;
    op->header = chunk.SerializeAsString();
    op->staging = buffer;
    op->get = get;
    op->length = length;
    ++get->peer->outstanding;
    ++get->inflight;
    get->next += length;
    Status sent = ucx::SendAm(get->peer->ep, ucx::kGetData, op->header, buffer, length, true, &Impl::OnGetSent, op);
    if (!sent.ok()) {
      --get->peer->outstanding;
      --get->inflight;
      GiveStaging(buffer);
      delete op;
      get->failed = true;
      return Close(get->peer, true, "a chunk could not be sent: " + sent.ToString());
    }
  }
}

void TransferAgent::Impl::OnGetSent(void* request, ucs_status_t status, void* user_data) {
  ucx::RequestFree(request);
  auto* op = static_cast<Op*>(user_data);
  --op->peer->outstanding;
  op->peer->last_heard = Clock::now();
  --op->get->inflight;
  if (status != UCS_OK) op->get->failed = true;
  op->get->waiting = true;  // the next chunk goes from the loop (Sweep)
  op->impl->GiveStaging(op->staging);
  delete op;
}

void TransferAgent::Impl::RenewLease(GetTransfer* get) {
  const uint64_t now = SteadyNowNs();
  auto fresh = store_.AcquireLease(get->key, ObjectIndex::kOperator, now);
  if (!fresh.ok()) {
    // The old lease still holds for the other half; the peer hears why.
    get->failed = true;
    return Reply(get->peer, ucx::kGetData, ucx::ReplyOf(get->request_id, fresh.status()));
  }
  (void)store_.ReleaseLease(get->key, get->lease_id, now, ObjectIndex::kOperator);
  get->lease_id = fresh->id;
  get->leased_at = Clock::now();
}

void TransferAgent::Impl::FinishGet(GetTransfer* get) {
  if (get->lease_id == 0) return;
  --get->peer->gets;
  Status released = store_.ReleaseLease(get->key, get->lease_id, SteadyNowNs(), ObjectIndex::kOperator);
  if (!released.ok()) spdlog::debug("transfer agent: lease of '{}': {}", get->key, released.ToString());
  get->lease_id = 0;
}

}  // namespace nanokv::kvd
