// kvd's node object store (the nano_mooncake seed on kvd's pages): immutable
// objects by key in a share of each device's pool that kvd itself holds.
// Pure logic over NodeState and the backend, like NodeState: no sockets, time
// passed in (now_ns, steady clock), so every rule is tested directly.
//
// Words: the *store range* of a device is its store pages mapped back to back
// in kvd's address space; offsets (header_offset, payload_offset) are bytes
// into it. Its first pages are the *header arena* (one 64-byte ObjectHeader
// per slot, nanokv/object_header.h); the rest is *payload space*, shared by
// objects through an OwnedSpace (256-byte aligned ranges, so small objects
// share a page and a large one spans several). A *span* is the part of an
// object's payload inside one page: what a producer maps.
//
// *Owners*: a producer's write fd maps whole pages, so
// every store page holds the objects of one owner only (the producer's
// uid, or kOperator: kvd's own callers), header pages included: an owner's
// headers go in header pages of its own, taken from the arena's spare ones
// or, when none is spare, from the payload space (zeroed by kvd then, and
// header pages for good, so a slot's epochs keep growing). A page handed
// out for writing is *held* by the uid it went to: it stays its owner's,
// even empty, until ReleaseHolder (the last connection of that uid gone),
// and then returns to shared use when empty.
//
// The states, pins, key rules and the plan kvd answers are the ones engines
// see (nanokv/object_header.h, nanokv/object_types.h): one vocabulary.
//
// Life of an object: OpenForWrite allocates a header slot and payload
// (RESERVED -> WRITING, in the index only) and returns an ObjectPlan carrying
// a fresh epoch, newer than any the slot held (EpochIsNewer). The producer
// writes the header (a CAS of {state, epoch} from an older epoch to
// {WRITING, epoch}), the payload, and READY, and calls
// Commit(key, epoch). Revoke(key, epoch) abandons a write; Remove(key) drops
// a READY object; a write not committed within write_timeout is reclaimed.
// Dropping frees the payload and slot in the index only.
//
// kvd does no device work on the request path: a copy from kvd's process
// makes the GPU switch between kvd's context and the engines' (~150 us each
// way on an H100, docs/BENCHMARKS.md). So no DEAD is stored: an object is
// gone when the index says so, and a device reader tells its object from
// the slot's next one by the epoch ({READY, its epoch}), holding a lease
// while it reads so the space is not reused under it. Where kvd does touch
// device memory, and why, is listed in docs/ARCHITECTURE.md ("Device work
// in kvd").
//
// The parts, one concept each: the object table (object_table.h: objects
// by key, states, epochs, leases, the journal), the eviction order of each
// device's store (eviction_order.h: picks victims; this class drops them),
// and the placement of each device's bytes (payload_placement.h: the store
// range, store_range.h; the host tier under it, host_range.h). This class
// composes them: the plan API, header slots and page owners
// (object_index_headers.cc), restart (object_index_restore.cc), the host
// tier (object_index_tier.cc) and moves between the tiers
// (object_index_moves.cc); what callers see besides it, object_store_types.h.
//
// Invariants (CheckInvariants() verifies them; tests call it after each step):
//   1. READY objects are immutable: nothing but state (-> DEAD) and the
//      last_access hint changes; OpenForWrite on a live key answers
//      kAlreadyExists (remove first, as Mooncake does).
//   2. Epochs are unique per device (one counter) and so grow per header
//      slot: a plan for an object
//      that has since died answers kFailedPrecondition, never acts on the
//      key's next object.
//   3. A leased object (lease not expired) is neither evicted nor removed (a
//      reader copies under a lease); a hard-pinned one is never evicted; a
//      soft-pinned one only when no unpinned object can be.
//   4. Space: per device, the allocator's allocated bytes are exactly the sum
//      of the live objects' rounded lengths, and live objects hold distinct
//      header slots; the store's pages are exactly the pages its tenant holds
//      in NodeState, so the pool's accounting stays exact.
//   5. Owners: an object's header page and payload pages are its owner's;
//      a page is owned while it holds a live object or is held, and is
//      held exactly by the uids ReleaseHolder has not yet released.
//
// Threads: every method may be called from many threads; one mutex guards
// the index. The index never copies payload: producers and readers do,
// through the plan (tests/unit/daemon/object_index_test.cc shows both).
//
// The store's pages are taken from NodeState as a tenant of its own (name
// kStoreTenant, group of the same name), so the pool, kvctl list and the
// invariant free + held == created count them without NodeState knowing
// about objects. `node` must outlive the store; NodeState is not thread-safe,
// so the store touches it only in Create and the destructor.
#ifndef NANOKV_DAEMON_OBJECTS_OBJECT_INDEX_H_
#define NANOKV_DAEMON_OBJECTS_OBJECT_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/config/object_store_config.h"
#include "daemon/node/node_state.h"
#include "daemon/objects/eviction_order.h"
#include "daemon/objects/host_range.h"
#include "daemon/objects/object_journal.h"
#include "daemon/objects/object_store_types.h"
#include "daemon/objects/object_table.h"
#include "daemon/objects/owned_space.h"
#include "daemon/objects/payload_placement.h"
#include "daemon/objects/read_table.h"
#include "daemon/objects/slab_table.h"
#include "daemon/objects/stored_object.h"
#include "gpu/backend.h"
#include "nanokv/object_header.h"
#include "nanokv/object_types.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

