// One bidirectional gRPC stream (etcd's Watch and LeaseKeepAlive) on a
// completion queue of its own, each step awaited with a deadline: gRPC's
// blocking stream API has no per-read deadline, and a hung etcd must never
// block a caller past the one it gave. Internal to ipc/etcd/.
//
// Not thread-safe, but for Cancel(), which any thread may call: it fails the
// step in progress and every later one.
#ifndef NANOKV_IPC_ETCD_ETCD_STREAM_H_
#define NANOKV_IPC_ETCD_ETCD_STREAM_H_

#include <cstdint>
#include <memory>

#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/support/async_stream.h>

#include "ipc/etcd/etcd_channel.h"

namespace nanokv::etcd {

enum class StreamStep { kDone, kTimedOut, kFailed };

template <typename Request, typename Response>
class BidiStream {
 public:
  BidiStream() = default;
  BidiStream(const BidiStream&) = delete;
  BidiStream& operator=(const BidiStream&) = delete;
  ~BidiStream() { Close(); }

  // Starts the call `prepare(&context, &queue)` makes (a stub's
  // PrepareAsync<Method>). The call asks etcd to end it when the member it
  // reaches loses its raft leader ("hasleader"), rather than go silent.
  // REQUIRES: called once, first.
  template <typename Prepare>
  StreamStep Start(Prepare&& prepare, Deadline deadline) {
    context_.AddMetadata("hasleader", "true");
    call_ = prepare(&context_, &queue_);
    call_->StartCall(Tag(kStart));
    posted_[kStart] = true;
    return Await(kStart, deadline);
  }

  // kTimedOut leaves the write in flight; the next Write waits for it first.
  StreamStep Write(const Request& request, Deadline deadline) {
    if (failed_) return StreamStep::kFailed;
    if (posted_[kWrite]) {
      StreamStep previous = Await(kWrite, deadline);
      if (previous != StreamStep::kDone) return previous;
    }
    call_->Write(request, Tag(kWrite));
    posted_[kWrite] = true;
    return Await(kWrite, deadline);
  }

  // kTimedOut leaves the read posted: the next Read returns its message.
  StreamStep Read(Response* out, Deadline deadline) {
    if (!read_ready_) {
      if (failed_) return StreamStep::kFailed;
      if (!posted_[kRead]) {
        incoming_.Clear();
        call_->Read(&incoming_, Tag(kRead));
        posted_[kRead] = true;
      }
      StreamStep step = Await(kRead, deadline);
      if (!read_ready_) return step == StreamStep::kDone ? StreamStep::kFailed : step;
    }
    read_ready_ = false;
    out->Swap(&incoming_);
    return StreamStep::kDone;
  }

  // After kFailed: the call's final status (what etcd said, or the
  // transport's error). Cancels the call if it has not ended by `deadline`.
  grpc::Status Finish(Deadline deadline) {
    if (call_ == nullptr || finished_) return final_status_;
    call_->Finish(&final_status_, Tag(kFinish));
    posted_[kFinish] = true;
    if (Await(kFinish, deadline) == StreamStep::kTimedOut) {
      context_.TryCancel();
      AwaitAll();
    }
    finished_ = true;
    return final_status_;
  }

  // Any thread: ends the call; the step in progress returns kFailed.
  void Cancel() { context_.TryCancel(); }

 private:
  enum Op { kStart, kWrite, kRead, kFinish, kOps };

  static void* Tag(Op op) { return reinterpret_cast<void*>(static_cast<uintptr_t>(op) + 1); }

  // Takes completions until `want`'s has come (kDone, or kFailed when any op
  // failed), or the deadline passes.
  StreamStep Await(Op want, Deadline deadline) {
    while (posted_[want]) {
      void* tag = nullptr;
      bool ok = false;
      auto next = queue_.AsyncNext(&tag, &ok, ToSystemDeadline(deadline));
      if (next == grpc::CompletionQueue::TIMEOUT) return StreamStep::kTimedOut;
      if (next == grpc::CompletionQueue::SHUTDOWN) {
        failed_ = true;
        return StreamStep::kFailed;
      }
      Take(tag, ok);
    }
    return failed_ && want != kFinish ? StreamStep::kFailed : StreamStep::kDone;
  }

  void Take(void* tag, bool ok) {
    auto op = static_cast<Op>(reinterpret_cast<uintptr_t>(tag) - 1);
    posted_[op] = false;
    if (op == kRead && ok) read_ready_ = true;
    if (!ok && op != kFinish) failed_ = true;
  }

  // Waits, without a deadline, for everything posted: only after TryCancel,
  // which completes every pending op at once.
  void AwaitAll() {
    for (int op = 0; op < kOps; ++op) {
      while (posted_[op]) {
        void* tag = nullptr;
        bool ok = false;
        if (!queue_.Next(&tag, &ok)) return;
        Take(tag, ok);
      }
    }
  }

  void Close() {
    if (call_ != nullptr) {
      context_.TryCancel();
      AwaitAll();
      if (!finished_) {
        call_->Finish(&final_status_, Tag(kFinish));
        posted_[kFinish] = true;
        AwaitAll();
        finished_ = true;
      }
    }
    queue_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (queue_.Next(&tag, &ok)) {
    }
  }

  // In this order: the call lives in the context's arena, the context's call
  // holds the queue.
  grpc::CompletionQueue queue_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<Request, Response>> call_;
  Response incoming_;
  bool posted_[kOps] = {};
  bool read_ready_ = false;
  bool failed_ = false;
  bool finished_ = false;
  grpc::Status final_status_;
};

}  // namespace nanokv::etcd

#endif  // NANOKV_IPC_ETCD_ETCD_STREAM_H_
