#include "ipc/etcd/etcd_client.h"

#include <algorithm>
#include <thread>

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include "ipc/etcd/etcd_decode.h"
#include "ipc/etcd/etcd_stream.h"

namespace nanokv::etcd {
namespace pb = etcdserverpb;

class KeepAliveStream : public BidiStream<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse> {};

namespace {

std::string LeaseName(int64_t id) {
  char text[32];
  std::snprintf(text, sizeof(text), "%llx", static_cast<unsigned long long>(id));
  return text;
}

// A unary call on endpoint `endpoint`, by `try_deadline`, as our Status.
template <typename Reply, typename Call>
Status CallOnce(Endpoint& endpoint, std::string_view what, Deadline try_deadline, Reply* reply, Call&& call) {
  grpc::ClientContext context;
  context.set_deadline(ToSystemDeadline(try_deadline));
  reply->Clear();
  return FromGrpc(call(endpoint, &context, reply), endpoint.name, what);
}

}  // namespace

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

EtcdClient::EtcdClient(std::vector<std::unique_ptr<Endpoint>> endpoints) : endpoints_(std::move(endpoints)) {
  for (const auto& endpoint : endpoints_) names_.push_back(endpoint->name);
}

EtcdClient::~EtcdClient() = default;

Result<std::unique_ptr<EtcdClient>> EtcdClient::Connect(EtcdOptions options) {
  NANOKV_ASSIGN_OR_RETURN(auto endpoints, OpenEndpoints(options));
  std::unique_ptr<EtcdClient> client(new EtcdClient(std::move(endpoints)));
  if (options.dial_timeout.count() == 0) return client;
  // Every channel starts connecting now; the first to be ready is current.
  Deadline deadline = DeadlineIn(options.dial_timeout);
  while (true) {
    for (size_t i = 0; i < client->endpoints_.size(); ++i) {
      if (client->endpoints_[i]->channel->GetState(true) == GRPC_CHANNEL_READY) {
        client->current_.store(i);
        return client;
      }
    }
    Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    // Woken by the first channel's change of state, or after a short slice
    // to look at the others.
    auto& first = *client->endpoints_.front()->channel;
    first.WaitForStateChange(first.GetState(false),
                             ToSystemDeadline(std::min(deadline, now + std::chrono::milliseconds(20))));
  }
  std::string names;
  for (const std::string& name : client->names_) names += (names.empty() ? "" : ", ") + name;
  return Status::Unavailable("etcd: none of " + names + " accepted a connection within " +
                             std::to_string(options.dial_timeout.count()) + " ms");
}

Status EtcdClient::Failover(std::string_view what, Deadline deadline,
                            const std::function<Status(size_t index, Deadline try_deadline)>& attempt) {
  const size_t count = endpoints_.size();
  const size_t first = current_.load(std::memory_order_relaxed);
  Status last;
  auto pause = std::chrono::milliseconds(50);
  for (;;) {
    for (size_t i = 0; i < count; ++i) {
      Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      const size_t index = (first + i) % count;
      Deadline try_deadline = now + (deadline - now) / static_cast<int64_t>(count - i);
      Status status = attempt(index, try_deadline);
      if (status.code() != Code::kUnavailable) {
        // An answer, even an error: this endpoint is alive.
        current_.store(index, std::memory_order_relaxed);
        return status;
      }
      if (count > 1) spdlog::debug("etcd: {} failed at {}, trying the next endpoint: {}", what,
                                   endpoints_[index]->name, status.ToString());
      last = std::move(status);
    }
    // Every member failed at once, with time left: a cluster between two
    // raft leaders ("leader changed") or with a member just killed answers
    // again within an election timeout, so go round again after a pause.
    // One endpoint has no one to wait for: its own error is the answer.
    if (count == 1 || Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(400));
  }
  if (last.ok()) return Status::Unavailable("etcd: " + std::string(what) + ": the deadline had passed");
  if (count == 1) return last;
  return Status::Unavailable("etcd: " + std::string(what) + ": no endpoint answered by the deadline (last: " +
                             std::string(last.message()) + ")");
}

Result<RangeResult> EtcdClient::Range(const RangeSpec& spec, Deadline deadline) {
  pb::RangeRequest request;
  EncodeRange(spec, &request);
  pb::RangeResponse reply;
  NANOKV_RETURN_IF_ERROR(Failover("Range", deadline, [&](size_t index, Deadline try_deadline) {
    return CallOnce(*endpoints_[index], "Range", try_deadline, &reply,
                    [&](Endpoint& e, grpc::ClientContext* c, pb::RangeResponse* r) {
                      return e.kv->Range(c, request, r);
                    });
  }));
  return DecodeRange(reply, "Range");
}

Result<std::optional<KeyValue>> EtcdClient::Get(std::string key, Deadline deadline) {
  NANOKV_ASSIGN_OR_RETURN(RangeResult range, Range(RangeSpec::Key(key), deadline));
  if (range.kvs.empty()) return std::optional<KeyValue>();
  if (range.kvs.size() > 1 || range.kvs[0].key != key) {
    return Status::ProtocolError("etcd: Range of one key '" + key + "' answered another or several");
  }
  return std::optional<KeyValue>(std::move(range.kvs[0]));
}

Result<int64_t> EtcdClient::Put(std::string key, std::string value, int64_t lease, Deadline deadline) {
  pb::PutRequest request;
  request.set_key(std::move(key));
  request.set_value(std::move(value));
  request.set_lease(lease);
  pb::PutResponse reply;
  NANOKV_RETURN_IF_ERROR(Failover("Put", deadline, [&](size_t index, Deadline try_deadline) {
    return CallOnce(*endpoints_[index], "Put", try_deadline, &reply,
                    [&](Endpoint& e, grpc::ClientContext* c, pb::PutResponse* r) { return e.kv->Put(c, request, r); });
  }));
  return DecodeHeader(reply.has_header(), reply.header(), "Put");
}

Result<int64_t> EtcdClient::Delete(std::string key, std::string range_end, Deadline deadline) {
  pb::DeleteRangeRequest request;
  request.set_key(std::move(key));
  request.set_range_end(std::move(range_end));
  pb::DeleteRangeResponse reply;
  NANOKV_RETURN_IF_ERROR(Failover("DeleteRange", deadline, [&](size_t index, Deadline try_deadline) {
    return CallOnce(*endpoints_[index], "DeleteRange", try_deadline, &reply,
                    [&](Endpoint& e, grpc::ClientContext* c, pb::DeleteRangeResponse* r) {
                      return e.kv->DeleteRange(c, request, r);
                    });
  }));
  NANOKV_RETURN_IF_ERROR(DecodeHeader(reply.has_header(), reply.header(), "DeleteRange").status());
  if (reply.deleted() < 0) return Status::ProtocolError("etcd: DeleteRange reply: a negative count");
  return reply.deleted();
}

Result<TxnResult> EtcdClient::Txn(const TxnSpec& spec, Deadline deadline) {
  pb::TxnRequest request;
  EncodeTxn(spec, &request);
  pb::TxnResponse reply;
  NANOKV_RETURN_IF_ERROR(Failover("Txn", deadline, [&](size_t index, Deadline try_deadline) {
    return CallOnce(*endpoints_[index], "Txn", try_deadline, &reply,
                    [&](Endpoint& e, grpc::ClientContext* c, pb::TxnResponse* r) { return e.kv->Txn(c, request, r); });
  }));
  return DecodeTxn(spec, reply);
}

Result<LeaseGrant> EtcdClient::GrantLease(std::chrono::seconds ttl, Deadline deadline) {
  if (ttl.count() <= 0) return Status::InvalidArgument("etcd: a lease's TTL must be at least 1 s");
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl.count());
  pb::LeaseGrantResponse reply;
  NANOKV_RETURN_IF_ERROR(Failover("LeaseGrant", deadline, [&](size_t index, Deadline try_deadline) {
    return CallOnce(*endpoints_[index], "LeaseGrant", try_deadline, &reply,
                    [&](Endpoint& e, grpc::ClientContext* c, pb::LeaseGrantResponse* r) {
                      return e.lease->LeaseGrant(c, request, r);
                    });
  }));
  NANOKV_RETURN_IF_ERROR(DecodeHeader(reply.has_header(), reply.header(), "LeaseGrant").status());
  if (!reply.error().empty()) return Status::Internal("etcd: LeaseGrant: " + reply.error().substr(0, 256));
  if (reply.id() == 0 || reply.ttl() <= 0) {
    return Status::ProtocolError("etcd: LeaseGrant reply: lease " + std::to_string(reply.id()) + " with TTL " +
                                 std::to_string(reply.ttl()));
  }
  return LeaseGrant{reply.id(), std::chrono::seconds(reply.ttl())};
}