inline constexpr char kStoreTenant[] = "kvd.objects";
inline constexpr uint64_t kPayloadAlignment = 256;

// xxhash64 of the key, seed 0 (ObjectHeader::key_hash).
uint64_t KeyHash(std::string_view key);
// OK, or kInvalidArgument saying how `key` breaks the key rule
// (nanokv/object_header.h).
Status CheckKey(std::string_view key);

// OK, or kInvalidArgument naming object_store.host_tier when `devices`
// host tiers of config.host_tier bytes each are more than this machine's
// memory: refused at start rather than failing once objects land there.
Status CheckHostTier(const ObjectStoreConfig& config, int devices);

class ObjectIndex {
 public:
  // Takes the configured share of every device's pool from `node` (as tenant
  // kStoreTenant), maps it in kvd and zeroes the header arenas.
  // kInvalidArgument for a share under header pages + 1 page, bad watermarks;
  // kResourceExhausted when the pool cannot give the share. `backend` and
  // `node` must outlive the store.
  // With `restart` (a kvd restart, object_index_restore.cc): a device whose
  // previous store has the same geometry and whose pages all come back is
  // that store again: the pages mapped at the same offsets, its header pages
  // read once (one device-to-host copy each: start-up, not serving) and
  // scanned (ScanStore), its objects back READY, its writes held until
  // write_timeout (from `now_ns`), the rest reclaimed and every header slot
  // not holding a READY object written free at the last epoch. Any other
  // device starts empty, with what came back as plain pages.
  static Result<std::unique_ptr<ObjectIndex>> Create(gpu::Backend& backend, NodeState& node,
                                                     const ObjectStoreConfig& config,
                                                     StoreRestart* restart = nullptr, uint64_t now_ns = 0);
  // Unmaps the store and gives its pages back to `node`; removes the
  // object journal (a stop: the store's memory goes with kvd).
  ~ObjectIndex();

  // Makes and installs the object journal at `path` (object_journal.h): the
  // layout and every live object now, kept up to date from then on.
  Status StartJournal(const std::string& path);

