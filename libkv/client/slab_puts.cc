#include "libkv/client/slab_puts.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "libkv/client/object_store_impl.h"
#include "nanokv/device/slab_publish.h"

namespace nanokv {
namespace {

using Clock = std::chrono::steady_clock;

// How long a put waits for kvd to read a full ring before it takes the plan
// path: kvd reads every live ring each loop turn, at least every 1 ms.
constexpr auto kRingFullWait = std::chrono::milliseconds(100);

}  // namespace

struct ObjectStore::SlabPuts::Live {
  std::unique_ptr<ObjectSlab> slab;
  // Traded before kvd's slab_ttl ends it: a put still writing then would
  // store into space kvd has taken back.
  Clock::time_point granted_at;
  Clock::time_point trade_at;
  std::vector<int> access;          // devices that reach the slab's pages here
  void* ring_registered = nullptr;  // the ring's host address, registered for the kernels
  device::AnnounceRecord* records_for_kernels = nullptr;

  // Announces kvd dropped (their key was stored already) that no Flush has
  // reported yet: counted here as kvd's ring header says.
  std::shared_ptr<std::atomic<uint64_t>> dropped_sink;
  std::atomic<uint64_t> dropped_counted{0};

  ~Live() {
    // kvd reads the ring once more at the release: its drops are counted after.
    Status released = slab->Release();
    if (!released.ok()) spdlog::warn("nanokv objects: slab {}: {}", slab->id(), released.ToString());
    CountDropped();
    if (ring_registered != nullptr) client::UnregisterForKernels(ring_registered);
  }

  void CountDropped() {
    if (dropped_sink == nullptr) return;
    const uint64_t dropped = device::detail::LoadConsumed(&slab->ring().header->dropped);
    const uint64_t before = dropped_counted.exchange(dropped);
    if (dropped > before) dropped_sink->fetch_add(dropped - before);
  }

  uint64_t* StampForKernels(uint64_t ring_index) {
    const device::SlabCursor& c = *slab->cursor();
    return &records_for_kernels[ring_index & (c.ring_records - 1)].stamp;
  }
};

ObjectStore::SlabPuts::~SlabPuts() {
  {
    std::lock_guard lock(jobs_mu_);
    stopping_ = true;
  }
  jobs_cv_.notify_all();
  if (worker_.joinable()) worker_.join();  // runs what was posted first
  devices_.clear();                        // the held slabs released, one request each
}

void ObjectStore::SlabPuts::Post(std::function<void()> job) {
  std::lock_guard lock(jobs_mu_);
  jobs_.push_back(std::move(job));
  if (!worker_.joinable()) worker_ = std::thread([this] { Work(); });
  jobs_cv_.notify_all();
}

void ObjectStore::SlabPuts::Work() {
  std::unique_lock lock(jobs_mu_);
  for (;;) {
    jobs_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    working_ = true;
    lock.unlock();
    job();
    job = nullptr;  // what it held goes before the drain below can return
    lock.lock();
    working_ = false;
    jobs_cv_.notify_all();
  }
}

void ObjectStore::SlabPuts::Drain() {
  std::unique_lock lock(jobs_mu_);
  jobs_cv_.wait(lock, [&] { return jobs_.empty() && !working_; });
}

Result<std::shared_ptr<ObjectStore::SlabPuts::Live>> ObjectStore::SlabPuts::Grant(int device,
                                                                                  const SlabPutOptions& options,
                                                                                  uint64_t payload_bytes) {
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<ObjectSlab> slab,
                          store_.AcquireSlab(device, std::max(payload_bytes, options.payload_bytes),
                                             options.header_slots, options.ring_records));
  auto live = std::make_shared<Live>();
  live->slab = std::move(slab);
  live->dropped_sink = dropped_;
  live->access = store_.impl_->AccessOf(live->slab->local_device());
  live->granted_at = Clock::now();
  live->trade_at = live->granted_at + std::chrono::milliseconds(live->slab->ttl_ms() / 2);
  if (client::TransfersUseKernelsOn(backend_, live->slab->local_device())) {
    const device::AnnounceRing ring = live->slab->ring();
    const size_t bytes =
        sizeof(device::AnnounceRingHeader) + size_t{ring.header->records} * sizeof(device::AnnounceRecord);
    NANOKV_ASSIGN_OR_RETURN(void* mapped, client::RegisterForKernels(ring.header, bytes));
    live->ring_registered = ring.header;
    live->records_for_kernels =
        reinterpret_cast<device::AnnounceRecord*>(static_cast<device::AnnounceRingHeader*>(mapped) + 1);
  }
  grants_.fetch_add(1, std::memory_order_relaxed);
  return live;
}

