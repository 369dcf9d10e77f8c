// kvd's model of the node: one page pool per device, the tenants attached to
// it, their tenant groups, their grants and limits. Pure logic over the pools
// and the backend: no sockets, so every rule here is tested directly, and the
// server (node_server.h) only translates messages into these calls.
//
// Words: a *tenant* is one attached engine connection; a *group* is a set of
// tenants that may share pages (docs/ARCHITECTURE.md, "kvd"). A page id is *group-owned* from the
// first time it is granted to a tenant of that group until it is recycled.
//
// Free pages are the pool's, each group's free list included (page_pool.h):
// NodeState keeps who holds a page, never which pages are free.
//
// Invariants (CheckInvariants() verifies them; tests call it after each step):
//   1. A page is owned by at most one group; every holder of a page is a
//      tenant of its owner group. For each device the pool grants exactly
//      the held pages (held = pages with at least one holder), to their
//      owner group, and keeps every other created page free: free (its free
//      stack + group free lists) + held == created pages.
//   2. A page reaches a tenant of another group only after a recycle (release
//      + fresh create, generation + 1): its old memory never crosses groups.
//   3. A tenant's used pages are exactly the pages listing it as a holder.
//   4. A tenant over its limit is given no new page until it is back under.
//   5. A page recycled away while tenants of its old group had it imported
//      stays charged: to the device, once, as memory no new
//      page may be made in (the pool's held_after_recycle count), and to each
//      such tenant's quota, until that tenant says it dropped it (ForgetDone)
//      or detaches. Device ledger and tenants' lists agree exactly.
#ifndef NANOKV_DAEMON_NODE_NODE_STATE_H_
#define NANOKV_DAEMON_NODE_NODE_STATE_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/node/page_journal.h"
#include "daemon/node/page_pool.h"
#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

using TenantId = uint32_t;

enum class TenantState : uint8_t { kAttached = 1, kReclaiming = 2 };

struct AttachParams {
  std::string name;
  std::string group;        // empty: "default"
  pid_t pid = 0;
  uid_t uid = 0;
  uint64_t limit_bytes = 0;  // 0: the node's default limit
  double limit_fraction = 0;  // used when limit_bytes is 0 and this is > 0
  // kvd's own tenant (the object store): set only by kvd's code, never from
  // a message. Its group is kvd's, apart from any engine group of the same
  // name, and its pages die with kvd: the journal never lists them as held,
  // since no engine could hand them back after a restart.
  bool kvd_owned = false;
};

struct Tenant {
  TenantId id = 0;
  std::string name;
  std::string group;
  int group_index = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  uint64_t limit_bytes = 0;
  // The most the engine may raise its own limit to: limit_ceiling from the
  // config, or what the operator last set (kvctl limit). Never engine-set.
  uint64_t ceiling_bytes = 0;
  bool ceiling_by_operator = false;  // the operator set it (else the config)
  bool kvd_owned = false;  // AttachParams::kvd_owned: no operator may limit or evict it
  bool default_limit = false;  // it asked for none: a new default limit (SIGHUP) applies to it
  TenantState state = TenantState::kAttached;
  uint64_t attach_unix_ns = 0;
  uint64_t last_activity_unix_ns = 0;
  std::vector<uint32_t> used_pages;  // per device index
  // Per device: page id -> generation this tenant's process has imported.
  std::vector<std::map<PageId, uint32_t>> imported;
  // Per device: pages recycled away from its group that it was told to
  // forget and has not said it dropped, in the order it was told (id, the
  // old generation). Charged to its quota and to the device's capacity.
  std::vector<std::vector<std::pair<PageId, uint32_t>>> held_after_recycle;
  // Per device: the bytes its engine said it keeps mapped ahead of need
  // (ReserveReport), as sent; shown clamped to what it holds (ReserveBytes).
  std::vector<uint64_t> reported_reserve_bytes;
};