  // The plan API. OpenForWrite: kAlreadyExists for a live key; kInvalidArgument
  // for a bad key or bytes_total 0; kNotFound for a device kvd does not serve;
  // kResourceExhausted when eviction cannot make room. preferred_device -1:
  // the device with the most free payload space.
  // `owner`: the producer's uid (SO_PEERCRED; root's and kvd's uid's too),
  // or kOperator for kvd's own callers (the cluster master's orders). The
  // owner is the plan's writer: it alone commits, revokes and gets write
  // fds; it and the operator remove and pin the object. kvd cannot tell
  // which process the master gave its plan to, so such a plan carries a
  // fresh random write_secret, which its writer shows for write fds.
  // kOperator as a requester (Remove, SetPin, ReleaseLease) is the
  // operator: root, kvd's uid (NodeServer::ObjectPeer) and kvd's own callers.
  static constexpr uint32_t kOperator = kKvdCallers;
  Result<ObjectPlan> OpenForWrite(std::string_view key, uint64_t bytes_total, int preferred_device,
                                 uint64_t now_ns, uint32_t owner = kOperator);
  // WRITING -> READY. kNotFound: no such key; kFailedPrecondition: stale
  // epoch (the plan's object is gone), already READY (commit twice), revoked;
  // kPermissionDenied when `writer` (a uid, or kOperator) is not the
  // object's owner. READY on the device is the producer's to store, before
  // it commits (libkv does); kvd stores nothing.
  Status Commit(std::string_view key, uint32_t epoch, uint64_t now_ns, uint32_t writer = kOperator);
  // RESERVED/WRITING -> DEAD -> freed. kFailedPrecondition for a READY object
  // (use Remove) or a stale epoch; kPermissionDenied as Commit.
  Status Revoke(std::string_view key, uint32_t epoch, uint64_t now_ns, uint32_t writer = kOperator);
  // READY -> DEAD -> freed. kFailedPrecondition while leased or being read,
  // or while still being written (Revoke that). kPermissionDenied when
  // `requester` (a uid) is neither the object's owner nor kOperator.
  Status Remove(std::string_view key, uint64_t now_ns, uint32_t requester = kOperator);
  // A READY object's location; updates last_access. kFailedPrecondition if
  // it is not READY yet. An object in the host tier answers a plan naming
  // the host tier's pages (ObjectPlan::tier) and is queued for promotion,
  // so the next get reads it from the store.
  Result<ObjectPlan> GetLocation(std::string_view key, uint64_t now_ns);

  // Read leases: the object stays (no evict, no remove) until ReleaseLease
  // or lease_ttl after `now_ns`. kFailedPrecondition if not READY;
  // kResourceExhausted (naming object_store.max_leases) when `holder` (the
  // client's uid) holds max_leases unexpired leases already. Expired leases
  // of every object are pruned first, so they never count or pile up.
  // `connection` (a connection's serial; 0: none): its close ends the
  // lease (EndConnectionLeases), so a reader killed mid-copy holds nothing.
  // kHeld (with a connection): no lease_ttl (expires_ns UINT64_MAX), a view
  // of the object in a live process.
  enum class LeaseTerm { kTimed, kHeld };
  Result<LeaseExpiry> AcquireLease(std::string_view key, uint32_t holder, uint64_t now_ns, uint64_t connection = 0,
                                   LeaseTerm term = LeaseTerm::kTimed);
  // kNotFound for an unknown key or lease id (already released or expired).
  // `holder`: the releaser's uid; only the lease's holder (or kOperator)
  // may end it, kPermissionDenied otherwise (a reader's lease is what keeps
  // its object's space from reuse while it copies).
  Status ReleaseLease(std::string_view key, uint64_t lease_id, uint64_t now_ns, uint32_t holder = kOperator);
  // Ends leases by id alone, under one lock (a batch get's, views'): as
  // ReleaseLease each. Returns how many were held and ended.
  size_t ReleaseLeases(std::span<const uint64_t> lease_ids, uint64_t now_ns, uint32_t holder = kOperator);
  // AcquireLease and GetLocation of one key under one lock: a batch get's
  // item (kvd's handler leases 64 at a time, and the second lock and
  // lookup were a third of an item's cost).
  struct LeasedLocation {
    LeaseExpiry lease;
    ObjectPlan plan;
  };
  Result<LeasedLocation> LeaseAndLocate(std::string_view key, uint32_t holder, uint64_t now_ns, uint64_t connection = 0,
                                        LeaseTerm term = LeaseTerm::kTimed);
  // A READY object's location for a reader that checks its copy against
  // the read table afterwards (read_table.h): no lease, its entry published.
  // nullopt where the table does not cover it (the host tier, or no table):
  // that read takes a lease.
  Result<std::optional<ObjectPlan>> LocateUnleased(std::string_view key, uint64_t now_ns);
  // The read table shared with a reader: a read-only fd (the caller's),
  // `entries` words per device, the devices' tables in `devices` order
  // (ordinals). kUnimplemented where kvd has none.
  struct ReadTableShare {
    int fd = -1;
    uint32_t entries = 0;
    uint32_t buckets = 0;  // the location directory's
    std::vector<int> devices;
  };
  Result<ReadTableShare> ShareReadTable() const;
  // Ends every lease of `connection` (it closed), timed or held. Returns how many.
  size_t EndConnectionLeases(uint64_t connection);
  // kPermissionDenied when `requester` is neither the owner nor kOperator.
  Status SetPin(std::string_view key, ObjectPin pin, uint32_t requester = kOperator);
  // The plan of a write in progress (RESERVED/WRITING) at `epoch`, for kvd's
  // transfer agent (object_index_remote.cc). kNotFound: no such key;
  // kFailedPrecondition: another epoch, or not being written.
  Result<ObjectPlan> WritingPlan(std::string_view key, uint32_t epoch);