Status ObjectStore::SlabPuts::Use(int device, const SlabPutOptions& options) {
  if (device < 0) return Status::InvalidArgument("slab puts: device " + std::to_string(device));
  std::lock_guard lock(mu_);
  NANOKV_ASSIGN_OR_RETURN(std::shared_ptr<Live> live, Grant(device, options));
  Device& d = devices_[device];
  d.options = options;
  if (d.next != nullptr) Post([next = std::move(d.next)]() mutable { next.reset(); });  // of the old shape
  Retire(d, std::move(live));
  return Status::OK();
}

void ObjectStore::SlabPuts::Retire(Device& d, std::shared_ptr<Live> fresh) {
  std::erase_if(retired_, [](const std::weak_ptr<Live>& w) { return w.expired(); });
  if (d.live != nullptr) {
    retired_.push_back(d.live);
    Post([old = std::move(d.live)]() mutable { old.reset(); });
  }
  d.live = std::move(fresh);
}

Status ObjectStore::SlabPuts::Trade(int device, Device& d, uint64_t room_wanted) {
  if (d.next != nullptr && Clock::now() < d.next->trade_at) {
    Retire(d, std::move(d.next));  // granted ahead: costs nothing now
    return Status::OK();
  }
  // One granted ahead but past half its own ttl (the puts stalled): too old
  // to take, so released now, not left for kvd to end by slab_ttl.
  if (d.next != nullptr) Post([stale = std::move(d.next)]() mutable { stale.reset(); });
  // A batch's rest in one slab where it is larger than the usual shape: one
  // grant on the batch's path, not one per slab's worth of it (each a
  // request and its ring's registration); the usual shape where kvd has no
  // such room.
  Result<std::shared_ptr<Live>> fresh = Status::ResourceExhausted("");
  if (room_wanted > d.options.payload_bytes) fresh = Grant(device, d.options, room_wanted);
  if (!fresh.ok()) fresh = Grant(device, d.options);
  NANOKV_RETURN_IF_ERROR(fresh.status());
  Retire(d, std::move(*fresh));
  return Status::OK();
}

void ObjectStore::SlabPuts::MaybeAskNext(int device, Device& d) {
  if (d.next != nullptr || d.next_asked) return;
  const device::SlabCursor& c = *d.live->slab->cursor();
  const bool half_spent = device::detail::LoadCursor(&c.headers_next) * 2 >= c.header_slots ||
                          device::detail::LoadCursor(&c.payload_next) * 2 >= c.payload_bytes ||
                          Clock::now() >= d.live->trade_at - (d.live->trade_at - d.live->granted_at) / 2;
  if (!half_spent) return;
  d.next_asked = true;
  // As large as the largest batch seen lately, so that the next batch of
  // that size takes it whole (a trade on the puts' path costs a request).
  Post([this, device, options = d.options, payload = std::max(d.options.payload_bytes, d.batch_bytes)] {
    Result<std::shared_ptr<Live>> next = Grant(device, options, payload);
    if (!next.ok() && payload > options.payload_bytes) next = Grant(device, options);
    std::lock_guard lock(mu_);
    Device& dev = devices_[device];
    dev.next_asked = false;
    const bool same_shape = dev.options.payload_bytes == options.payload_bytes &&
                            dev.options.header_slots == options.header_slots &&
                            dev.options.ring_records == options.ring_records;
    if (next.ok() && !same_shape) {
      Post([stale = std::move(*next)]() mutable { stale.reset(); });  // UseSlabs changed the shape meanwhile
    } else if (next.ok()) {
      dev.next = std::move(*next);
    } else {
      spdlog::debug("nanokv objects: the next slab on device {}: {}", device, next.status().ToString());
    }
  });
}

int ObjectStore::SlabPuts::DeviceFor(int preferred_device) const {
  if (preferred_device >= 0) return devices_.count(preferred_device) != 0 ? preferred_device : -1;
  return devices_.size() == 1 ? devices_.begin()->first : -1;
}

bool ObjectStore::SlabPuts::Serves(std::string_view key, uint64_t bytes, int preferred_device) const {
  std::lock_guard lock(mu_);
  const int device = DeviceFor(preferred_device);
  if (device < 0 || bytes == 0 || !ValidObjectKey(key)) return false;
  return bytes <= devices_.at(device).options.payload_bytes;
}

