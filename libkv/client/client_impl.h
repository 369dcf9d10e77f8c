// Client::Impl: the connection to kvd behind nanokv::Client, and the access
// KVTensor needs (the backend and the handles of granted pages), which engines
// never see. Internal: libkv/client only.
//
// Threads:
//   - callers: any number send requests and wait for their replies;
//   - the reader: receives every datagram from kvd, imports the pages of
//     grant replies into the cache, in the order kvd sent them (so a forget
//     can never overtake the grant it follows), and routes each reply to its
//     waiting caller by request_id;
//   - the callback thread (only once OnReclaim was called): runs the user's
//     reclaim callback. Not the reader, because the callback may call Return,
//     which waits for a reply only the reader can deliver.
//
// Any protocol fault from kvd (a datagram that does not decode, a reply to no
// request, fds that do not match their pages) drops the connection: the
// cache and kvd's record of what this process imported could disagree from
// then on, and kvd takes back every page of a closed connection.
#ifndef NANOKV_LIBKV_CLIENT_CLIENT_IMPL_H_
#define NANOKV_LIBKV_CLIENT_CLIENT_IMPL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ipc/proto/nanokv.pb.h"
#include "ipc/uds/channel.h"
#include "libkv/client/page_cache.h"
#include "gpu/backend.h"
#include "nanokv/client.h"
#include "nanokv/status.h"

namespace nanokv {
namespace client {

// Sends the attach request on a fresh connection and waits for its one
// answer (nothing else can arrive before it). `resume`: a reconnect after kvd
// restarted, Adopt requests follow (client_reconnect.cc).
Result<wire::AttachReply> Handshake(ipc::Channel& channel, const ClientOptions& options,
                                    const std::string& tenant, uint64_t request_id, bool resume);

// The ids of `pages`, in order.
inline std::vector<uint32_t> IdsOf(const std::vector<ImportedPage>& pages) {
  std::vector<uint32_t> ids;
  ids.reserve(pages.size());
  for (const auto& page : pages) ids.push_back(page.id);
  return ids;
}

}  // namespace client

class Client::Impl {
 public:
  // Connects, attaches and opens the backend: Client::Attach's work.
  static Result<std::unique_ptr<Impl>> Connect(const ClientOptions& options);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  // Attach-time facts (immutable after Connect).
  // Changes when the client reconnects to a restarted kvd.
  uint32_t tenant_id() const { return tenant_id_.load(std::memory_order_relaxed); }
  const std::string& tenant() const { return tenant_; }
  size_t page_bytes() const { return page_bytes_; }
  const std::string& backend_name() const { return backend_name_; }
  const std::vector<DeviceGeometry>& devices() const { return devices_; }
  const std::string& segment_name() const { return segment_name_; }
  bool ServesDevice(int device) const;
  // kInvalidArgument for a device kvd does not serve, kNotFound for one this
  // process cannot see (matched by uuid: under CUDA_VISIBLE_DEVICES its
  // ordinals are not kvd's).
  Status CheckDevice(int device) const;
  // This process's ordinal of kvd's device `device`: what every backend call
  // takes, while requests to kvd keep kvd's ordinal. Errors as CheckDevice.
  Result<int> LocalDevice(int device) const;

  uint64_t limit_bytes() const { return limit_bytes_.load(std::memory_order_relaxed); }
  uint32_t pending_reclaim_pages() const {
    return pending_reclaim_.load(std::memory_order_relaxed);
  }
  bool connected() const;

  // Grants and shares, with the handle of each page (imported or cached).
  // On an error after part of a multi-datagram grant, the part is returned
  // to kvd (best effort) before the error is.
  Result<std::vector<client::ImportedPage>> GrantPages(int device, uint32_t pages);
  Result<std::vector<client::ImportedPage>> SharePages(int device, std::span<const uint32_t> ids);
  Status ReturnPages(int device, std::span<const uint32_t> ids);
  // client_reserve.cc: the reserve this engine reports (Client::AdjustReserve),
  // and its totals sent again to a restarted kvd.
  Status AdjustReserve(int device, int64_t delta_bytes);
  void ResendReserve();
  Result<uint64_t> SetLimit(uint64_t bytes);
  Status Detach();
  void OnReclaim(std::function<void(const ReclaimNotice&)> callback);

  gpu::Backend& backend() { return *backend_; }
  Result<client::ImportedPage> HandleFor(int device, uint32_t id) const {
    return cache_->Find(device, id);
  }
  ClientStats stats() const;

  // What a request asks, so its reply can be checked against it.
  enum class Kind { kGrant, kShare, kReturn, kSetLimit, kDetach };

 private:
  // One request in flight. Guarded by mu_.
  struct Pending {
    Kind kind = Kind::kGrant;
    int device = -1;
    uint32_t expect_pages = 0;                // kGrant
    std::vector<uint32_t> expect_ids;         // kShare
    std::vector<client::ImportedPage> pages;  // collected from grant replies
    wire::Message reply;                      // the final reply
    Status status;
    bool done = false;
    // The caller stopped waiting (timeout) or never will (fire and forget):
    // the reader drops the reply, returning any pages it granted.
    bool abandoned = false;
    std::condition_variable cv;
  };