  // Reclaims writes past write_timeout and drops expired leases. Returns how
  // many writes it reclaimed. kvd calls it from its timer; every
  // OpenForWrite calls it for its device too.
  size_t Reclaim(uint64_t now_ns);
  // Evicts READY objects of `device` (-1: every device) by policy until
  // `bytes` are freed (0: until usage is at the low watermark). Returns the
  // bytes freed. (kvctl evict.)
  Result<uint64_t> Evict(int device, uint64_t bytes, uint64_t now_ns);

  // The host tier (object_store.host_tier; object_index_tier.cc, its moves
  // object_index_moves.cc). A move between tiers is three steps: Begin
  // (under the lock: pick the object, reserve space at the target, mark it
  // moving), CopyMove (without the lock: the bytes, and a promotion's READY
  // header), FinishMove (under the lock: the object switches tier and its
  // old space is freed). The object stays readable where it is until
  // FinishMove; a remove meanwhile frees the reservation and FinishMove
  // then does nothing, and a lease taken meanwhile cancels a demotion (its
  // reader reads the store's copy), so no race loses an object or its
  // bytes. Moves run on kvd's tier worker (tier_worker.h), never on the
  // request loop, and copy on the device's tier stream
  // (Device::tier_stream), never the default stream.
  struct TierMove {
    std::string key;
    size_t d = 0;        // device index
    uint32_t epoch = 0;  // the object's, when the move began
    Tier to = Tier::kGpu;
    uint64_t from = 0;    // payload offset where it is
    uint64_t target = 0;  // payload offset where it goes
    uint64_t bytes = 0;
    uint64_t header_offset = 0;  // a promotion's header, in the store range
    ObjectHeader header{};       // what a promotion writes there, READY
  };
  bool has_host_tier() const { return config_.host_tier != 0; }
  // The eviction order's next victim of `device`'s store, on its way to the
  // host tier (host-tier victims dropped to make room); nullopt if none
  // may go or the host tier cannot take it.
  std::optional<TierMove> BeginDemotion(int device, uint64_t now_ns);
  // A host-tier object of `device` a get asked for, on its way back when
  // the store has room under high_watermark without evicting; nullopt if none.
  std::optional<TierMove> BeginPromotion(int device, uint64_t now_ns);
  // Queues the move's copies on its device's tier stream (a promotion's
  // READY header after its bytes) and waits for them.
  Status CopyMove(const TierMove& move);
  // True when the object switched tier; false when the move was cancelled
  // (removed, leased, or the copy failed: `copied` not OK).
  bool FinishMove(const TierMove& move, const Status& copied, uint64_t now_ns);
  // The tier worker's round: on every device, demotions while the store is
  // over low_watermark (and one more for a write refused under it), then
  // the promotions gets asked for. Returns the
  // objects moved.
  size_t RunTierWork(uint64_t now_ns);
  // Called (with the lock held: it must be quick) when a get finds an
  // object in the host tier: the tier worker's wake-up. nullptr: none.
  void SetTierKick(std::function<void()> kick);