// One page of a grant as kvd decided it, in the order of the request: what
// the engine receives (its nanokv::GrantedPage: id, generation) plus whether
// the reply must carry the page's fd.
struct PageGrant {
  PageId id = 0;
  uint32_t generation = 0;
  bool needs_fd = false;  // the tenant's process has not imported this generation
};

// Something kvd must tell a tenant's engine after a call.
struct Notice {
  enum class Kind { kReclaim, kForget };
  Kind kind;
  TenantId tenant;
  int device = -1;                 // kForget: the device; kReclaim: -1 (any)
  uint32_t pages = 0;              // kReclaim: how many to give back
  uint64_t limit_bytes = 0;        // kReclaim: the limit to get under
  std::vector<PageId> page_ids;    // kForget: recycled ids to drop
};

struct DeviceCounts {
  int device = 0;
  size_t capacity_pages = 0;
  size_t created_pages = 0;  // the pool's pages + those adopted without a handle
  size_t free_pages = 0;     // pool free + group free lists
  size_t held_pages = 0;     // granted to at least one tenant
  size_t group_free_pages = 0;
  size_t reserve_pages = 0;
  size_t recovering_pages = 0;  // held back for engines of a dead kvd (Adopt)
  // Of held_pages: adopted without a handle (handed back by id after a kvd
  // restart); their holders keep them, nobody else can be given them.
  size_t handleless_pages = 0;
  // Old pages recycled away that an engine may still hold (told to forget,
  // not yet said it did): memory in use that no tenant's grant shows.
  size_t held_after_recycle_pages = 0;
};

// One page an engine hands back after a kvd restart, by id and generation;
// `fd` is -1, or (older engines) an fd of the page, which Adopt takes.
struct AdoptPage {
  PageId id = 0;
  uint32_t generation = 0;
  int fd = -1;
};

struct AdoptResult {
  std::vector<PageId> adopted;
  std::vector<PageId> refused;
  std::string reason;  // why the first refused page was refused
};

struct NodeOptions {
  std::vector<PagePoolConfig> pools;         // one per served device, all one page size
  uint64_t default_limit_bytes = 0;          // 0: default_limit_fraction, else capacity
  double default_limit_fraction = 0;         // of the node's capacity, when > 0
  // limit_ceiling: the most an engine may ask for itself (at attach or with
  // set_limit). 0: limit_ceiling_fraction, else the capacity.
  uint64_t limit_ceiling_bytes = 0;
  double limit_ceiling_fraction = 0;
  // What a dead kvd's page journal says engines still hold: those ids are
  // held back from the pools until their engines hand them back (Adopt) or
  // until ExpireRecovery. Pages of a device no longer served, of another page
  // size, or beyond the capacity are not held back (logged).
  std::optional<Recovery> recovery;
};

class NodeState {
 public:
  // `backend` must remain live while the NodeState exists (its pools use it).
  static Result<std::unique_ptr<NodeState>> Create(gpu::Backend& backend,
                                                   const NodeOptions& options);
  ~NodeState();

  size_t page_bytes() const { return page_bytes_; }
  size_t device_count() const { return pools_.size(); }
  int device_ordinal(size_t index) const { return pools_[index]->device(); }
  uint64_t capacity_bytes() const;

  // kAlreadyExists for a name a live tenant has; kInvalidArgument for a bad one.
  Result<TenantId> Attach(const AttachParams& params, uint64_t now_unix_ns);
  // Gives back every page the tenant holds (engine detached or died).
  Status Detach(TenantId tenant);