Result<ObjectStore::SlabPuts::Pending> ObjectStore::SlabPuts::Begin(std::string_view key, const void* src,
                                                                    uint64_t bytes, int device, uint64_t room_wanted) {
  if (src == nullptr) return Status::InvalidArgument("put of " + std::string(key) + " from a null address");
  Pending put;
  const auto give_up = Clock::now() + kRingFullWait;
  std::unique_lock lock(mu_);
  // A slab ends with the connection (kvd restarted, say): its space may be
  // another object's by now. A poll of the socket, at most once a
  // millisecond (kvd takes longer than that to come back).
  if (const auto now = Clock::now(); now - connection_checked_ > std::chrono::milliseconds(1)) {
    if (!store_.impl_->Connected()) {
      return Status::Unavailable("slab put of " + std::string(key) +
                                 ": kvd closed this store's connection, and "
                                 "its slabs ended with it");
    }
    connection_checked_ = now;
  }
  for (bool traded = false;;) {
    Device& d = devices_.at(device);
    if (const auto now = Clock::now(); now >= d.live->trade_at) {
      // Past half of slab_ttl: traded, or, where kvd refuses the next one
      // for now, kept until three quarters (the refusal then stands).
      Status aged = Trade(device, d, 0);
      if (!aged.ok() && now >= d.live->trade_at + (d.live->trade_at - d.live->granted_at) / 2) return aged;
      if (!aged.ok()) spdlog::debug("nanokv objects: trading slab {}: {}", d.live->slab->id(), aged.ToString());
    }
    const device::SlabCode code = device::AllocateInSlab(d.live->slab->cursor(), d.live->slab->ring(), bytes, &put.at);
    if (code == device::SlabCode::kOk) {
      put.live = d.live;
      MaybeAskNext(device, d);
      break;
    }
    if (code == device::SlabCode::kSlabFull && !traded) {
      // Spent: the next slab of the same shape; the old one goes when its
      // last put is done.
      NANOKV_RETURN_IF_ERROR(Trade(device, d, room_wanted));
      traded = true;
      continue;
    }
    if (code != device::SlabCode::kRingFull) {
      return Status::ResourceExhausted("slab put of " + std::string(key) + ": the slab has no room for " +
                                       std::to_string(bytes) + " bytes");
    }
    if (Clock::now() > give_up) {
      return Status::Unavailable("slab put of " + std::string(key) + ": kvd has not read the announce ring for " +
                                 std::to_string(kRingFullWait.count()) + " ms");
    }
    // kvd has not read the ring a lap back yet: it does every loop turn.
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
  }
  lock.unlock();
  ObjectSlab& slab = *put.live->slab;
  const device::SlabGeometry geometry = slab.geometry();
  const uint64_t hash = ObjectSlab::KeyHash(key);
  const ObjectHeader writing = device::SlabHeader(geometry, put.at, bytes, hash);
  (void)device::FillAnnounce(slab.ring(), *slab.cursor(), put.at, bytes, hash, writing.epoch, key.data(),
                             static_cast<uint32_t>(key.size()));  // Serves checked the key
  client::ObjectPieces& p = put.pieces;
  p.device = slab.local_device();
  p.payload = geometry.payload + put.at.payload_offset;
  p.bytes = bytes;
  p.segments.push_back({p.payload, bytes});
  p.header = geometry.headers + put.at.header_slot;
  p.epoch = writing.epoch;
  p.writing = writing;
  p.access = put.live->access;
  if (put.live->records_for_kernels != nullptr) {
    p.announce_stamp = put.live->StampForKernels(put.at.ring_index);
    p.announce_value = put.at.ring_index + 1;
  }
  return put;
}

Status ObjectStore::SlabPuts::Finish(Pending& put, Status stored) {
  ObjectSlab& slab = *put.live->slab;
  const device::AnnounceRing ring = slab.ring();
  uint64_t* stamp = &device::detail::RecordAt(ring, *slab.cursor(), put.at.ring_index)->stamp;
  const uint64_t mine = put.at.ring_index + 1;
  if (stored.ok() && put.pieces.announce_stamp == nullptr) {
    device::detail::StoreStamp(stamp, mine);  // the copies are done: READY is in place
  } else if (__atomic_load_n(stamp, __ATOMIC_ACQUIRE) != mine) {
    // No READY (the launch failed, or the slot was no longer this put's):
    // a void record, which kvd reads past.
    device::detail::AnnounceVoid(ring, *slab.cursor(), put.at.ring_index);
    if (stored.ok())
      stored = Status::FailedPrecondition("slab put: the slot was given on before READY (the slab ended)");
  }
  // A traded slab's last put hands it to the worker to release (d.live
  // holds the current one: a count of one is a traded slab's last).
  if (put.live.use_count() == 1) Post([last = std::move(put.live)]() mutable { last.reset(); });
  return stored;
}

