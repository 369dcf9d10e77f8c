// ObjectStore's inside (libkv/client/object_store.cc): its own connection
// to kvd, one request at a time, its map of store pages, the headers it
// began, and a get's kept lease. Internal: only object_store.cc includes it.
#ifndef NANOKV_LIBKV_CLIENT_OBJECT_STORE_IMPL_H_
#define NANOKV_LIBKV_CLIENT_OBJECT_STORE_IMPL_H_

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "gpu/backend.h"
#include "ipc/ring/ring_transport.h"
#include "ipc/rpc/call.h"
#include "ipc/uds/channel.h"
#include "ipc/uds/channel_transport.h"
#include "ipc/wire/codec.h"
#include "libkv/client/host_tier_mappings.h"
#include "libkv/client/object_mappings.h"
#include "libkv/client/object_transfer.h"
#include "libkv/client/read_cache.h"
#include "libkv/client/read_table_view.h"
#include "nanokv/object_store.h"

namespace nanokv {

// The request that ends lease `lease_id` on `key`.
inline wire::Message LeaseRelease(std::string_view key, uint64_t lease_id) {
  wire::Message m;
  m.mutable_object_lease()->set_key(std::string(key));
  m.mutable_object_lease()->set_release(true);
  m.mutable_object_lease()->set_lease_id(lease_id);
  return m;
}

// A lease kvd granted with the object's location: what a get copies out of
// (or a view reads) while the lease keeps the object in place.
struct LeasedPlan {
  uint64_t lease_id = 0;  // 0: none (a read the read table vouches for)
  ObjectPlan plan;
};

class ObjectStore::Impl {
 public:
  // The backend comes once kvd said which (SetBackend), before any map.
  Impl(ipc::Channel channel, const ObjectStoreOptions& options)
      : channel_(std::move(channel)),
        timeout_ms_(options.request_timeout_ms),
        spin_us_(options.spin_us),
        defer_lease_release_(options.defer_lease_release),
        access_devices_(options.access_devices),
        read_cache_(options.read_cache) {}

  // The mappings go before the backend they were made with. A kept lease
  // (defer_lease_release) ends with lease_ttl: no request here, which a
  // hung kvd would make a destructor wait on.
  ~Impl() {
    mappings_.reset();
    host_tier_.reset();
    if (doorbell_ >= 0) close(doorbell_);
  }

  // Asks kvd for this connection's request ring; without one (an older
  // kvd, no memory) requests keep the socket, which the log says once.
  void SetupRing() {
    std::lock_guard lock(call_mu_);
    wire::Message ask;
    ask.mutable_ring_setup();
    std::vector<int> fds;
    Result<wire::Message> reply = CallLocked(std::move(ask), &fds);
    auto keep_socket = [&](const std::string& why) {
      for (int fd : fds) close(fd);
      spdlog::info("nanokv objects: requests take the socket: {}", why);
    };
    if (!reply.ok()) return keep_socket(reply.status().ToString());
    if (!reply->has_ring_setup_reply() || fds.size() != 2) {
      return keep_socket("kvd answered ring_setup with " + std::to_string(fds.size()) + " fds");
    }
    Result<ipc::RequestRing> ring = ipc::RequestRing::Attach(fds[0]);
    close(fds[0]);
    if (!ring.ok()) {
      close(fds[1]);
      return keep_socket(ring.status().ToString());
    }
    ring_ = std::make_unique<ipc::RequestRing>(std::move(*ring));
    doorbell_ = fds[1];
  }
  // Whether this store's connection to kvd is still up (its slabs end with
  // it): a poll of the socket for a hang-up, no request.
  bool Connected() const {
    std::lock_guard lock(call_mu_);
    if (!channel_.valid()) return false;
    pollfd p{channel_.fd(), POLLRDHUP, 0};
    return poll(&p, 1, 0) == 0 || (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) == 0;
  }
  // kvd's read table mapped here, asked for once (reads without a lease);
  // null where kvd has none (an older kvd, a kernel that cannot seal it).
  const client::ReadTableView* ReadTable() {
    std::lock_guard lock(call_mu_);
    if (read_table_asked_) return read_table_.get();
    read_table_asked_ = true;
    wire::Message ask;
    ask.mutable_object_read_table();
    std::vector<int> fds;
    Result<wire::Message> reply = CallLocked(std::move(ask), &fds);
    Status mapped = reply.status();
    if (reply.ok() && (!reply->has_object_read_table_reply() || fds.size() != 1)) {
      mapped = Status::ProtocolError("kvd answered object_read_table with " + std::to_string(fds.size()) + " fds");
    }
    if (mapped.ok()) {
      const wire::ObjectReadTableReply& r = reply->object_read_table_reply();
      auto view =
          client::ReadTableView::Map(fds[0], r.entries(), {r.devices().begin(), r.devices().end()}, r.buckets());
      fds.clear();
      if (view.ok()) read_table_ = std::move(*view);
      mapped = view.status();
    }
    for (int fd : fds) close(fd);
    if (!mapped.ok()) spdlog::info("nanokv objects: every get takes a lease: {}", mapped.ToString());
    return read_table_.get();
  }
  client::ReadCache& read_cache() { return read_cache_; }

