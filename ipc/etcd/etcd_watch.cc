#include "ipc/etcd/etcd_watch.h"

#include <string>

#include "ipc/etcd/etcd_channel.h"
#include "ipc/etcd/etcd_decode.h"
#include "ipc/etcd/etcd_stream.h"

namespace nanokv::etcd {

class WatchStream : public BidiStream<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {};

EtcdWatch::EtcdWatch(Endpoint& endpoint, size_t endpoint_index)
    : endpoint_(endpoint), endpoint_index_(endpoint_index), stream_(std::make_unique<WatchStream>()) {}

EtcdWatch::~EtcdWatch() = default;

const std::string& EtcdWatch::endpoint() const { return endpoint_.name; }

void EtcdWatch::Cancel() { stream_->Cancel(); }

Status EtcdWatch::Ended(const std::string& why) {
  if (!ended_) ended_ = Status::Unavailable("etcd " + endpoint_.name + ": watch: " + why);
  return *ended_;
}

Result<std::unique_ptr<EtcdWatch>> EtcdWatch::Start(Endpoint& endpoint, size_t endpoint_index,
                                                    const WatchSpec& spec, Deadline deadline) {
  std::unique_ptr<EtcdWatch> watch(new EtcdWatch(endpoint, endpoint_index));
  WatchStream& stream = *watch->stream_;
  auto failed = [&](StreamStep step, const char* doing) -> Status {
    if (step == StreamStep::kTimedOut) {
      return Status::Unavailable("etcd " + endpoint.name + ": Watch: no answer by the deadline while " + doing);
    }
    return FromGrpc(stream.Finish(DeadlineIn(std::chrono::seconds(1))), endpoint.name,
                    std::string("Watch (") + doing + ")");
  };
  StreamStep step = stream.Start(
      [&](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
        return endpoint.watch->PrepareAsyncWatch(context, queue);
      },
      deadline);
  if (step != StreamStep::kDone) return failed(step, "connecting");
  etcdserverpb::WatchRequest request;
  EncodeWatch(spec, request.mutable_create_request());
  if ((step = stream.Write(request, deadline)) != StreamStep::kDone) return failed(step, "creating");
  etcdserverpb::WatchResponse reply;
  if ((step = stream.Read(&reply, deadline)) != StreamStep::kDone) return failed(step, "creating");
  if (!reply.created()) {
    return Status::ProtocolError("etcd " + endpoint.name + ": Watch: the first reply does not confirm the watch");
  }
  if (reply.canceled()) {
    std::string why = reply.cancel_reason().empty() ? "refused" : reply.cancel_reason().substr(0, 256);
    return Status::FailedPrecondition("etcd " + endpoint.name + ": Watch: " + why);
  }
  watch->watch_id_ = reply.watch_id();
  return watch;
}

Result<std::optional<WatchBatch>> EtcdWatch::Next(Deadline deadline) {
  if (ended_) return *ended_;
  etcdserverpb::WatchResponse reply;
  StreamStep step = stream_->Read(&reply, deadline);
  if (step == StreamStep::kTimedOut) return std::optional<WatchBatch>();
  if (step == StreamStep::kFailed) {
    grpc::Status why = stream_->Finish(DeadlineIn(std::chrono::seconds(1)));
    ended_ = FromGrpc(why.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended") : why,
                      endpoint_.name, "watch");
    if (ended_->code() != Code::kUnavailable) ended_ = Status::Unavailable(ended_->ToString());
    return *ended_;
  }
  if (reply.watch_id() != watch_id_) {
    return Ended("a reply for watch " + std::to_string(reply.watch_id()) + ", not ours (" +
                 std::to_string(watch_id_) + ")");
  }
  if (reply.canceled()) {
    if (reply.compact_revision() > 0) {
      ended_ = Status::FailedPrecondition("etcd " + endpoint_.name + ": watch: its start revision was compacted (" +
                                          "the oldest left is " + std::to_string(reply.compact_revision()) + ")");
      return *ended_;
    }
    return Ended("canceled by etcd" +
                 (reply.cancel_reason().empty() ? std::string() : ": " + reply.cancel_reason().substr(0, 256)));
  }
  Result<WatchBatch> batch = DecodeWatch(reply);
  if (!batch.ok()) {
    ended_ = batch.status();
    return *ended_;
  }
  return std::optional<WatchBatch>(std::move(batch).value());
}

}  // namespace nanokv::etcd