  // Every object, by key; ages and lease times are as of `now_ns`.
  std::vector<ObjectEntry> List(uint64_t now_ns) const;
  std::vector<StoreDeviceStats> Stats() const;
  // The device memory of a device's store range mapped in kvd (for tests).
  Result<uintptr_t> StoreBase(int device) const;
  // Every store page: (device ordinal, page id), in range order per device.
  std::vector<std::pair<int, PageId>> StorePages() const;
  // Every host tier page (device ordinal, page number, its fd, which the
  // host tier keeps), for the page keeper.
  std::vector<std::tuple<int, PageId, int>> HostTierPages() const;
  // A new read-only fd of page `id` of `device`'s host tier (a sealed
  // memfd): what a reader of a host-tier plan maps. The caller owns it.
  // kNotFound for a device without a host tier or a page outside it.
  Result<int> HostTierReadOnlyFd(int device, PageId id) const;
  // Whether `id` is one of the store's pages on `device`: the only pages
  // kvd hands out by an object_pages request.
  bool OwnsPage(int device, PageId id) const;
  // Who asks for a write fd of a store page (object_pages with write) and
  // for which plan: the asker's uid, the plan's key and epoch, and the
  // write_secret its plan carried (a plan the master ordered).
  struct WriteClaim {
    uint32_t uid = 0;
    std::string_view key;
    uint32_t epoch = 0;
    uint64_t secret = 0;
    uint64_t slab_id = 0;  // nonzero: the asker's slab instead of a plan (key empty)
  };
  // Whether the claim's asker may have an fd that writes store page `id` of
  // `device`: the claim names an open plan (RESERVED/WRITING) on `device`,
  // the page holds that plan's header or payload, and the asker is its
  // writer (its owner uid; for kvd's own callers' plan, whoever shows its
  // write_secret). Everyone else reads store pages only. kPermissionDenied
  // naming the page and why otherwise. When OK the page is held by the
  // asker's uid from then on: it stays its owner's (reused only for the
  // owner's objects) until ReleaseHolder(uid).
  // A claim naming a slab: the asker's live slab on `device` has the page.
  Status LendWritablePage(int device, PageId id, const WriteClaim& claim);
  // `holder` (a uid, or kOperator) holds no page any more: kvd's last
  // connection of that uid is gone (as a tenant's recycle charge ends with
  // its connection). Its empty held pages return to shared use.
  void ReleaseHolder(uint32_t holder);
  // Pages `holder` holds (all devices), for tests and stats.
  size_t held_pages(uint32_t holder) const;
  // A new fd of a store page (from its exported fd, not taken) that reads
  // only: the backend's ExportReadOnly. The caller owns it.
  Result<int> ReadOnlyFd(int exported_fd) const { return backend_.ExportReadOnly(exported_fd); }
  // REQUIRES: `node` is not being changed by another thread.
  Status CheckInvariants(const NodeState& node) const;
  // `listener` hears of every object that becomes READY or goes, in order.
  // It runs with the index's lock held: it must be quick and must not call
  // the index. nullptr: nobody listens.
  void SetEventListener(std::function<void(const ObjectEvent&)> listener);
  const ObjectStoreConfig& config() const { return config_; }
  // Leases held (expired ones not yet pruned included), all holders or one.
  size_t lease_count() const;
  size_t lease_count(uint32_t holder) const;

  // v2 slabs (issue 34; object_index_slabs.cc says what a slab holds and
  // how it is counted). GrantSlab: kInvalidArgument for sizes out of range;
  // kNotFound for an unknown device; kResourceExhausted naming
  // object_store.max_slabs, max_objects or high_watermark. `held_by`: the
  // asking connection's serial.
  Result<SlabGrant> GrantSlab(const SlabRequest& request, uint32_t owner, uint64_t held_by, uint64_t now_ns);
  // Ends slab `id` after reading its ring once more (what was announced
  // stands). kNotFound for an unknown id; kPermissionDenied when
  // `requester` (a uid, or kOperator) is not its owner.
  Status ReleaseSlab(uint64_t id, uint32_t requester, uint64_t now_ns);
  // Ends every slab connection `held_by` holds (it closed). Returns how many.
  size_t ReleaseHeldSlabs(uint64_t held_by, uint64_t now_ns);
  // Reads every slab's ring (at most `max_records` records each) and
  // indexes what it announces; ends slabs past slab_ttl and poisoned ones.
  // Returns the objects indexed. kvd's loop calls it every turn.
  size_t PollSlabs(uint64_t now_ns, size_t max_records = kSlabPollRecords);
  static constexpr size_t kSlabPollRecords = 256;
  SlabCounters slab_counters() const;
  TenantId tenant() const { return tenant_; }