  // Requests sent to kvd so far, every kind.
  uint64_t requests_sent() const {
    std::lock_guard lock(call_mu_);
    return next_rid_ - 1;
  }
  bool has_ring() const {
    std::lock_guard lock(call_mu_);
    return ring_ != nullptr;
  }

  // Sends `request` and waits for its reply; an Error reply is its Status.
  // The reply's fds are appended to *fds (nullptr: closed).
  Result<wire::Message> Call(wire::Message request, std::vector<int>* fds = nullptr) {
    std::lock_guard lock(call_mu_);
    SettleKeptLeaseLocked(request);
    return CallLocked(std::move(request), fds);
  }

  // A get's lease is done: released now, or with this store's next request
  // (defer_lease_release).
  void EndLease(std::string_view key, uint64_t lease_id) {
    std::lock_guard lock(call_mu_);
    wire::Message none;
    SettleKeptLeaseLocked(none);  // one kept at a time: another thread's goes now
    kept_lease_ = {std::string(key), lease_id};
    if (!defer_lease_release_) SettleKeptLeaseLocked(none);
  }

  // A plan being written (WRITING: from an open) points into the write
  // range, read-write while the plan is open here; any other (READY: from a
  // locate) into the read range, read-only (client::ObjectMappings).
  // `begin`: the first pointer of a plan being written also writes its
  // header, WRITING at the plan's epoch (kvd writes nothing on the device
  // while it serves), unless
  // a kernel is about to (PutFromDevice).
  Result<void*> Pointer(const ObjectPlan& plan, bool header, bool begin = true) {
    std::lock_guard lock(call_mu_);
    if (plan.tier == ObjectTier::kHost) {
      // The host tier: kvd's host memory, read-only here, no header.
      if (header) return Status::FailedPrecondition("object " + plan.key + " is in the host tier: it has no header");
      NANOKV_ASSIGN_OR_RETURN(uintptr_t base, MapHostTierLocked(plan));
      return reinterpret_cast<void*>(base + plan.payload_offset);
    }
    NANOKV_ASSIGN_OR_RETURN(uintptr_t base, MapLocked(plan));
    if (begin && plan.state == ObjectState::kWriting) {
      auto* at = reinterpret_cast<ObjectHeader*>(base + plan.header_offset);
      auto [it, fresh] = begun_.emplace(std::make_pair(plan.key, plan.epoch), at);
      if (fresh) {
        Status begun = client::BeginByCopy(*backend_, at, WritingHeaderOf(plan, SteadyNowNs()));
        if (!begun.ok()) {
          begun_.erase(it);
          return begun;
        }
      }
    }
    return reinterpret_cast<void*>(base + (header ? plan.header_offset : plan.payload_offset));
  }

  // READY into the header of a plan begun here (a copy after the caller's
  // payload writes); nothing for one this process never wrote.
  Status Publish(std::string_view key, uint32_t epoch) {
    std::lock_guard lock(call_mu_);
    auto it = begun_.find(std::make_pair(std::string(key), epoch));
    if (it == begun_.end()) return Status::OK();
    return client::PublishByCopy(*backend_, it->second);
  }

