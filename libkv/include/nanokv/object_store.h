// The node object store, from an engine or a tool: immutable objects by key
// in pages kvd holds (kvd's object_store config), the nano_mooncake plan API.
//
//   auto store = nanokv::ObjectStore::Open({.ipc_name = "nanokv"});
//   auto plan = (*store)->OpenForWrite("sess:42:kv:L0", bytes, /*device=*/1);
//   void* dst = *(*store)->PayloadPointer(*plan);   // contiguous, on device 1
//   ... write bytes_total bytes at dst (a kernel, or CopyIn) ...
//   (*store)->Commit("sess:42:kv:L0", plan->epoch);
//   // elsewhere, another process:
//   auto bytes = (*store)->Get("sess:42:kv:L0");
//
// Objects are immutable once READY; OpenForWrite/Put on a live key answers
// kAlreadyExists (remove it first). A write not committed within kvd's
// write_timeout is reclaimed, and its plan's epoch then answers
// kFailedPrecondition or kNotFound. A lease keeps an object from eviction and
// removal until released or kvd's lease_ttl passes.
//
// The store's pages are the node's, not a tenant's: an ObjectStore has its own
// connection to kvd (no attach, nothing counts against a limit) and its own
// import cache: it maps each store page it touches once, at the page's offset
// in a reserved range per device, so every object is contiguous in this
// process too. Safe to call from many threads (one request at a time).
#ifndef NANOKV_OBJECT_STORE_H_
#define NANOKV_OBJECT_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanokv/device/slab.h"
#include "nanokv/device/slab_publish.h"
#include "nanokv/object_header.h"
#include "nanokv/object_types.h"
#include "nanokv/status.h"