 private:
  using Object = StoredObject;
  // A page of header slots, one owner's at a time (or spare).
  struct HeaderPage {
    uint32_t page = 0;           // index in the store range
    bool owned = false;
    uint32_t owner = 0;
    uint32_t live = 0;           // objects with a slot here
    uint32_t holds = 0;          // uids holding it (a write fd went to them)
    std::vector<uint32_t> free;  // slots in the page, a stack
  };
  struct Device {
    int ordinal = 0;
    // Its store pages mapped in kvd (offsets in plans are into it); null
    // until mapped in Create.
    std::unique_ptr<PayloadPlacement> range;
    std::vector<PageId> sorted_pages;  // the range's pages, sorted (OwnsPage)
    uint32_t arena_pages = 0;    // the header arena at the front
    uint32_t slots_per_page = 0;  // usable slots of a header page
    uint32_t max_objects = 0;    // live objects at once
    // Header pages by ordinal; a slot is ordinal * slots_per_page + its
    // index in the page. Never shrinks: a payload page once made a header
    // page stays one, so a slot's epochs keep growing.
    std::vector<HeaderPage> headers;
    std::unordered_map<uint32_t, uint32_t> header_at;  // store page index -> ordinal
    std::vector<uint32_t> spare_headers;  // ordinals owned by nobody (all slots free)
    std::unordered_map<uint32_t, std::set<uint32_t>> header_room;  // owner -> its ordinals with a free slot
    // By slot: the last epoch issued on it (0: none yet). Epochs come from
    // one counter per device: unique on it and growing per slot, which the
    // producer's header CAS relies on (a stalled writer's plan is older).
    std::vector<uint32_t> slot_epochs;
    uint32_t last_epoch = 0;
    std::optional<OwnedSpace> payload;  // offsets are after the arena
    EvictionOrder evictable{EvictionPolicy::kLru};   // READY objects; Create sets the configured policy
    std::set<std::pair<uint64_t, Object*>> writing;  // by deadline
    uint32_t objects = 0;
    uint64_t evictions = 0;
    uint64_t reclaimed_writes = 0;
    std::vector<uint32_t> free_records;  // object journal records, a stack
    uint32_t recovered_objects = 0, recovered_writes = 0, refused_records = 0;
    uint64_t recovered_bytes = 0;
    uint32_t slab_slots = 0;  // header slots slabs hold and have not announced
    // The host tier under the store (object_store.host_tier); null: none.
    std::unique_ptr<HostRange> host;
    // The stream the tier worker's copies to and from it run on (CopyMove),
    // non-blocking: they never wait for kvd's other device work (the
    // transfer agent's) nor make it wait. Destroyed with the index.
    gpu::StreamHandle tier_stream;
    std::optional<OwnedSpace> host_space;
    EvictionOrder host_order{EvictionPolicy::kLru};
    uint32_t host_objects = 0;
    uint64_t demotions = 0, promotions = 0, host_evictions = 0, gpu_hits = 0, host_hits = 0;
    std::set<Object*> wanted;  // host-tier objects a get asked for, to promote
    // A write found no room (told "ask again"): the worker demotes one more
    // victim even under low_watermark (owners' pages, a payload page made a
    // header page or holes can refuse a write there).
    bool room_wanted = false;
  };

  ObjectIndex(gpu::Backend& backend, NodeState& node, const ObjectStoreConfig& config);
  // object_index_restore.cc. The device's pages into `taken`, in range
  // order: a previous store's (all adopted: true) or fresh ones granted,
  // with what was adopted.
  Result<bool> TakePages(Device& device, uint32_t pages, std::vector<PageId>& taken, const JournaledStore* previous,
                         StoreRestart* restart);
  // Rebuilds device d's index from its previous store (Create's comment);
  // `host_back`: its host tier came back whole (AddHostTier), so its
  // host-tier objects may return.
  Status Restore(size_t d, const JournaledStore& previous, uint64_t now_ns, bool host_back = false);
  // Puts one scanned object in the index: READY, or a write held until
  // `deadline_ns`. False (nothing changed) when its space cannot be had.
  bool RestoreObject(size_t d, const JournaledObject& found, bool ready, uint64_t now_ns, uint64_t deadline_ns);
  Result<size_t> DeviceIndex(int device) const;
  size_t PickDevice() const;
  ObjectPlan PlanOf(const Object& object) const;
  // A host-tier object's plan: its host-tier pages, no header.
  ObjectPlan HostPlanOf(const Object& object) const;
  // kPermissionDenied for `what` ("commit", "revoke") of `object` by
  // `writer` unless it is the object's owner.
  Status CheckWriter(const Object& object, uint32_t writer, const char* what) const;