  // Grants `count` pages of device ordinal `device`, all or none.
  // kResourceExhausted names the limit that refused it (the tenant's or the
  // device's capacity); the backend's error if a page cannot be created.
  Result<std::vector<PageGrant>> Grant(TenantId tenant, int device, uint32_t count,
                                       uint64_t now_unix_ns);
  // Adds this tenant as a holder of pages its group already owns (held by
  // another tenant of the group, or on the group's free list): the way two
  // engines of one group share bytes. All or none; counts against the limit.
  // kPermissionDenied for a page owned by another group.
  Result<std::vector<PageGrant>> Share(TenantId tenant, int device, std::span<const PageId> ids,
                                       uint64_t now_unix_ns);
  // Gives pages back, all or none: every id must be held by this tenant.
  Status Return(TenantId tenant, int device, std::span<const PageId> ids, uint64_t now_unix_ns);
  // Who asks for a limit: the engine itself may lower its limit, or raise it
  // up to its ceiling; the operator (kvctl, root or kvd's uid) sets limit
  // and ceiling together.
  enum class LimitSetter { kEngine, kOperator };
  // Sets a tenant's limit (clamped to the node's capacity, with a warning);
  // 0 means what it means at attach: the node's default limit. Below its
  // use, the tenant goes to kReclaiming and a kReclaim notice is queued. An
  // engine asking above its ceiling gets kPermissionDenied naming the
  // ceiling and who set it (limit_ceiling, or kvctl limit), and its limit
  // stays; a ceiling that is the capacity clamps instead (nothing to defend).
  Result<uint64_t> SetLimit(TenantId tenant, uint64_t limit_bytes,
                            LimitSetter by = LimitSetter::kEngine);
  // The operator's limits outlive the tenant: each one set (kOperator, not 0)
  // is kept by tenant name, and a tenant attaching under that name, whatever
  // its uid, gets it as its ceiling and at most it as its limit, until the
  // operator lifts it (a limit of 0, attached or not). Names are the
  // clients' to choose, so at most kMaxOperatorLimits are kept: past it the
  // oldest of a name not attached now is forgotten, with a warning.
  static constexpr size_t kMaxOperatorLimits = 1024;
  // Forgets the operator's limit kept for `name`; false if none was kept.
  bool LiftOperatorLimit(const std::string& name);
  size_t operator_limits() const { return operator_limits_.size(); }
  // A new default limit (kvd's SIGHUP reload): applies to tenants attaching
  // from now on and to every tenant whose limit is the default (it asked for
  // none, or was set to 0), which may then have to reclaim. Returns their names.
  std::vector<std::string> SetDefaultLimit(uint64_t bytes, double fraction);
  // Asks a tenant to give back `pages` pages without changing its limit
  // (kvctl evict); 0 means all it holds.
  Status Evict(TenantId tenant, uint32_t pages);

  // The tenant says its process dropped these recycled-away pages (it
  // unmapped them and closed their fds after a forget notice): their charge
  // ends. Ids it was not told to forget are ignored (a late or repeated
  // word changes nothing); returns how many charges ended.
  Result<size_t> ForgetDone(TenantId tenant, int device, std::span<const PageId> ids);
  // The tenant's engine keeps `bytes` of its pages on `device` mapped ahead
  // of need (its reserve): shown, never counted. kNotFound for an unknown
  // tenant or device.
  Status ReportReserve(TenantId tenant, int device, uint64_t bytes);
  // Pages of `tenant` recycled away and not yet dropped, all devices.
  size_t HeldAfterRecyclePages(const Tenant& tenant) const;

  // A new fd of a granted page, the caller's to send and close
  // (PagePool::TakeFd): the one exported when the page was created, the
  // first time, else a fresh export. kvd keeps no fd of a page at rest on
  // cuda and hip (fds would cap a node of GPUs), adopted pages aside.
  Result<int> PageFd(int device, PageId id);
  // Page `id`'s generation now (0 for no such page): what the page keeper
  // records, for the next kvd's adoption (node_state_recovery.cc).
  uint32_t PageGeneration(int device, PageId id) const;
  // Fds the pools keep open now (pages created ahead, adopted pages).
  size_t KeptFds() const;