  // A get's one request: a lease (which keeps the object in place while
  // its bytes are copied out) and the object's location in its reply.
  Result<LeasedPlan> LeaseAndLocate(std::string_view key);
  // Leases on many keys (hold: held leases, for views), as few requests
  // as the replies fit in; one result per key, in order
  // (object_store_batch.cc).
  // unleased: copies kvd's read table covers come with their read entry
  // and no lease (lease_id 0), the rest leased.
  std::vector<Result<LeasedPlan>> LeaseBatch(std::span<const std::string_view> keys, bool hold, bool unleased = false);
  // Ends leases in as few requests as fit; a failure is only logged (the
  // leases end with lease_ttl, or the connection, anyway).
  void ReleaseBatch(std::span<const uint64_t> lease_ids);
  // The plan's pages mapped here, as the transfers see them: its device
  // and the devices given access, as this process numbers them.
  // with_header false: a load's, which reads no header (nullptr there).
  Result<client::ObjectPieces> Pieces(const ObjectPlan& plan, bool with_header = true);
  // A load's pieces for a copy kvd's directory lists, where its pages are
  // mapped here already (else nothing: the get asks kvd, which maps them).
  std::optional<client::ObjectPieces> ListedPieces(const client::ListedCopy& copy);

  // A transfer began the plan's header itself (client::StoreObject): a
  // later pointer of the plan must not begin it again over its READY.
  void NoteBegun(const ObjectPlan& plan, ObjectHeader* at) {
    std::lock_guard lock(call_mu_);
    begun_.emplace(std::make_pair(plan.key, plan.epoch), at);
  }

  // A slab's header and payload pages mapped in the write range beside
  // plans' (pages mapped before cost no import, so a trade over the same
  // pages asks for no fds); returns the range's base. `local_device`: this
  // process's ordinal of the slab's device. CloseSlab when it ends.
  Result<uintptr_t> MapSlab(const wire::ObjectSlabReply& grant, int local_device) {
    std::lock_guard lock(call_mu_);
    const uint64_t slab_id = grant.slab_id();
    auto fetch = [this, slab_id](int device, const std::vector<uint32_t>& ids,
                                 const ObjectPlan*) -> Result<std::vector<int>> {
      wire::DevicePages pages = PagesOf(device, ids);
      pages.set_write(true);
      pages.set_slab_id(slab_id);
      return PageFdsLocked(std::move(pages));
    };
    return mappings_->Map(SlabAsPlan(grant), local_device, fetch);
  }
  void CloseSlab(const wire::ObjectSlabReply& grant) {
    std::lock_guard lock(call_mu_);
    mappings_->ClosePlan(SlabKey(grant), grant.first_epoch());
  }

  // Committed or revoked: the plan's pages lose write access here.
  void ClosePlan(std::string_view key, uint32_t epoch) {
    std::lock_guard lock(call_mu_);
    begun_.erase(std::make_pair(std::string(key), epoch));
    mappings_->ClosePlan(key, epoch);
  }

 private:
  // The lease a get kept goes out with `request` when that is another
  // lease's acquire (one request for both), else on its own first. A
  // failed release is only logged: the lease ends with lease_ttl anyway.
  void SettleKeptLeaseLocked(wire::Message& request) {
    if (kept_lease_.second == 0) return;
    auto [key, id] = std::move(kept_lease_);
    kept_lease_ = {};
    if (request.has_object_lease() && !request.object_lease().release()) {
      request.mutable_object_lease()->set_release_key(key);
      request.mutable_object_lease()->set_release_lease_id(id);
      return;
    }
    auto released = CallLocked(LeaseRelease(key, id), nullptr);
    if (!released.ok()) spdlog::warn("nanokv objects: lease release: {}", released.status().ToString());
  }

