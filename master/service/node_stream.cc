#include "master/service/node_stream.h"

#include <spdlog/spdlog.h>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"

namespace nanokv::master {

// What the registry holds: sends go to the stream while it lives, and are
// dropped once gRPC has let go of it (OnDone).
class NodeStream::Link : public NodeLink {
 public:
  explicit Link(NodeStream* stream) : stream_(stream) {}
  void Send(v1::MasterMessage message) override {
    std::lock_guard lock(mu_);
    if (stream_ != nullptr) stream_->Enqueue(std::move(message));
  }
  void Close(const Status& why) override {
    std::lock_guard lock(mu_);
    if (stream_ != nullptr) stream_->CloseWith(why);
  }
  void Detach() {
    std::lock_guard lock(mu_);
    stream_ = nullptr;
  }

 private:
  std::mutex mu_;
  NodeStream* stream_;
};

NodeStream::NodeStream(ClusterMaster& master, grpc::CallbackServerContext* context, const Status& admitted)
    : master_(master), peer_(context->peer()), link_(std::make_shared<Link>(this)) {
  if (!admitted.ok()) {
    CloseWith(admitted);
    return;
  }
  StartRead(&in_);
}

void NodeStream::Enqueue(v1::MasterMessage message) {
  std::lock_guard lock(mu_);
  if (finishing_ || finished_) return;
  out_.push_back(std::move(message));
  if (!writing_) {
    writing_ = true;
    StartWrite(&out_.front());
  }
}

void NodeStream::OnWriteDone(bool ok) {
  bool broken = false;
  {
    std::lock_guard lock(mu_);
    out_.pop_front();
    writing_ = false;
    if (!ok) {
      broken = true;
      out_.clear();
    }
    if (finishing_ && !finished_) {
      out_.clear();
      finished_ = true;
      Finish(finish_status_);
    } else if (!out_.empty() && !finishing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }
  if (broken) EndSession(Status::Unavailable("the node's stream broke as the master wrote to it"));
}

void NodeStream::CloseWith(const Status& why) {
  std::lock_guard lock(mu_);
  if (finishing_ || finished_) return;
  finishing_ = true;
  finish_status_ = ToGrpcStatus(why);
  if (!writing_) {
    out_.clear();
    finished_ = true;
    Finish(finish_status_);
  }
}

SessionRef NodeStream::Session() {
  std::lock_guard lock(mu_);
  return session_;
}

void NodeStream::EndSession(const Status& why) {
  SessionRef session = Session();
  if (session.id != 0) {
    master_.CloseSession(session, why);  // closes the link, so us, if it was live
  }
  CloseWith(why);
}

void NodeStream::OnReadDone(bool ok) {
  if (!ok) return EndSession(Status::Unavailable("the node's session ended (" + peer_ + ")"));
  Status checked = CheckNodeMessage(in_);
  if (!checked.ok()) {
    spdlog::warn("master: a node at {} sent a malformed message: {}", peer_, checked.ToString());
    return EndSession(checked);
  }
  SessionRef session = Session();
  if (session.id == 0) {
    if (in_.body_case() != v1::NodeMessage::kRegister) {
      return EndSession(Status::ProtocolError("a node's session begins with register"));
    }
    auto opened = master_.OpenSession(in_.register_(), link_, peer_);
    if (!opened.ok()) {
      spdlog::info("master: refused node {} from {}: {}", in_.register_().node_id(), peer_,
                   opened.status().ToString());
      return CloseWith(opened.status());
    }
    std::lock_guard lock(mu_);
    session_ = *opened;
  } else {
    Status handled = master_.OnNodeMessage(session, in_);
    if (!handled.ok()) {
      spdlog::warn("master: ending node session from {}: {}", peer_, handled.ToString());
      return EndSession(handled);
    }
  }
  StartRead(&in_);
}

void NodeStream::OnDone() {
  SessionRef session = Session();
  if (session.id != 0) master_.CloseSession(session, Status::Unavailable("the node's stream is over"));
  link_->Detach();
  delete this;
}

}  // namespace nanokv::master