namespace nanokv {

// A read lease as kvd answered it: its id (for ReleaseLease) and the time
// left on it then.
struct ObjectLease {
  uint64_t id = 0;
  uint64_t ttl_ms = 0;
};

// What kvd's store is, per device (kvctl objects' summary line).
struct ObjectStoreDeviceInfo {
  int device = 0;            // kvd's ordinal
  uint64_t store_bytes = 0;  // payload room of the device's store pages
  uint64_t used_bytes = 0;   // allocated (rounded) payload bytes
  uint32_t objects = 0;      // live: RESERVED, WRITING or READY
  uint64_t evictions = 0;    // since kvd started
  uint32_t pages = 0;        // store pages kvd holds from the device's pool
  // A page holds one owner's objects (a producer's uid, root's and kvd's
  // own included, or kvd's callers: the cluster master's orders): payload
  // pages nobody has, and each owner's pages, the most first.
  uint32_t shared_free_pages = 0;
  struct Owner {
    uint32_t uid = 0;          // 0 when kvd_callers
    bool kvd_callers = false;
    uint32_t pages = 0;
  };
  std::vector<Owner> owners;
  // The host tier under the store (object_store.host_tier); 0 without one.
  uint64_t host_bytes = 0;
  uint64_t host_used_bytes = 0;
  uint32_t host_objects = 0;
  uint64_t demotions = 0;   // moved down into the host tier, since kvd started
  uint64_t promotions = 0;  // moved back up
  // v2 slabs granted on this device (UseSlabs, AcquireSlab): how many, and
  // the oldest 32 of them.
  uint32_t slab_count = 0;
  struct Slab {
    uint64_t id = 0;
    uint32_t uid = 0;                // its writer's (0: root, kvd's uid or its callers)
    uint64_t payload_bytes = 0;      // granted
    uint64_t unannounced_bytes = 0;  // granted and never announced
    uint32_t header_slots = 0;
    uint32_t slots_taken = 0;  // objects announced and indexed
    uint64_t ttl_ms = 0;       // until kvd ends it by itself
  };
  std::vector<Slab> slabs;
};

struct ObjectStoreInfo {
  std::string backend;  // kvd's: "cuda", "hip" or "host"
  std::vector<ObjectStoreDeviceInfo> devices;
};

struct ObjectStoreOptions {
  std::string ipc_name = "nanokv";
  // The kvd's socket path, over ipc_name's lookup: a kvd this process knows
  // by its path alone (another node's kvd on this host, as the cluster
  // master's route names it). Its peer must still be a uid taken for kvd.
  std::string socket_path;
  // The backend kvd runs ("cuda", "hip", "host"); empty: $NANOKV_BACKEND,
  // else the one kvd names. On "host" the simulated device count is kvd's
  // (its reply at open), not NANOKV_HOST_DEVICES.
  std::string backend;
  uint32_t request_timeout_ms = 60'000;
  // How long a request polls for kvd's reply without sleeping before it
  // blocks (0: block at once; at most 10000). A reply within it saves the
  // wake-up of a sleeping thread, most of a plan's latency on a quiet host;
  // the cost is this thread's CPU for at most spin_us a request.
  uint32_t spin_us = 50;
  // A get (Get, GetToDevice) is one request, a lease that answers the
  // object's location, plus the copy; its lease is then released by a
  // second request, or, when this is true, with this store's next request
  // (in the same message when that is the next get). That saves a round
  // trip a get in a loop of gets; the cost: the last object read stays
  // leased (neither removed nor evicted) until this store's next request
  // or, after its last, kvd's lease_ttl (5 s by default).
  bool defer_lease_release = false;
  // Requests that carry no fd (open, commit, revoke, remove, lease, locate,
  // pin, info) go through a shared-memory ring kvd sets up for this store:
  // a few memory writes instead of a socket round trip, and no
  // wake-up at all while kvd busy polls. false: everything takes the socket.
  // A kvd without rings is used over the socket either way.
  bool ring = true;
  // Devices given access to every store page this process maps, besides the
  // page's own: a producer on GPU a that writes objects owned by GPU b lists
  // a here and its kernels store into b's pages peer-to-peer (one hop, no
  // host staging). Devices the backend does not have are kInvalidArgument.
  // These are this process's ordinals (its CUDA_VISIBLE_DEVICES numbering);
  // a plan's `device` is kvd's, matched to ours by the device's uuid.
  std::vector<int> access_devices;
  // Locations of objects a device get read, kept (at most this many, least
  // recently used out first) to read them again with no request to kvd: the
  // copy stands when kvd's read table says the object was still in place
  // after it, else the get asks kvd again (ARCHITECTURE.md, "Reads without
  // a lease"). The same for an object never read here that kvd's location
  // directory lists on pages this store mapped before. 0: every get asks
  // kvd. kvd's eviction order hears of such reads a second after the first
  // of them (one request, after a get's copies), not at once.
  uint32_t read_cache = 16384;
};

// A READY object read where it lies (ObjectStore::View): read-only, in this
// process's mapping of the store, under a held lease (the object is neither
// evicted nor removed; no lease_ttl) that ends when the view is destroyed
// (one request to kvd) or this process's connection to kvd closes. A write
// through data() faults. The view keeps its store's mappings alive, so it
// may outlive the ObjectStore it came from. Move-only.
class ObjectView {
 public:
  ObjectView();
  ObjectView(ObjectView&&) noexcept;
  ObjectView& operator=(ObjectView&&) noexcept;
  ObjectView(const ObjectView&) = delete;
  ObjectView& operator=(const ObjectView&) = delete;
  ~ObjectView();

  const void* data() const { return data_; }
  uint64_t size() const { return bytes_; }
  // This process's ordinal of the device the bytes are on (its
  // CUDA_VISIBLE_DEVICES numbering); a host backend's simulated device.
  int device() const { return device_; }
  const std::string& key() const;

  // Ends every view in `views` (each is left empty) with one release
  // request per store they came from, where each view's going would send
  // one: 128 views of a request's K/V end in one round trip. Empty views
  // are skipped. Only after the GPU work reading them finished.
  static void ReleaseAll(std::span<ObjectView> views);

  struct Holder;  // the lease and the store's mappings (object_store_views.cc)
  ObjectView(std::unique_ptr<Holder> holder, const void* data, uint64_t bytes, int device);