std::vector<Status> ObjectStore::SlabPuts::Put(std::span<const DevicePut> items, int preferred_device, void* stream) {
  int device = -1;
  size_t chunk = 1;
  {
    std::lock_guard lock(mu_);
    device = DeviceFor(preferred_device);
    // Every record a chunk takes is stamped before the next chunk asks for
    // more: half a ring, so kvd always has stamped records to read on.
    if (device >= 0) chunk = std::max<size_t>(1, devices_.at(device).options.ring_records / 2);
  }
  std::vector<Status> out;
  out.reserve(items.size());
  if (device < 0) {
    out.assign(items.size(), Status::FailedPrecondition("slab puts: no slab on the preferred device " +
                                                        std::to_string(preferred_device)));
    return out;
  }
  for (size_t first = 0; first < items.size(); first += chunk) {
    std::vector<Status> done = PutChunk(items.subspan(first, std::min(chunk, items.size() - first)), device, stream);
    for (Status& s : done) out.push_back(std::move(s));
  }
  return out;
}

std::vector<Status> ObjectStore::SlabPuts::PutChunk(std::span<const DevicePut> items, int device, void* stream) {
  std::vector<Status> out(items.size());
  std::vector<Result<Pending>> pending;
  pending.reserve(items.size());
  // What the chunk still has to place from each item on: a slab spent on
  // the way is traded for one that holds all of it (Trade).
  auto room = [](uint64_t bytes) { return (bytes + kPayloadAlignment - 1) & ~(kPayloadAlignment - 1); };
  uint64_t rest = 0;
  for (const DevicePut& item : items) rest += room(item.bytes);
  {
    std::lock_guard lock(mu_);
    Device& d = devices_.at(device);
    // The largest batch lately: decays, so one large batch does not size every slab after it.
    d.batch_bytes = std::max(rest, d.batch_bytes - d.batch_bytes / 32);
    // A chunk the live slab cannot hold goes whole into the one granted
    // ahead where that can: split over two, it would trade on the way.
    const device::SlabCursor& c = *d.live->slab->cursor();
    const uint64_t live_room = c.payload_bytes - std::min(c.payload_bytes, device::detail::LoadCursor(&c.payload_next));
    if (live_room < rest && d.next != nullptr && d.next->slab->payload_bytes() >= rest &&
        Clock::now() < d.next->trade_at) {
      Retire(d, std::move(d.next));
    }
  }
  for (const DevicePut& item : items) {
    pending.push_back(Begin(item.key, item.src, item.bytes, device, rest));
    rest -= room(item.bytes);
  }
  // Kernels: every item in as few launches as fit and one wait. Else each
  // put's copies, done when StoreObject returns.
  bool kernels = items.size() > 1;
  for (const auto& p : pending) kernels = kernels && (!p.ok() || p->pieces.announce_stamp != nullptr);
  std::vector<client::StoreItem> stores;
  std::vector<size_t> which;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!pending[i].ok()) {
      out[i] = pending[i].status();
    } else if (kernels) {
      stores.push_back({items[i].src, &pending[i]->pieces});
      which.push_back(i);
    } else {
      out[i] = client::StoreObject(backend_, items[i].src, pending[i]->pieces, stream).status();
    }
  }
  if (!stores.empty()) {
    std::vector<Status> stored = client::StoreAnnouncedWithKernels(stores, stream);
    for (size_t k = 0; k < which.size(); ++k) out[which[k]] = std::move(stored[k]);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (pending[i].ok()) out[i] = Finish(*pending[i], out[i]);
  }
  return out;
}

Status ObjectStore::SlabPuts::Flush(uint32_t timeout_ms) {
  Drain();  // traded slabs released: kvd read their rings as it did
  std::vector<std::shared_ptr<Live>> slabs;
  {
    std::lock_guard lock(mu_);
    for (auto& [device, d] : devices_) slabs.push_back(d.live);
    for (auto& weak : retired_) {
      if (auto live = weak.lock()) slabs.push_back(std::move(live));
    }
    std::erase_if(retired_, [](const std::weak_ptr<Live>& w) { return w.expired(); });
  }
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (const auto& live : slabs) {
    const device::AnnounceRing ring = live->slab->ring();
    const uint64_t announced = device::detail::LoadCursor(&live->slab->cursor()->announce_next);
    while (device::detail::LoadConsumed(&ring.header->consumed) < announced) {
      if (Clock::now() > until) {
        return Status::Unavailable("slab puts: kvd has read " +
                                   std::to_string(device::detail::LoadConsumed(&ring.header->consumed)) + " of " +
                                   std::to_string(announced) + " announce records of slab " +
                                   std::to_string(live->slab->id()) + " after " + std::to_string(timeout_ms) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    live->CountDropped();
  }
  slabs.clear();  // a traded slab's last holder releases it here, and counts its drops
  if (const uint64_t dropped = dropped_->exchange(0); dropped != 0) {
    return Status::AlreadyExists("slab puts: " + std::to_string(dropped) +
                                 " named keys stored already; those keys kept their objects (objects are immutable)");
  }
  return Status::OK();
}

}  // namespace nanokv