  // An object_pages request for `ids` of kvd's device `device`, and its
  // answer: the fds kvd sent (what they may do, the caller's fields say).
  static wire::DevicePages PagesOf(int device, const std::vector<uint32_t>& ids) {
    wire::DevicePages pages;
    pages.set_device(device);
    for (uint32_t id : ids) pages.add_page_ids(id);
    return pages;
  }
  Result<std::vector<int>> PageFdsLocked(wire::DevicePages pages) {
    wire::Message request;
    *request.mutable_object_pages() = std::move(pages);
    std::vector<int> fds;
    NANOKV_RETURN_IF_ERROR(CallLocked(std::move(request), &fds).status());
    return fds;
  }

  // The write range's view of a slab: a plan keyed "slab <id>" (no
  // object's: a key has no space) at the slab's first epoch, WRITING, over
  // its header page and each payload page.
  static std::string SlabKey(const wire::ObjectSlabReply& g) { return "slab " + std::to_string(g.slab_id()); }
  static ObjectPlan SlabAsPlan(const wire::ObjectSlabReply& g) {
    ObjectPlan plan;
    plan.key = SlabKey(g);
    plan.device = g.device();
    plan.device_uuid = g.device_uuid();
    plan.epoch = g.first_epoch();
    plan.state = ObjectState::kWriting;
    plan.header_offset = g.header_offset();
    plan.header_page = g.header_page();
    plan.page_bytes = g.page_bytes();
    plan.store_bytes = g.store_bytes();
    plan.payload_offset = g.payload_offset() - g.payload_offset() % g.page_bytes();
    for (uint32_t page : g.payload_pages()) {
      plan.spans.push_back({page, 0, static_cast<uint32_t>(g.page_bytes())});
    }
    plan.n_pages = static_cast<uint32_t>(plan.spans.size());
    plan.bytes_total = uint64_t{plan.n_pages} * g.page_bytes();
    return plan;
  }

  Result<uintptr_t> MapHostTierLocked(const ObjectPlan& plan) {
    auto fetch = [this](int device, const std::vector<uint32_t>& ids) -> Result<std::vector<int>> {
      wire::DevicePages pages = PagesOf(device, ids);
      pages.set_tier(static_cast<uint32_t>(ObjectTier::kHost));
      return PageFdsLocked(std::move(pages));
    };
    return host_tier_->Map(plan, fetch);
  }
  Result<uintptr_t> MapLocked(const ObjectPlan& plan) {
    NoteDeviceLocked(plan.device, plan.device_uuid);  // a plan from elsewhere (the master) carries it too
    NANOKV_ASSIGN_OR_RETURN(int local_device, LocalDeviceLocked(plan.device));
    auto fetch = [this](int device, const std::vector<uint32_t>& ids,
                        const ObjectPlan* writing) -> Result<std::vector<int>> {
      wire::DevicePages pages = PagesOf(device, ids);
      if (writing != nullptr) {
        pages.set_write(true);
        pages.set_plan_key(writing->key);
        pages.set_plan_epoch(writing->epoch);
        pages.set_write_secret(writing->write_secret);
      }
      return PageFdsLocked(std::move(pages));
    };
    return mappings_->Map(plan, local_device, fetch);
  }

 public:

  gpu::Backend& backend() { return *backend_; }
  void SetBackend(std::unique_ptr<gpu::Backend> backend) {
    backend_ = std::move(backend);
    mappings_ = std::make_unique<client::ObjectMappings>(*backend_, access_devices_);
    host_tier_ = std::make_unique<client::HostTierMappings>(*backend_);
  }

  // Notes the uuid kvd gave with a plan of its device `device`.
  void NoteDevice(int device, const std::string& uuid) {
    std::lock_guard lock(call_mu_);
    NoteDeviceLocked(device, uuid);
  }
  void NoteDeviceLocked(int device, const std::string& uuid) {
    if (uuid.empty() || uuids_[device] == uuid) return;
    uuids_[device] = uuid;
    local_.erase(device);  // a kvd restarted on other devices: match again
  }

  // This process's ordinal of kvd's device `device`, by the uuid of its plans.
  Result<int> LocalDevice(int device) {
    std::lock_guard lock(call_mu_);
    return LocalDeviceLocked(device);
  }

