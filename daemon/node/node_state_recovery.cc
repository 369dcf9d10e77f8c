// NodeState's part in a kvd restart: the page journal it keeps, the pages a
// dead kvd's journal holds back, and their adoption by the engines that still
// hold them (docs/ARCHITECTURE.md, "kvd restart").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/node/node_state.h"
#include "ops/repeated_warning.h"

namespace nanokv::kvd {

std::vector<std::vector<RecoveredPage>> NodeState::RecoveredByPool(
    const NodeOptions& options) const {
  std::vector<std::vector<RecoveredPage>> out(options.pools.size());
  if (!options.recovery) return out;
  const Recovery& recovery = *options.recovery;
  if (recovery.page_bytes != page_bytes_) {
    spdlog::warn("kvd: the previous kvd used pages of {} bytes, this one {}: {} pages engines "
                 "may still hold cannot be re-adopted",
                 recovery.page_bytes, page_bytes_, recovery.page_count());
    return out;
  }
  for (const Recovery::Device& device : recovery.devices) {
    size_t p = 0;
    while (p < options.pools.size() && options.pools[p].device != device.device) ++p;
    if (p == options.pools.size()) {
      if (!device.pages.empty()) {
        spdlog::warn("kvd: device {} is not served any more: its {} held pages cannot be "
                     "re-adopted", device.device, device.pages.size());
      }
      continue;
    }
    const size_t capacity = options.pools[p].capacity_bytes / page_bytes_;
    ops::RepeatedWarning beyond("kvd: device " + std::to_string(device.device) +
                                ": pages beyond the capacity now, not re-adopted");
    for (const RecoveredPage& page : device.pages) {
      // capacity_bytes 0 means a utilization: the pool checks the bound then.
      if (capacity != 0 && page.id >= capacity) {
        beyond.Warn("kvd: page {} of device {} is beyond the capacity now: not re-adopted",
                    page.id, device.device);
        continue;
      }
      out[p].push_back(page);
    }
  }
  return out;
}

void NodeState::ApplyRecovery(size_t d, const std::vector<RecoveredPage>& pages) {
  for (const RecoveredPage& recovered : pages) {
    PageInfo& page = devices_[d].pages[recovered.id];
    // Engines' groups, or kvd's own (the object store's pages, which the page
    // keeper hands back: daemon/node/page_keeper.h).
    page.group = GroupIndex(recovered.group, recovered.kvd_owned);
    page.generation = recovered.generation;
    page.recovering = true;
    page.journaled = true;
    ++devices_[d].recovering;
    recovery_open_ = true;
  }
  if (!pages.empty()) {
    spdlog::info("kvd: device {}: {} pages held back for the engines of the previous kvd",
                 pools_[d]->device(), pages.size());
  }
}

bool NodeState::KvdOwned(const PageInfo& page) const {
  // Pages of kvd's own tenants (the object store): their handles are kvd's
  // and the page keeper's, so no engine hands them back after a restart.
  return page.group >= 0 && groups_[page.group].kvd_owned;
}

void NodeState::Journal(size_t d, PageId id) {
  if (journal_ == nullptr) return;
  const PageInfo& page = devices_[d].pages[id];
  // kvd's own pages too: the page keeper may hold them over a crash, and
  // their ids must not be granted before it hands them back.
  bool held = !page.holders.empty() || page.recovering;
  journal_->SetPage(d, id, page.generation, page.group, held, KvdOwned(page));
}

uint32_t NodeState::PageGeneration(int device, PageId id) const {
  auto d = DeviceIndex(device);
  if (!d.ok() || id >= devices_[*d].pages.size()) return 0;
  return devices_[*d].pages[id].generation;
}

void NodeState::SetJournal(PageJournal* journal) {
  journal_ = journal;
  if (journal_ == nullptr) return;
  for (size_t g = 0; g < groups_.size(); ++g) {
    journal_->SetGroup(static_cast<int>(g), groups_[g].name);
  }
  for (size_t d = 0; d < devices_.size(); ++d) {
    for (PageId id = 0; id < devices_[d].pages.size(); ++id) Journal(d, id);
  }
}

bool NodeState::HoldsPages() const {
  for (const DeviceState& device : devices_) {
    if (device.recovering > 0) return true;
    for (const PageInfo& page : device.pages) {
      if (!page.holders.empty() && !KvdOwned(page)) return true;
    }
  }
  return false;
}

size_t NodeState::recovering_pages() const {
  size_t n = 0;
  for (const DeviceState& device : devices_) n += device.recovering;
  return n;
}

Status NodeState::AdoptOne(Tenant& tenant, size_t d, const AdoptPage& in, std::string* why) {
  const std::string which = "page " + std::to_string(in.id) + " of device " +
                            std::to_string(pools_[d]->device());
  auto refuse = [&](const std::string& reason) {
    if (in.fd >= 0) close(in.fd);
    *why = which + ": " + reason;
    return Status::FailedPrecondition(*why);
  };
  // Adopt is a restart's hand-back and nothing else: open at any time it
  // would let an engine take group-mates' pages, or pages past its limit,
  // by naming them. The dead kvd's journal (kvd's own file, checked as it
  // is read) is what vouches for a claim, so no fd is needed.
  if (!recovery_open_) {
    return refuse("adopt is taken only in the recovery window after a kvd restart (it is over, "
                  "or this kvd recovered nothing)");
  }
  if (in.id >= devices_[d].pages.size()) return refuse("no such page");
  PageInfo& page = devices_[d].pages[in.id];
  if (!page.journaled) return refuse("not listed held in the previous kvd's journal");
  if (page.group != tenant.group_index) {
    return refuse("not held by group '" + tenant.group + "' when kvd stopped");
  }
  if (page.generation != in.generation) {
    return refuse("generation " + std::to_string(in.generation) + " is not the page's " +
                  std::to_string(page.generation));
  }
  if (std::find(page.holders.begin(), page.holders.end(), tenant.id) != page.holders.end()) {
    return refuse("already held by this tenant");
  }
  std::vector<PageGrant> ignored;
  if (page.recovering && in.fd < 0) {
    // The first engine of the group hands it back by id: kvd has no page of
    // it and never will (CUDA will not export an imported handle). Its
    // holders keep it; the pool keeps the id held back until the last goes.
    page.recovering = false;
    page.handleless = true;
    --devices_[d].recovering;
    ++devices_[d].handleless;
  } else if (page.recovering) {
    // An older engine's fd becomes the page: one copy for the pool to hand
    // out, one to import here.
    int pool_fd = fcntl(in.fd, F_DUPFD_CLOEXEC, 0);
    if (pool_fd < 0) return refuse("dup: " + std::string(strerror(errno)));
    auto handle = backend_.ImportPage(in.fd, pools_[d]->device(), page_bytes_);
    if (!handle.ok()) {
      close(pool_fd);
      *why = which + ": import failed: " + handle.status().ToString();
      return handle.status();
    }
    Status adopted = pools_[d]->Adopt(in.id, static_cast<GroupId>(page.group), *handle, pool_fd);
    if (!adopted.ok()) {
      Status released = backend_.ReleasePage(*handle);
      if (!released.ok()) spdlog::warn("kvd: {}", released.ToString());
      *why = which + ": " + adopted.ToString();
      return adopted;
    }
    page.recovering = false;
    --devices_[d].recovering;
  } else if (page.handleless) {
    // A group-mate handed it back by id already: this engine holds it too.
    // kvd has no page to compare an fd with; the journal vouched above.
    if (in.fd >= 0) close(in.fd);
  } else {
    // A group-mate handed this page back with its fd: kvd has it. An fd
    // given must be that page, not any fd (a pipe was taken for one).
    if (in.fd >= 0) {
      Status same = SamePage(d, in.id, in.fd);
      if (!same.ok()) return refuse(std::string(same.message()));
      close(in.fd);
    }
    const bool group_free = OnGroupFreeList(d, in.id, page.group);
    if (page.holders.empty() && !group_free) {
      *why = which + ": not held back for adoption (its recovery window ended?)";
      return Status::FailedPrecondition(*why);
    }
    if (group_free) TakeGroupFree(d, in.id);
  }
  AddHolder(d, in.id, tenant, &ignored);
  return Status::OK();
}

void NodeState::UncreateHandleless(size_t d, PageId id) {
  PageInfo& page = devices_[d].pages[id];
  page.handleless = false;
  --devices_[d].handleless;
  // The engines that imported it may keep its memory until they drop their
  // handles (ForgetOldPage tells them): counted held after recycle until then.
  Status released = pools_[d]->ReleaseHeldBack(id, StillHeld(d, id));
  if (!released.ok()) spdlog::error("kvd: {}", released.ToString());
  ForgetOldPage(d, id);
  page.group = -1;
  Journal(d, id);
}

Result<AdoptResult> NodeState::Adopt(TenantId tenant_id, int device,
                                     std::span<const AdoptPage> pages, uint64_t now_unix_ns) {
  Tenant* tenant = MutableTenant(tenant_id);
  auto d = DeviceIndex(device);
  if (tenant == nullptr || !d.ok()) {
    for (const AdoptPage& page : pages) close(page.fd);
    if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
    return d.status();
  }
  AdoptResult out;
  ops::RepeatedWarning refused("kvd: tenant '" + tenant->name + "' handed back pages refused");
  for (const AdoptPage& page : pages) {
    std::string why;
    if (AdoptOne(*tenant, *d, page, &why).ok()) {
      out.adopted.push_back(page.id);
    } else {
      out.refused.push_back(page.id);
      if (out.reason.empty()) out.reason = why;
      refused.Warn("kvd: tenant '{}' handed back {}", tenant->name, why);
    }
  }
  tenant->last_activity_unix_ns = now_unix_ns;
  ReclaimExcess(*tenant);
  return out;
}

void NodeState::ReclaimExcess(Tenant& tenant) {
  uint64_t used = UsedBytes(tenant);
  if (used <= tenant.limit_bytes || tenant.state == TenantState::kReclaiming) return;
  tenant.state = TenantState::kReclaiming;
  auto pages = static_cast<uint32_t>((used - tenant.limit_bytes + page_bytes_ - 1) / page_bytes_);
  notices_.push_back({Notice::Kind::kReclaim, tenant.id, -1, pages, tenant.limit_bytes, {}});
}

Status NodeState::SamePage(size_t d, PageId id, int fd) const {
  struct stat theirs {};
  if (fstat(fd, &theirs) != 0) return Status::FromErrno("fstat", errno, "the fd handed back");
  const int ours_fd = pools_[d]->kept_fd(id);
  struct stat ours {};
  if (ours_fd < 0 || fstat(ours_fd, &ours) != 0) {
    return Status::FailedPrecondition("kvd holds no fd of it to compare");
  }
  // Where pages are files (host: memfds), an fd of the page is the same
  // file. Elsewhere an export is a handle of its own: the kind must match.
  if ((theirs.st_mode & S_IFMT) != (ours.st_mode & S_IFMT)) {
    return Status::FailedPrecondition("the fd handed back is not a page (another kind of file)");
  }
  if (S_ISREG(ours.st_mode) && (theirs.st_dev != ours.st_dev || theirs.st_ino != ours.st_ino)) {
    return Status::FailedPrecondition("the fd handed back is another file, not this page");
  }
  return Status::OK();
}

size_t NodeState::ExpireRecovery() {
  recovery_open_ = false;
  size_t released = 0;
  for (size_t d = 0; d < devices_.size(); ++d) {
    for (PageInfo& page : devices_[d].pages) page.journaled = false;
    for (PageId id = 0; id < devices_[d].pages.size() && devices_[d].recovering > 0; ++id) {
      PageInfo& page = devices_[d].pages[id];
      if (!page.recovering) continue;
      Status status = pools_[d]->ReleaseHeldBack(id);
      if (!status.ok()) spdlog::error("kvd: {}", status.ToString());
      page.recovering = false;
      page.group = -1;
      ++page.generation;  // a late claim of the old page is refused
      --devices_[d].recovering;
      Journal(d, id);
      ++released;
    }
  }
  return released;
}

}  // namespace nanokv::kvd