  // Shared with the callback thread, so that thread can outlive the Impl if
  // the Client is (wrongly) destroyed from inside the callback.
  struct ReclaimQueue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<ReclaimNotice> notices;
    std::function<void(const ReclaimNotice&)> callback;
    bool stop = false;
  };

  Impl() = default;

  // Sends `message` as a new request and waits for its reply, at most
  // `timeout_ms` (0: no limit), or until kvd goes away. OK means the reply
  // arrived and matches `pending`'s kind (pending->reply, pending->pages).
  Status Call(wire::Message message, const std::shared_ptr<Pending>& pending, uint32_t timeout_ms);
  Status SendMessage(const wire::Message& message);
  // Returns pages nobody will map (a caller gave up, a grant failed half
  // way), without waiting for kvd's answer.
  void ReturnAbandoned(int device, std::vector<uint32_t> ids);
  // Tells kvd this process dropped the pages of its forget notice, so their
  // old memory stops counting against the device and this tenant (no reply).
  void SendForgetDone(int device, std::span<const uint32_t> ids);
  Result<std::vector<client::ImportedPage>> FinishGrant(Status status,
                                                        const std::shared_ptr<Pending>& pending,
                                                        int device);

  void ReaderLoop();
  // Handles one decoded datagram and takes its fds. A non-OK status is a
  // protocol fault: the reader drops the connection with it.
  Status Dispatch(const wire::Message& message, std::vector<int>* fds);
  Status DispatchNotice(const wire::Message& message);
  Status DispatchGrantReply(const wire::Message& message, const std::shared_ptr<Pending>& pending,
                            std::vector<int>* fds);
  // Completes a pending request. REQUIRES: mu_ held.
  void CompleteLocked(uint64_t request_id, Pending& pending, Status status);
  // Marks the connection gone: requests in flight fail with `in_flight`,
  // later ones with `later` (if it was still connected); shuts the socket
  // down, which wakes the reader and makes kvd reclaim this tenant. Idempotent.
  void Disconnect(const Status& in_flight, const Status& later);
  void EnqueueReclaim(const ReclaimNotice& notice);
  // The callback thread's body: it owns a reference to the queue.
  static void RunReclaimCallbacks(std::shared_ptr<ReclaimQueue> queue);
  void NoteReturned(size_t pages);
  // The pages this tenant holds, as kvd granted them: what a reconnect hands
  // back to a restarted kvd. REQUIRES (Locked): mu_ held.
  void NoteHeldLocked(int device, const std::vector<client::ImportedPage>& pages);
  void NoteReleased(int device, std::span<const uint32_t> ids);
  // Pages a restarted kvd did not take back: no longer held.
  void NoteForfeited(int device, std::span<const uint32_t> ids);

  // client_reconnect.cc. After kvd went away: connects again with back-off
  // until options_.reconnect_timeout_ms or Detach, attaches as the same
  // tenant and hands back the pages it holds (AdoptRequest). True when
  // connected again. Runs on the reader thread.
  bool Reconnect();
  // One attempt over a fresh connection; installs it on success.
  Status Resume(ipc::Channel channel);
  // Hands back the held pages of one device, in chunks kvd accepts.
  Status AdoptDevice(ipc::Channel& channel, int device,
                     const std::vector<std::pair<uint32_t, uint32_t>>& pages);

  ClientOptions options_;
  std::atomic<uint32_t> tenant_id_{0};
  std::string tenant_;
  size_t page_bytes_ = 0;
  std::string backend_name_;
  std::vector<DeviceGeometry> devices_;
  std::string segment_name_;

  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<client::PageCache> cache_;  // uses *backend_: declared after it
  ipc::Channel channel_;

  std::atomic<uint64_t> limit_bytes_{0};
  std::atomic<uint32_t> pending_reclaim_{0};
  std::atomic<uint64_t> next_request_id_{1};

  std::mutex send_mu_;  // one sendmsg at a time on the socket
  mutable std::mutex mu_;
  bool connected_ = false;  // guarded by mu_
  Status gone_;             // guarded by mu_: why requests fail once !connected_
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;  // guarded by mu_
  // (device, page id) -> generation of every page this tenant holds.
  std::map<std::pair<int, uint32_t>, uint32_t> held_;     // guarded by mu_
  bool detaching_ = false;                                // guarded by mu_
  std::condition_variable reconnect_cv_;                  // Detach wakes the back-off
  uint64_t reconnects_ = 0;                               // guarded by mu_
  uint64_t pages_forfeited_ = 0;                          // guarded by mu_

  std::mutex reserve_mu_;
  std::map<int, uint64_t> reserve_bytes_;  // guarded by reserve_mu_: kvd's ordinal -> total

  std::mutex detach_mu_;  // serializes Detach and the reader's join
  std::thread reader_;

  std::mutex reclaim_thread_mu_;
  std::shared_ptr<ReclaimQueue> reclaim_ = std::make_shared<ReclaimQueue>();
  std::thread reclaim_thread_;  // started by the first OnReclaim
};

}  // namespace nanokv

#endif  // NANOKV_LIBKV_CLIENT_CLIENT_IMPL_H_