  // Takes back pages a dead kvd had granted, from an engine that still holds
  // them: a page is adopted if the dead kvd's journal lists it held by this
  // tenant's group at that generation, in the recovery window (a tenant of
  // the group may have adopted it already: then this one becomes a holder
  // too). A page that comes with no fd, of which kvd has no page, is adopted
  // without a handle (PageInfo::handleless); one with an fd becomes a page
  // kvd can grant (older engines). Per page, not all or none: the rest of an
  // engine's KV survives one bad page. Takes every fd. Pages adopted count
  // against the limit; over it, the tenant is asked to reclaim.
  Result<AdoptResult> Adopt(TenantId tenant, int device, std::span<const AdoptPage> pages,
                            uint64_t now_unix_ns);
  // Ends the recovery window: ids still held back join the uncreated pages
  // (their engines did not come back), and no page is adoptable any more.
  // Returns how many were released.
  size_t ExpireRecovery();
  size_t recovering_pages() const;
  // Whether adopts are taken: a journal held pages back and the window has
  // not ended (even if every page was handed back already).
  bool recovery_open() const { return recovery_open_; }

  // Records every page change in `journal` from now on (and writes the whole
  // state into it now). `journal` must outlive this NodeState, or be reset
  // with nullptr first.
  void SetJournal(PageJournal* journal);
  // Whether any page is held or held back: a journal worth keeping at stop.
  bool HoldsPages() const;

  std::vector<Notice> TakeNotices();
  const Tenant* FindTenant(TenantId tenant) const;
  const Tenant* FindTenantByName(const std::string& name) const;
  std::vector<const Tenant*> Tenants() const;
  std::vector<DeviceCounts> Counts() const;
  uint64_t UsedBytes(const Tenant& tenant) const;
  // Its reported reserve, on each device no more than it holds there.
  uint64_t ReserveBytes(const Tenant& tenant) const;
  Status CheckInvariants() const;

 private:
  struct PageInfo {
    int group = -1;                  // owner group index, -1: none yet
    uint32_t generation = 0;
    bool recovering = false;         // held back for Adopt (kvd restart)
    bool journaled = false;          // listed held by the dead kvd's journal: adoptable
                                     // (by its group, in the window) even once adopted
    // Adopted without a handle: handed back by id alone, kvd has no page of
    // it (the pool keeps the id held back). Its holders keep it; it is never
    // granted or shared to anyone else, and its last holder's return
    // uncreates the id.
    bool handleless = false;
    std::vector<TenantId> holders;   // tenants of `group` holding it now
  };
  struct DeviceState {
    std::vector<PageInfo> pages;               // by page id
    size_t held = 0;                           // pages with at least one holder
    size_t recovering = 0;                     // pages held back for Adopt
    size_t handleless = 0;                     // held pages adopted without a handle
    // (page id, old generation) recycled away -> the tenants that may still
    // hold that old page (invariant 5). One charge against the capacity each.
    std::map<std::pair<PageId, uint32_t>, std::vector<TenantId>> held_after_recycle;
  };