Status EtcdClient::RevokeLease(int64_t id, Deadline deadline) {
  pb::LeaseRevokeRequest request;
  request.set_id(id);
  pb::LeaseRevokeResponse reply;
  NANOKV_RETURN_IF_ERROR(Failover("LeaseRevoke", deadline, [&](size_t index, Deadline try_deadline) {
    return CallOnce(*endpoints_[index], "LeaseRevoke " + LeaseName(id), try_deadline, &reply,
                    [&](Endpoint& e, grpc::ClientContext* c, pb::LeaseRevokeResponse* r) {
                      return e.lease->LeaseRevoke(c, request, r);
                    });
  }));
  return DecodeHeader(reply.has_header(), reply.header(), "LeaseRevoke").status();
}

Result<LeaseTimeToLive> EtcdClient::TimeToLive(int64_t id, bool with_keys, Deadline deadline) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(id);
  request.set_keys(with_keys);
  pb::LeaseTimeToLiveResponse reply;
  NANOKV_RETURN_IF_ERROR(Failover("LeaseTimeToLive", deadline, [&](size_t index, Deadline try_deadline) {
    return CallOnce(*endpoints_[index], "LeaseTimeToLive", try_deadline, &reply,
                    [&](Endpoint& e, grpc::ClientContext* c, pb::LeaseTimeToLiveResponse* r) {
                      return e.lease->LeaseTimeToLive(c, request, r);
                    });
  }));
  NANOKV_RETURN_IF_ERROR(DecodeHeader(reply.has_header(), reply.header(), "LeaseTimeToLive").status());
  if (reply.id() != id) {
    return Status::ProtocolError("etcd: LeaseTimeToLive of lease " + LeaseName(id) + " answered another");
  }
  LeaseTimeToLive out{id, std::chrono::seconds(reply.ttl()), std::chrono::seconds(reply.grantedttl()), {}};
  for (const std::string& key : reply.keys()) out.keys.push_back(key);
  return out;
}