  // REQUIRES: mu_ held, for all below.
  // A move of `object` (on device index `d`) to `target` in tier `to`,
  // from where it is now; a promotion adds its header.
  static TierMove MoveOf(const Object& object, size_t d, Tier to, uint64_t target);
  // GetLocation of an object found READY.
  ObjectPlan LocateLocked(Object& object, uint64_t now_ns);
  // AcquireLease of `key`, after pruning expired leases.
  Result<std::pair<Object*, LeaseExpiry>> LeaseLocked(std::string_view key, uint32_t holder, uint64_t now_ns,
                                                      uint64_t connection, LeaseTerm term);
  // Frees an object's payload and slot and drops it from the index.
  // Invalidates `object`.
  void Drop(Object* object);
  // state -> DEAD in the index, tell the listener `why`, then Drop.
  void Kill(Object* object, ObjectEvent::Kind why);
  void Notify(const Object& object, ObjectEvent::Kind kind);
  size_t ReclaimLocked(size_t d, uint64_t now_ns);
  // Evicts from device d by policy until `target` payload bytes are in use
  // or nothing more may go. Returns the bytes freed.
  uint64_t EvictDownTo(size_t d, uint64_t target, uint64_t now_ns);
  // Evicts the eviction order's next victim on device d (it drops it;
  // host-tier victims once the store has none). False if none may go.
  bool EvictOne(size_t d, uint64_t now_ns);
  // Drops the host tier's next victim on device d. False if none may go.
  bool EvictHostOne(size_t d, uint64_t now_ns);
  // The eviction order the object is in (or would be): its tier's.
  EvictionOrder& OrderOf(const Object& object);
  // Frees what a move of `object` reserved at its target; the move ends.
  void ReleaseMove(Object* object);
  // `object` goes while its move copies: what the move reserved stays
  // reserved (the copy may still write there) until FinishMove frees it.
  void OrphanMove(const Object& object);
  bool OverLowWatermark(size_t d) const;
  // A free header slot for `owner` without evicting; kResourceExhausted if none.
  Result<uint32_t> TakeFreeSlot(Device& device, uint32_t owner);
  // Maps `device`'s host tier (object_store.host_tier bytes) and its space:
  // the previous kvd's (its memfds in `restart`, the same size) when
  // `previous` had one, else fresh. True when the previous one came back.
  Result<bool> AddHostTier(Device& device, const JournaledStore* previous = nullptr, StoreRestart* restart = nullptr);
  // A move's object is journaled at its new place: a free record first,
  // then the old one cleared (a kill in between leaves both, never neither).
  void JournalMove(Device& device, Object* object);

