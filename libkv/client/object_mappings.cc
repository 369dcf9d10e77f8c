#include "libkv/client/object_mappings.h"

#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "ipc/wire/object_codec.h"

namespace nanokv::client {

ObjectMappings::~ObjectMappings() {
  for (auto* maps : {&read_, &write_}) {
    for (auto& [device, map] : *maps) {
      for (size_t i = 0; i < map.mapped.size(); ++i) {
        if (map.mapped[i]) UnmapOne(map, i);
      }
      for (gpu::PageHandle handle : map.handles) {
        if (handle.valid()) (void)backend_.ReleasePage(handle);
      }
      Status s = backend_.FreeRange(map.base, map.bytes);
      if (!s.ok()) spdlog::warn("nanokv objects: free range failed: {}", s.ToString());
    }
  }
}

std::vector<int> ObjectMappings::AccessOf(int device) const {
  std::vector<int> access = {device};
  for (int other : access_devices_) {
    if (other != device) access.push_back(other);
  }
  return access;
}

size_t ObjectMappings::mapped_pages() const {
  size_t n = 0;
  for (const auto* maps : {&read_, &write_}) {
    for (const auto& [device, map] : *maps) n += std::count(map.mapped.begin(), map.mapped.end(), true);
  }
  return n;
}

Result<ObjectMappings::DeviceMap*> ObjectMappings::RangeFor(const ObjectPlan& plan, bool write) {
  DeviceMap& map = (write ? write_ : read_)[plan.device];
  if (map.base == 0) {
    if (plan.store_bytes == 0 || plan.page_bytes == 0 || plan.store_bytes % plan.page_bytes != 0) {
      return Status::InvalidArgument("nanokv objects: plan without a store geometry");
    }
    NANOKV_ASSIGN_OR_RETURN(map.base, backend_.ReserveRange(plan.store_bytes, 0));
    map.bytes = plan.store_bytes;
    map.page_bytes = plan.page_bytes;
    map.mapped.assign(plan.store_bytes / plan.page_bytes, false);
    map.writers.assign(write ? map.mapped.size() : 0, 0);
    map.handles.assign(write ? map.mapped.size() : 0, gpu::PageHandle{});
  }
  if (map.bytes != plan.store_bytes || map.page_bytes != plan.page_bytes) {
    return Status::FailedPrecondition("nanokv objects: kvd's store changed (restarted?): open a new ObjectStore");
  }
  return &map;
}

uintptr_t ObjectMappings::MappedForRead(int device, uint64_t offset, uint64_t bytes) const {
  auto it = read_.find(device);
  if (it == read_.end() || it->second.base == 0 || bytes == 0) return 0;
  const DeviceMap& map = it->second;
  if (offset > map.bytes || bytes > map.bytes - offset) return 0;
  for (uint64_t index = offset / map.page_bytes; index <= (offset + bytes - 1) / map.page_bytes; ++index) {
    if (!map.mapped[index]) return 0;
  }
  return map.base + offset;
}

Result<uintptr_t> ObjectMappings::Map(const ObjectPlan& plan, int local_device, const FetchFds& fetch) {
  const bool write = plan.state == ObjectState::kWriting || plan.state == ObjectState::kReserved;
  NANOKV_ASSIGN_OR_RETURN(DeviceMap * found, RangeFor(plan, write));
  DeviceMap& map = *found;
  std::map<uint64_t, uint32_t> wanted;  // page index -> id
  auto want = [&](uint64_t offset, uint32_t id) {
    uint64_t index = offset / map.page_bytes;
    if (index < map.mapped.size() && !map.mapped[index]) wanted.emplace(index, id);
  };
  want(plan.header_offset, plan.header_page);
  uint64_t at = plan.payload_offset;
  for (const ObjectSpan& span : plan.spans) {
    want(at, span.page_id);
    at += span.length;
  }
  if (write) {
    Claim(plan, map);
    for (auto kept = wanted.begin(); kept != wanted.end();) {
      if (!map.handles[kept->first].valid()) {
        ++kept;
        continue;
      }
      NANOKV_RETURN_IF_ERROR(MapHandle(map, local_device, kept->first, map.handles[kept->first], true));
      kept = wanted.erase(kept);
    }
  }
  auto it = wanted.begin();
  while (it != wanted.end()) {
    std::vector<uint32_t> ids;
    std::vector<uint64_t> indexes;
    for (; it != wanted.end() && indexes.size() < wire::kMaxObjectPageFds; ++it) {
      ids.push_back(it->second);
      indexes.push_back(it->first);
    }
    NANOKV_ASSIGN_OR_RETURN(std::vector<int> fds, fetch(plan.device, ids, write ? &plan : nullptr));
    if (fds.size() != indexes.size()) {
      for (int fd : fds) close(fd);
      return Status::ProtocolError("nanokv objects: kvd sent " + std::to_string(fds.size()) +
                                   " page fds for " + std::to_string(indexes.size()) + " pages");
    }
    for (size_t i = 0; i < indexes.size(); ++i) {
      Status s = MapFd(map, local_device, indexes[i], fds[i], write);  // takes fds[i]
      if (!s.ok()) {
        for (size_t j = i + 1; j < fds.size(); ++j) close(fds[j]);
        return s;
      }
    }
  }
  return map.base;
}

void ObjectMappings::Claim(const ObjectPlan& plan, DeviceMap& map) {
  auto [it, added] = open_plans_.try_emplace({plan.key, plan.epoch});
  if (!added) return;
  it->second.device = plan.device;
  std::vector<uint64_t>& pages = it->second.pages;
  auto count = [&](uint64_t offset) {
    uint64_t index = offset / map.page_bytes;
    if (index >= map.writers.size()) return;
    if (std::find(pages.begin(), pages.end(), index) != pages.end()) return;
    pages.push_back(index);
    ++map.writers[index];
  };
  count(plan.header_offset);
  uint64_t at = plan.payload_offset;
  for (const ObjectSpan& span : plan.spans) {
    count(at);
    at += span.length;
  }
}

void ObjectMappings::ClosePlan(std::string_view key, uint32_t epoch) {
  auto it = open_plans_.find({std::string(key), epoch});
  if (it == open_plans_.end()) return;
  DeviceMap& map = write_[it->second.device];
  // On cuda and hip the write mapping stays for the next plan on the page:
  // unmapping there guards nothing the kept fd does not already give, and
  // costs a map + access + unmap per page per put (a 64 MiB put on an H100:
  // 1.8 ms against 0.28; docs/BENCHMARKS.md). On host, where kvd's fds
  // enforce it, a committed plan's pages stop taking writes.
  const bool unmap = backend_.name() == "host";
  for (uint64_t index : it->second.pages) {
    if (--map.writers[index] == 0 && map.mapped[index] && unmap) UnmapOne(map, index);
  }
  open_plans_.erase(it);
}

Status ObjectMappings::MapFd(DeviceMap& map, int device, uint64_t index, int fd, bool write) {
  NANOKV_ASSIGN_OR_RETURN(gpu::PageHandle handle, backend_.ImportPage(fd, device, map.page_bytes));
  if (write) {
    map.handles[index] = handle;  // kept; released by the destructor
    return MapHandle(map, device, index, handle, true);
  }
  Status mapped = MapHandle(map, device, index, handle, false);
  Status released = backend_.ReleasePage(handle);  // the mapping keeps the memory
  NANOKV_RETURN_IF_ERROR(mapped);
  return released;
}

Status ObjectMappings::MapHandle(DeviceMap& map, int device, uint64_t index, gpu::PageHandle handle,
                                 bool write) {
  uintptr_t at = map.base + index * map.page_bytes;
  NANOKV_RETURN_IF_ERROR(backend_.Map(at, map.page_bytes, handle));
  map.mapped[index] = true;
  if (write) return backend_.SetAccess(at, map.page_bytes, AccessOf(device));
  Status read_only = backend_.SetAccess(at, map.page_bytes, AccessOf(device), gpu::Access::kReadOnly);
  if (read_only.ok() || backend_.name() == "host") return read_only;
  // A driver that refuses read-only VMM access: read-write rather than no
  // reads at all (its fd gives full access anyway: ARCHITECTURE.md,
  // Security), said once.
  if (!warned_read_only_) {
    warned_read_only_ = true;
    spdlog::warn("nanokv objects: the {} driver refused read-only access ({}); readers map store "
                 "pages read-write",
                 backend_.name(), read_only.ToString());
  }
  return backend_.SetAccess(at, map.page_bytes, AccessOf(device));
}

void ObjectMappings::UnmapOne(DeviceMap& map, uint64_t index) {
  Status s = backend_.Unmap(map.base + index * map.page_bytes, map.page_bytes);
  if (!s.ok()) spdlog::warn("nanokv objects: unmap failed: {}", s.ToString());
  map.mapped[index] = false;
}

}  // namespace nanokv::client