Result<std::chrono::seconds> EtcdClient::KeepAliveOnce(int64_t id, Deadline deadline) {
  {
    std::unique_lock<std::mutex> lock(keep_alive_mu_);
    if (!keep_alive_free_.wait_until(lock, deadline, [&] { return !keep_alive_busy_; })) {
      return Status::Unavailable("etcd: LeaseKeepAlive: another renewal on this client held the stream past the deadline");
    }
    keep_alive_busy_ = true;
  }
  std::optional<std::chrono::seconds> ttl;
  Status status = Failover("LeaseKeepAlive", deadline, [&](size_t index, Deadline try_deadline) {
    Result<std::chrono::seconds> renewed = KeepAliveAt(index, id, try_deadline);
    if (!renewed.ok()) return renewed.status();
    ttl = *renewed;
    return Status::OK();
  });
  {
    std::lock_guard<std::mutex> lock(keep_alive_mu_);
    keep_alive_busy_ = false;
  }
  keep_alive_free_.notify_one();
  if (!status.ok()) return status;
  return *ttl;
}

Result<std::chrono::seconds> EtcdClient::KeepAliveAt(size_t index, int64_t id, Deadline deadline) {
  Endpoint& endpoint = *endpoints_[index];
  if (keep_alive_ != nullptr && keep_alive_endpoint_ != index) keep_alive_.reset();
  // Any way out but a good reply closes the stream.
  auto broken = [&](StreamStep step, const char* doing) -> Status {
    Status status = step == StreamStep::kTimedOut
                        ? Status::Unavailable("etcd " + endpoint.name + ": LeaseKeepAlive: no answer by the deadline while " + doing)
                        : FromGrpc(keep_alive_->Finish(DeadlineIn(std::chrono::seconds(1))), endpoint.name,
                                   std::string("LeaseKeepAlive (") + doing + ")");
    if (status.ok()) status = Status::Unavailable("etcd " + endpoint.name + ": LeaseKeepAlive: the stream ended");
    keep_alive_.reset();
    return status;
  };
  if (keep_alive_ == nullptr) {
    keep_alive_ = std::make_unique<KeepAliveStream>();
    keep_alive_endpoint_ = index;
    StreamStep step = keep_alive_->Start(
        [&](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
          return endpoint.lease->PrepareAsyncLeaseKeepAlive(context, queue);
        },
        deadline);
    if (step != StreamStep::kDone) return broken(step, "connecting");
  }
  pb::LeaseKeepAliveRequest request;
  request.set_id(id);
  StreamStep step = keep_alive_->Write(request, deadline);
  if (step != StreamStep::kDone) return broken(step, "sending");
  pb::LeaseKeepAliveResponse reply;
  if ((step = keep_alive_->Read(&reply, deadline)) != StreamStep::kDone) return broken(step, "waiting");
  Status header = DecodeHeader(reply.has_header(), reply.header(), "LeaseKeepAlive").status();
  if (!header.ok() || reply.id() != id) {
    keep_alive_.reset();
    return header.ok() ? Status::ProtocolError("etcd: LeaseKeepAlive of lease " + LeaseName(id) + " answered another")
                       : header;
  }
  if (reply.ttl() <= 0) return Status::NotFound("etcd: lease " + LeaseName(id) + " has expired or was revoked");
  return std::chrono::seconds(reply.ttl());
}

Result<std::unique_ptr<EtcdWatch>> EtcdClient::Watch(const WatchSpec& spec, Deadline deadline) {
  std::unique_ptr<EtcdWatch> watch;
  NANOKV_RETURN_IF_ERROR(Failover("Watch", deadline, [&](size_t index, Deadline try_deadline) {
    Result<std::unique_ptr<EtcdWatch>> started = EtcdWatch::Start(*endpoints_[index], index, spec, try_deadline);
    if (!started.ok()) return started.status();
    watch = std::move(started).value();
    return Status::OK();
  }));
  return watch;
}

}  // namespace nanokv::etcd