 private:
  std::unique_ptr<Holder> holder_;
  const void* data_ = nullptr;
  uint64_t bytes_ = 0;
  int device_ = 0;
};

// A v2 slab (issue 34; nanokv/device/slab.h): a range of kvd's store a
// producer allocates objects in itself, with no request to kvd per put.
//   auto slab = store->AcquireSlab(/*device=*/0, 64 << 20, 1024, 256);
//   device::SlabAllocation at;
//   AllocateInSlab((*slab)->cursor(), (*slab)->ring(), n, &at);   // or kRingFull / kSlabFull
//   ... n bytes at payload() + at.payload_offset ...
//   ... then ReadyHeader(at, n, key) stored at header(at.header_slot) ...
//   Announce(ring(), *cursor(), at, n, KeyHash(key), epoch(at.header_slot), key, key_bytes);
// kvd reads the ring on its loop (within about a millisecond) and the
// object is READY by key, the producer's as a committed one. The pages are
// mapped read-write here; the cursor is in this process's host memory (a
// kernel's producer copies it to its device and allocates there). The slab
// ends at Release (one request; what was announced stands, the rest goes
// back), its destructor, kvd's object_store.slab_ttl, or this store's
// connection closing. Move-only; it keeps its store's connection alive.
class ObjectSlab {
 public:
  ObjectSlab(ObjectSlab&&) noexcept;
  ObjectSlab& operator=(ObjectSlab&&) noexcept;
  ObjectSlab(const ObjectSlab&) = delete;
  ObjectSlab& operator=(const ObjectSlab&) = delete;
  ~ObjectSlab();  // Release, if not yet (a failure is logged)
  Status Release();

  uint64_t id() const;
  int device() const;  // kvd's ordinal
  uint64_t payload_bytes() const;
  uint32_t header_slots() const;
  uint64_t ttl_ms() const;  // kvd's object_store.slab_ttl, from the grant
  device::SlabCursor* cursor();
  device::AnnounceRing ring() const;
  void* payload() const;  // the slab's first payload byte
  ObjectHeader* header(uint32_t slot) const;
  uint32_t epoch(uint32_t slot) const;  // what slot `slot`'s header and announce carry
  // payload(), header(0), and what a header needs (nanokv/device/
  // slab_publish.h), for a kernel that takes them by value.
  device::SlabGeometry geometry() const;
  int local_device() const;  // this process's ordinal of device()
  // The READY header of `bytes` at `at` keyed `key`: what the producer
  // stores in header(at.header_slot) after the object's bytes.
  ObjectHeader ReadyHeader(const device::SlabAllocation& at, uint64_t bytes, std::string_view key) const;
  static uint64_t KeyHash(std::string_view key);  // xxhash64, seed 0 (ObjectHeader::key_hash)

  struct Holder;  // the grant, the mappings and the store (object_slab.cc)
  explicit ObjectSlab(std::unique_ptr<Holder> holder);

 private:
  std::unique_ptr<Holder> holder_;
};

// The slabs ObjectStore::UseSlabs holds for its device puts, each of this
// shape (ObjectStore::AcquireSlab's arguments): an object over
// payload_bytes takes the plan path; header_slots puts, or payload_bytes,
// spend a slab, which is then traded for a fresh one (one request to kvd).
struct SlabPutOptions {
  uint64_t payload_bytes = uint64_t{64} << 20;
  uint32_t header_slots = 1024;
  uint32_t ring_records = 1024;
};

class ObjectStore {
 public:
  // Asks kvd what its store is first: kUnavailable when kvd is not running,
  // kFailedPrecondition when it runs no object store (object_store.size 0).
  static Result<std::unique_ptr<ObjectStore>> Open(const ObjectStoreOptions& options);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;
  // Unmaps every store page this process mapped.
  ~ObjectStore();

  // The plan API (daemon/objects/object_index.h says what each error means).
  Result<ObjectPlan> OpenForWrite(std::string_view key, uint64_t bytes_total,
                                  int preferred_device = -1);
  // Commit stores READY in the plan's header (a 4-byte copy from this
  // process, after the caller's payload writes) and then tells kvd; kvd
  // stores nothing on the device (a store from kvd's process would cost a
  // GPU context switch, ~150 us on an H100). published_on_device: the
  // producer stored READY itself (kv_begin_write before its payload and
  // kv_commit_ready after, on HeaderPointer, and its stream has finished).
  Status Commit(std::string_view key, uint32_t epoch, bool published_on_device = false);
  Status Revoke(std::string_view key, uint32_t epoch);
  Status Remove(std::string_view key);
  // Where the READY object's copy is: plan.tier says which tier (kHost:
  // kvd's host memory, PayloadPointer a read-only host address, no header;
  // the locate queues it for promotion back into the store).
  Result<ObjectPlan> GetLocation(std::string_view key);
  // GetLocation of many keys: leased and located in as few requests as kvd's
  // replies fit, the leases released in one more. One result per key.
  std::vector<Result<ObjectPlan>> BatchGetLocation(std::span<const std::string> keys);
  Result<ObjectLease> Lease(std::string_view key);
  Status ReleaseLease(std::string_view key, uint64_t lease_id);
  Status Pin(std::string_view key, ObjectPin pin);