  // Store space on device d when it has a host tier: its victims move down
  // on the tier worker, never dropped here, so a write finding no room
  // answers kUnavailable (ask again) while some victim can move.
  Result<uint64_t> AllocateOverHostTier(size_t d, uint64_t bytes, uint32_t owner, uint64_t now_ns);
  // Space in device d's host tier, dropping host-tier victims for it.
  Result<uint64_t> AllocateHost(size_t d, uint64_t bytes, uint32_t owner, uint64_t now_ns);
  Result<uint64_t> AllocatePayload(size_t d, uint64_t bytes, uint32_t owner, uint64_t now_ns);
  size_t AdoptHeldPages(size_t d, uint32_t owner);  // OwnedSpace::Adopt of d's empty pages `owner` alone holds
  // Header slots (object_index_headers.cc). A free slot in a header page of
  // `owner`'s, evicting when none can be had; kResourceExhausted naming
  // object_store.max_objects or the payload space otherwise.
  Result<uint32_t> AllocateSlot(size_t d, uint32_t owner, uint64_t now_ns);
  // One more header page for `owner`: a spare one, or a payload page made
  // one (zeroed). kResourceExhausted when neither is left.
  Result<uint32_t> AdoptHeaderPage(Device& device, uint32_t owner);
  void FreeSlot(Device& device, uint32_t slot);
  // A header page nobody writes and nothing lives in becomes spare.
  void MaybeSpareHeader(Device& device, uint32_t ordinal);
  uint64_t HeaderOffset(const Device& device, uint32_t slot) const;
  // The store pages (indices in the store range) an object touches: its
  // header's, and the first and last of its payload.
  struct ObjectPages {
    uint64_t header = 0;
    uint64_t first = 0;
    uint64_t last = 0;
  };
  ObjectPages PagesOf(const Device& device, const Object& object) const;
  // The owner of store page `index` (header or payload); nullopt if none.
  std::optional<uint32_t> PageOwner(const Device& device, uint64_t index) const;
  uint32_t NextEpoch(Device& device);
  // Invariant 5, for CheckInvariants: the object's pages are its owner's;
  // device d's header pages agree with the objects, the holds and the
  // spare list.
  Status CheckOwner(const Device& device, const Object& object) const;
  Status CheckHeaderPages(size_t d) const;
  // The tiers' share of CheckInvariants (object_index_tier.cc): per device
  // index, the host tier's allocated bytes, READY candidates and objects.
  struct TierCounts {
    explicit TierCounts(size_t devices) : host_allocated(devices), host_candidates(devices), host_objects(devices) {}
    std::vector<uint64_t> host_allocated;
    std::vector<uint32_t> host_candidates, host_objects;
  };
  // A host-tier object, or one moving: its space and order; a move's
  // reservation counted in `slot_used` and `allocated` (the store's).
  Status CheckTiers(const Object& object, std::vector<bool>& slot_used, uint64_t& allocated, TierCounts& tiers) const;
  Status CheckHostSpace(size_t d, const TierCounts& tiers) const;

  gpu::Backend& backend_;
  NodeState& node_;
  const ObjectStoreConfig config_;
  size_t page_bytes_ = 0;
  TenantId tenant_ = 0;
  mutable std::mutex mu_;
  std::vector<Device> devices_;
  ObjectTable table_;
  // Pages each uid holds: (device index, store page index).
  std::unordered_map<uint32_t, std::set<std::pair<size_t, uint64_t>>> holds_;
  std::function<void(const ObjectEvent&)> listener_;
  std::function<void()> tier_kick_;
  // Reservations of moves whose object went mid-copy: (device index, target
  // tier, offset, slot), freed by their FinishMove.
  struct Orphan {
    size_t d;
    Tier to;
    uint64_t offset;
    uint32_t slot;
  };
  std::vector<Orphan> orphans_;
  SlabTable slabs_;
  // Null where the kernel cannot seal one (every read then takes a lease).
  std::unique_ptr<ReadTable> read_table_;
  // A READY store copy becomes readable without a request (its entry and
  // directory listing) / stops, before its space or record goes elsewhere. mu_ held.
  void PublishRead(const Object& object);
  void WithdrawRead(const Object& object);
  // CheckInvariants' share: an entry holds an epoch only for the READY store
  // copy of the object with that record and epoch.
  Status CheckReadTable() const;

  // object_index_slabs.cc. REQUIRES: mu_ held.
  // Indexes one announced object of `slab`; an error poisons the slab.
  Status AdoptAnnounced(GrantedSlab& slab, const ipc::AnnouncedObject& announced, uint64_t now_ns);
  // Reads `slab`'s ring (at most `max` records); false when it is poisoned.
  bool ReadRing(GrantedSlab& slab, size_t max, uint64_t now_ns);
  // Gives back what `slab` never announced and forgets it.
  void EndSlab(uint64_t id, const char* why);
  // Header slots for a slab: `count` consecutive ones in a header page of
  // `owner`'s taken whole. The first slot, or kResourceExhausted.
  Result<uint32_t> TakeSlabSlots(Device& device, uint32_t owner, uint32_t count);
  Status LendSlabPageLocked(size_t d, uint64_t index, const WriteClaim& claim);  // LendWritablePage naming a slab
  // The slabs' share of CheckInvariants: their payload in `allocated`,
  // their slots in `slot_used`, per device index.
  Status CheckSlabs(std::vector<uint64_t>& allocated, std::vector<std::vector<bool>>& slot_used) const;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_OBJECT_INDEX_H_