  // The devices a page of `device` (a local ordinal) is given access to.
  std::vector<int> AccessOf(int device) const { return mappings_->AccessOf(device); }

  size_t mapped_pages() const {
    std::lock_guard lock(call_mu_);
    return mappings_->mapped_pages() + host_tier_->mapped_pages();
  }

 private:
  Result<wire::Message> CallLocked(wire::Message request, std::vector<int>* fds) {
    if (!channel_.valid()) return Status::Unavailable("nanokv objects: kvd went away");
    ipc::ChannelTransport socket(channel_);
    std::optional<ipc::RingTransport> ring;
    if (ring_ != nullptr) ring.emplace(*ring_, channel_, doorbell_);
    ipc::Transport& transport = ring ? static_cast<ipc::Transport&>(*ring) : socket;
    ipc::CallOptions call;
    call.peer = "nanokv objects: kvd";
    if (timeout_ms_ != 0) call.timeout = std::chrono::milliseconds(timeout_ms_);
    // A reply within spin_us skips the wake-up of a blocked poll
    // (BENCHMARKS.md: plan round trip).
    call.spin = std::chrono::microseconds(spin_us_);
    call.reply_fds = fds != nullptr ? ipc::ReplyFds::kKeep : ipc::ReplyFds::kClose;
    // One request at a time (call_mu_): a reply to another id answers
    // nothing here, and is dropped.
    call.stray_replies = ipc::StrayReplies::kSkip;
    call.on_notice = [this](const wire::Message& notice) {
      if (!notice.has_shutdown()) return Status::OK();  // not this connection's business
      channel_.Close();
      return Status::Unavailable("nanokv objects: kvd is shutting down");
    };
    NANOKV_ASSIGN_OR_RETURN(ipc::Reply reply,
                            ipc::Call(transport, next_rid_++, std::move(request), {}, call));
    if (fds != nullptr) fds->insert(fds->end(), reply.fds.begin(), reply.fds.end());
    return std::move(reply.message);
  }

  // REQUIRES: call_mu_ held.
  Result<int> LocalDeviceLocked(int device) {
    if (auto it = local_.find(device); it != local_.end()) return it->second;
    auto known = uuids_.find(device);
    auto local = gpu::LocalOrdinal(*backend_, device, known == uuids_.end() ? "" : known->second);
    if (!local.ok()) return Status(local.status().code(), "nanokv objects: " + std::string(local.status().message()));
    local_[device] = *local;
    return *local;
  }

  mutable std::mutex call_mu_;
  ipc::Channel channel_;
  std::unique_ptr<ipc::RequestRing> ring_;  // GUARDED_BY(call_mu_); null: the socket only
  int doorbell_ = -1;                       // the ring's doorbell (its write end)
  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<client::ObjectMappings> mappings_;  // GUARDED_BY(call_mu_); made with the backend
  std::unique_ptr<client::HostTierMappings> host_tier_;  // GUARDED_BY(call_mu_); made with the backend
  uint32_t timeout_ms_;
  uint32_t spin_us_;
  bool defer_lease_release_;
  std::pair<std::string, uint64_t> kept_lease_;  // GUARDED_BY(call_mu_); id 0: none
  std::vector<int> access_devices_;  // besides each page's own device
  uint64_t next_rid_ = 1;
  // Plans being written whose header this process wrote, by (key, epoch):
  // where, for the READY a Commit stores. GUARDED_BY(call_mu_).
  std::map<std::pair<std::string, uint32_t>, ObjectHeader*> begun_;
  std::map<int, std::string> uuids_;  // kvd's ordinal -> uuid, from its plans
  std::map<int, int> local_;          // kvd's ordinal -> this process's, once matched
  bool read_table_asked_ = false;     // GUARDED_BY(call_mu_)
  std::unique_ptr<client::ReadTableView> read_table_;  // GUARDED_BY(call_mu_) until asked; then fixed
  client::ReadCache read_cache_;
};

}  // namespace nanokv

#endif  // NANOKV_LIBKV_CLIENT_OBJECT_STORE_IMPL_H_