  NodeState(gpu::Backend& backend, size_t page_bytes, const NodeOptions& options);
  // The ids of `options.recovery` each pool must hold back, by pool index;
  // sets their PageInfo once devices_ exists (ApplyRecovery).
  std::vector<std::vector<RecoveredPage>> RecoveredByPool(const NodeOptions& options) const;
  void ApplyRecovery(size_t d, const std::vector<RecoveredPage>& pages);
  // OK when `fd` is a handle of page `id` of pool d as kvd holds it.
  Status SamePage(size_t d, PageId id, int fd) const;
  Status AdoptOne(Tenant& tenant, size_t d, const AdoptPage& page, std::string* why);
  // Whether the page's group is kvd's own (AttachParams::kvd_owned).
  bool KvdOwned(const PageInfo& page) const;
  // Writes page `id`'s current state to the journal, if there is one.
  void Journal(size_t d, PageId id);
  // Over its limit (after an adopt): reclaiming, with a notice.
  void ReclaimExcess(Tenant& tenant);
  Result<size_t> DeviceIndex(int device) const;
  Tenant* MutableTenant(TenantId tenant);
  // The index of the group `name` of engines (kvd_owned false) or of kvd's
  // own tenants, made on first use: the two never share an index.
  int GroupIndex(const std::string& name, bool kvd_owned);
  // Takes one page for group `group` on device index `d` from the pool: its
  // own free list, then a never-used page, then another group's free page,
  // recycled (ForgetOldPage runs for it). *held: refused because the
  // recycled page's old memory is still held (invariant 5).
  Result<PageId> TakePage(size_t d, int group, bool* held);
  // A page no tenant holds goes back to its group's free list in the pool
  // (also how a grant that failed part-way undoes its TakePage calls).
  void PutBack(size_t d, PageId id);
  // The pool released the memory of page `id` (another group's free page)
  // for a grant: generation + 1, and the old group's processes are told to
  // drop their handles of it.
  void ForgetOldPage(size_t d, PageId id);
  // Whether page `id` is on group `group`'s free list in the pool.
  bool OnGroupFreeList(size_t d, PageId id, int group) const;
  // Grants page `id`, on its group's free list, to that group again.
  void TakeGroupFree(size_t d, PageId id);
  void QueueForget(TenantId tenant, int device, PageId id);
  // Whether a tenant of page `id`'s group has its current generation
  // imported (the pool's StillHeld, asked before a recycle).
  bool StillHeld(size_t d, PageId id) const;
  // How many of a grant's `count` pages may come from recycles whose old
  // pages are still held: while pages held after recycle will cover what
  // the grant lacks once dropped, none (kResourceExhausted: wait), so a
  // grant asked again never recycles another group's pages for nothing.
  Result<uint32_t> RecyclesAllowed(size_t d, const Tenant& tenant, uint32_t count) const;
  // Ends `tenant`'s charge for the old page (id, generation) of device d;
  // the device's ends with its last holder.
  void DropHeldAfterRecycle(size_t d, TenantId tenant, std::pair<PageId, uint32_t> page);
  size_t Obtainable(size_t d) const;
  void AddHolder(size_t d, PageId id, Tenant& tenant, std::vector<PageGrant>* out);
  void ReleaseHolder(size_t d, PageId id, TenantId tenant);
  // The last holder of a page adopted without a handle let it go: the id is
  // uncreated (a fresh page, new generation, is made under it when needed),
  // and the group's engines that imported it are told to forget it.
  void UncreateHandleless(size_t d, PageId id);
  Status CheckQuota(const Tenant& tenant, uint32_t count) const;
  // A tenant's limit from what was asked: bytes, else a fraction of the
  // capacity, else (both 0) the default limit, else the capacity; clamped to
  // the capacity with a warning naming `tenant`.
  uint64_t ResolveLimit(const std::string& tenant, uint64_t bytes, double fraction) const;
  void MaybeEndReclaim(Tenant& tenant);
  uint64_t ConfigCeiling() const;  // limit_ceiling in bytes, at most the capacity
  // Keeps the operator's `bytes` for the tenant's name (LiftOperatorLimit's comment).
  void KeepOperatorLimit(const Tenant& tenant, uint64_t bytes);

  gpu::Backend& backend_;  // must remain live while the NodeState exists
  size_t page_bytes_;
  uint64_t default_limit_;
  double default_limit_fraction_;
  uint64_t limit_ceiling_;
  double limit_ceiling_fraction_;
  bool recovery_open_ = false;
  std::vector<std::unique_ptr<PagePool>> pools_;
  std::vector<DeviceState> devices_;  // parallel to pools_
  std::map<TenantId, Tenant> tenants_;
  struct Group {
    std::string name;
    bool kvd_owned = false;
  };
  std::vector<Group> groups_;  // by group index
  TenantId next_tenant_ = 1;
  std::vector<Notice> notices_;
  struct OperatorLimit {
    uint64_t bytes = 0;
    uid_t uid = 0;       // the uid of the tenant it was set on (for the log)
    uint64_t order = 0;  // when it was set: the oldest goes first
  };
  std::map<std::string, OperatorLimit> operator_limits_;  // by tenant name
  uint64_t next_limit_order_ = 0;
  PageJournal* journal_ = nullptr;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_NODE_STATE_H_