  // Maps the plan's pages (those not mapped yet) and returns the device
  // address of its payload, contiguous for bytes_total bytes, or of its
  // 64-byte header (nanokv/object_header.h), for kernels. The first pointer
  // of a plan being written writes its header (WRITING at the plan's epoch,
  // a copy from here: the producer writes headers, kvd none). A plan being
  // written (an open's, WRITING) is mapped read-write, with fds kvd gives
  // only for this uid's open plans, until Commit or Revoke here (or
  // ClosePlan); any other (a locate's, READY) read-only: a write through it
  // faults (host: SIGSEGV; cuda/hip: a GPU fault).
  Result<void*> PayloadPointer(const ObjectPlan& plan);
  Result<void*> HeaderPointer(const ObjectPlan& plan);
  // Drops write access to a plan committed or revoked elsewhere (through the
  // master: ClusterClient); Commit and Revoke here do it themselves.
  void ClosePlan(const ObjectPlan& plan);
  // What Commit stores before it tells kvd, for a plan committed elsewhere
  // (ClusterClient's, through the master): the header begun if it is not
  // yet, then READY, after the caller's payload writes.
  Status PublishReady(const ObjectPlan& plan);

  // Host bytes into a plan's payload (exactly bytes_total of them), or its
  // payload out (into at least bytes_total): the copies Put and Get make,
  // for a plan made elsewhere (ClusterClient's, from the master).
  Status CopyIn(const ObjectPlan& plan, std::span<const std::byte> bytes);
  Status CopyOut(const ObjectPlan& plan, std::span<std::byte> out);

  // Host bytes: open, copy through the backend, commit; lease, locate, copy
  // out, release.
  Status Put(std::string_view key, std::span<const std::byte> bytes, int preferred_device = -1);
  Result<std::vector<std::byte>> Get(std::string_view key);

  // Device-resident bytes (an engine's KV): put `bytes` from `src` and get
  // the object into `dst`, each a device address (or memory the device can
  // reach). On cuda they launch kernels/: kv_store_pages then kv_commit_ready
  // (READY is published on the device right after the last byte, then kvd
  // is told) and kv_load_pages (under a lease); elsewhere (the host backend,
  // a build without nvcc) they copy through the backend. `stream` is a
  // cudaStream_t of the object's device or of one in access_devices (else
  // kInvalidArgument, nothing launched); nullptr runs on the calling
  // thread's current device when it is one of those, else on the object's
  // device for the call. A buffer on another device is reached
  // peer-to-peer; a VMM one (cuMemMap, PyTorch's expandable segments) only
  // by devices its owner gave access: where no device reaches both it and
  // the pages, kFailedPrecondition, nothing launched. Both return once the bytes have
  // moved. GetToDevice answers the object's size; kInvalidArgument when it
  // is over `capacity` (nothing copied).
  Status PutFromDevice(std::string_view key, const void* src, uint64_t bytes,
                       int preferred_device = -1, void* stream = nullptr);
  Result<uint64_t> GetToDevice(std::string_view key, void* dst, uint64_t capacity,
                               void* stream = nullptr);
  // Whether the two above launch kernels here (else they copy).
  bool device_transfers_use_kernels() const;

  // Batches of the two above: one result per item, in order, each item's
  // as its single call would answer it (a failed item leaves the others
  // be). A put is still an open and a commit per item (kvd's protocol has
  // no batch open). A get asks kvd where its objects are in one request per
  // 256 keys at most (none for those read_cache knows or kvd's location
  // directory lists on pages mapped here), enqueues every load on `stream`
  // (a chunk at a time) and waits once; a copy in the store is read without a lease
  // and kept when kvd's read table vouches for it afterwards, else read
  // again under a lease (the host tier, and a kvd without the table, lease
  // every object, released in one request).
  struct DevicePut {
    std::string_view key;
    const void* src = nullptr;
    uint64_t bytes = 0;
  };
  struct DeviceGet {
    std::string_view key;
    void* dst = nullptr;
    uint64_t capacity = 0;
  };
  std::vector<Status> BatchPutFromDevice(std::span<const DevicePut> items, int preferred_device = -1,
                                         void* stream = nullptr);
  std::vector<Result<uint64_t>> BatchGetToDevice(std::span<const DeviceGet> items, void* stream = nullptr);

  // Plans made elsewhere (ClusterClient's, through the master) written from
  // device memory: each plan's header begun, `src` (bytes_total bytes) into
  // its pages and READY published on the device after its last byte, as
  // PutFromDevice does, without asking kvd anything (the maker commits).
  // wait false: returns once the work is enqueued on `stream` (not
  // nullptr; a nullptr stream waits), and the caller waits on the stream
  // (or an event after it) before it commits. One status per item.
  struct PlanWrite {
    const ObjectPlan* plan = nullptr;
    const void* src = nullptr;
  };
  std::vector<Status> WritePlansFromDevice(std::span<const PlanWrite> items, void* stream = nullptr,
                                           bool wait = true);

  // Views of READY objects where they lie (ObjectView): the object's pages
  // mapped read-only here, no copy. kvd bounds the leases a uid holds
  // (object_store.max_leases): a view is one of them until destroyed.
  Result<ObjectView> View(std::string_view key);
  std::vector<Result<ObjectView>> BatchView(std::span<const std::string> keys);

  // A v2 slab (ObjectSlab) on kvd's device `device`: payload_bytes of
  // payload (at most 63 store pages), header_slots objects (at most one
  // header page's), an announce ring of ring_records records (a power of
  // two, 2-65536). kResourceExhausted names the limit kvd holds to
  // (object_store.max_slabs, max_objects, high_watermark).
  Result<std::unique_ptr<ObjectSlab>> AcquireSlab(int device, uint64_t payload_bytes, uint32_t header_slots,
                                                  uint32_t ring_records);

  // Device puts through slabs (issue 34): once UseSlabs(device) is granted,
  // PutFromDevice and BatchPutFromDevice of an object that fits
  // options.payload_bytes, with preferred_device `device` (or -1 where this
  // store uses slabs on one device only), ask kvd nothing: the object is
  // allocated in a slab this store holds, and one launch stores its bytes,
  // publishes READY and stamps its announce record after READY (the host
  // backend: copies, then the stamp from here). A batch on a stream waits
  // once. kvd indexes what is announced on its loop, within about a
  // millisecond: until then a get by key answers kNotFound; FlushSlabPuts
  // waits for it. A key already in the store keeps its object (kvd drops
  // the announced copy and logs it), where the plan path answers
  // kAlreadyExists. Other puts take the plan path. Calling it again for a
  // device trades its slab for one of the new shape. kResourceExhausted
  // names the limit kvd holds to, as AcquireSlab.
  Status UseSlabs(int device, const SlabPutOptions& options = SlabPutOptions());
  // Returns once kvd has read the announce of every slab put that returned
  // before the call (a get by key then finds it); kUnavailable after
  // timeout_ms. kAlreadyExists when kvd dropped some of the announces it
  // read since the last flush because their keys were stored already (the
  // stored objects stand: objects are immutable); the message counts them.
  Status FlushSlabPuts(uint32_t timeout_ms = 1000);
  // Slabs kvd granted this store's puts: UseSlabs' and each spent slab's trade.
  uint64_t slab_grants() const;
  // Whether PutFromDevice of `bytes` keyed `key` would go through a slab.
  bool SlabServes(std::string_view key, uint64_t bytes, int preferred_device) const;

  // kvctl objects / evict.
  Result<std::vector<ObjectEntry>> List();
  Result<uint64_t> Evict(int device, uint64_t bytes);
  // Each device's store: room, use, objects, evictions.
  Result<ObjectStoreInfo> Info();

  // Store pages this process has mapped so far (the import cache).
  size_t mapped_pages() const;
  // Requests this store has sent kvd so far, every kind (a bench counts a
  // put's with it).
  uint64_t requests_sent() const;

  class Impl;
  class SlabPuts;  // UseSlabs' (libkv/client/slab_puts.h)

 private:
  explicit ObjectStore(std::unique_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with the views it made
  std::unique_ptr<SlabPuts> slab_puts_;
};

}  // namespace nanokv

#endif  // NANOKV_OBJECT_STORE_H_
