#include "nanokv/kv_tensor.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include <spdlog/spdlog.h>

#include "ipc/wire/codec.h"
#include "libkv/client/client_impl.h"

namespace nanokv {
namespace {

std::vector<uint32_t> Ids(const std::vector<client::ImportedPage>& pages) {
  std::vector<uint32_t> ids;
  ids.reserve(pages.size());
  for (const auto& page : pages) ids.push_back(page.id);
  return ids;
}

// Prefixes a backend error with where in the tensor it happened, keeping the
// code, the call and the driver's error name.
Status At(const Status& status, const std::string& where) {
  return Status(status.code(), where + ": " + std::string(status.message()), status.call(),
                status.error_name());
}

}  // namespace

Result<std::unique_ptr<KVTensor>> KVTensor::Create(Client& client, int device, size_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("KVTensor of 0 bytes");
  Client::Impl& impl = *client.impl_;
  NANOKV_RETURN_IF_ERROR(impl.CheckDevice(device));
  size_t page_bytes = impl.page_bytes();
  if (bytes > std::numeric_limits<size_t>::max() - page_bytes) {
    return Status::InvalidArgument("KVTensor of " + std::to_string(bytes) + " bytes");
  }
  size_t pages = (bytes + page_bytes - 1) / page_bytes;
  NANOKV_ASSIGN_OR_RETURN(uintptr_t base, impl.backend().ReserveRange(pages * page_bytes, 0));
  return std::unique_ptr<KVTensor>(new KVTensor(client, device, base, page_bytes, pages));
}

KVTensor::KVTensor(Client& client, int device, uintptr_t base, size_t page_bytes, size_t pages)
    : client_(client), device_(device), base_(base), page_bytes_(page_bytes), slots_(pages) {}

KVTensor::~KVTensor() {
  std::lock_guard<std::mutex> lock(mu_);
  Client::Impl& impl = *client_.impl_;
  gpu::Backend& backend = impl.backend();
  std::map<int, std::vector<uint32_t>> to_return;
  bool all_unmapped = true;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].mapped) continue;
    Status unmapped = backend.Unmap(Address(i), page_bytes_);
    if (!unmapped.ok()) {
      // Tolerate a stale mapping at teardown (kvcached's FTensor does too):
      // log, do not abort; the range then stays reserved.
      spdlog::warn("nanokv: KVTensor teardown: unmapping page {}: {}", i, unmapped.ToString());
      all_unmapped = false;
    }
    to_return[slots_[i].device].push_back(slots_[i].id);
  }
  if (impl.connected()) {
    for (const auto& [device, ids] : to_return) {
      Status returned = ReturnLocked(device, ids);
      if (!returned.ok()) {
        spdlog::warn("nanokv: KVTensor teardown: returning {} pages of device {}: {}", ids.size(),
                     device, returned.ToString());
      }
    }
  }
  if (!all_unmapped) return;
  Status freed = backend.FreeRange(base_, slots_.size() * page_bytes_);
  if (!freed.ok())
    spdlog::warn("nanokv: KVTensor teardown: freeing its range: {}", freed.ToString());
}

size_t KVTensor::mapped_pages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mapped_;
}

bool KVTensor::is_mapped(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index < slots_.size() && slots_[index].mapped;
}

std::optional<uint32_t> KVTensor::page_id(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= slots_.size() || !slots_[index].mapped) return std::nullopt;
  return slots_[index].id;
}

size_t KVTensor::mapped_prefix() const {
  std::lock_guard<std::mutex> lock(mu_);
  return MappedPrefixLocked();
}

size_t KVTensor::MappedPrefixLocked() const {
  size_t i = 0;
  while (i < slots_.size() && slots_[i].mapped) ++i;
  return i;
}

Status KVTensor::CheckRange(size_t first, size_t count) const {
  if (first > slots_.size() || count > slots_.size() - first) {
    return Status::InvalidArgument("pages [" + std::to_string(first) + ", " +
                                   std::to_string(first) + "+" + std::to_string(count) +
                                   ") are outside the tensor's " + std::to_string(slots_.size()) +
                                   " pages");
  }
  return Status::OK();
}

Status KVTensor::Map(size_t first, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  return MapLocked(first, count);
}

Status KVTensor::MapLocked(size_t first, size_t count) {
  NANOKV_RETURN_IF_ERROR(CheckRange(first, count));
  std::vector<size_t> indices;
  for (size_t i = first; i < first + count; ++i) {
    if (!slots_[i].mapped) indices.push_back(i);
  }
  if (indices.empty()) return Status::OK();
  Client::Impl& impl = *client_.impl_;
  std::vector<client::ImportedPage> pages;
  pages.reserve(indices.size());
  while (pages.size() < indices.size()) {
    auto n = static_cast<uint32_t>(
        std::min<size_t>(wire::kMaxPagesPerRequest, indices.size() - pages.size()));
    auto granted = impl.GrantPages(device_, n);
    if (!granted.ok()) {
      Status returned = ReturnLocked(device_, Ids(pages));
      if (!returned.ok()) spdlog::warn("nanokv: undoing a failed Map: {}", returned.ToString());
      return granted.status();
    }
    pages.insert(pages.end(), granted->begin(), granted->end());
  }
  return PlaceLocked(indices, device_, pages);
}

Status KVTensor::MapShared(size_t index, int device, std::span<const uint32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  NANOKV_RETURN_IF_ERROR(CheckRange(index, ids.size()));
  if (ids.empty()) return Status::OK();
  std::vector<size_t> indices;
  for (size_t i = index; i < index + ids.size(); ++i) {
    if (slots_[i].mapped) {
      return Status::FailedPrecondition("MapShared: page " + std::to_string(i) +
                                        " of the tensor is mapped already");
    }
    indices.push_back(i);
  }
  Client::Impl& impl = *client_.impl_;
  std::vector<client::ImportedPage> pages;
  pages.reserve(ids.size());
  while (pages.size() < ids.size()) {
    size_t n = std::min<size_t>(wire::kMaxPagesPerRequest, ids.size() - pages.size());
    auto shared = impl.SharePages(device, ids.subspan(pages.size(), n));
    if (!shared.ok()) {
      Status returned = ReturnLocked(device, Ids(pages));
      if (!returned.ok())
        spdlog::warn("nanokv: undoing a failed MapShared: {}", returned.ToString());
      return shared.status();
    }
    pages.insert(pages.end(), shared->begin(), shared->end());
  }
  return PlaceLocked(indices, device, pages);
}

Status KVTensor::PlaceLocked(const std::vector<size_t>& indices, int page_device,
                             const std::vector<client::ImportedPage>& pages) {
  gpu::Backend& backend = client_.impl_->backend();
  std::vector<size_t> mapped_now;
  mapped_now.reserve(indices.size());
  Status failure;
  for (size_t i = 0; i < indices.size() && failure.ok(); ++i) {
    Status mapped = backend.Map(Address(indices[i]), page_bytes_, pages[i].handle);
    if (mapped.ok()) {
      mapped_now.push_back(indices[i]);
    } else {
      failure = At(mapped, "mapping page " + std::to_string(pages[i].id) + " at index " +
                               std::to_string(indices[i]));
    }
  }
  // Access after every map (backend rule 1), once per contiguous run: the
  // indices are ascending, so a run ends where the next index is not +1.
  // The backend numbers devices as this process sees them, not as kvd does.
  Result<int> local = client_.impl_->LocalDevice(device_);
  if (!local.ok() && failure.ok()) failure = local.status();
  const int access[] = {local.ok() ? *local : 0};
  for (size_t start = 0; start < indices.size() && failure.ok();) {
    size_t end = start + 1;
    while (end < indices.size() && indices[end] == indices[end - 1] + 1) ++end;
    Status accessible =
        backend.SetAccess(Address(indices[start]), (end - start) * page_bytes_, access);
    if (!accessible.ok()) {
      failure = At(accessible, "setting access on pages [" + std::to_string(indices[start]) + ", " +
                                   std::to_string(indices[end - 1] + 1) + ")");
    }
    start = end;
  }
  if (!failure.ok()) {
    // Never leave half a Map behind: undo this call's mappings, return its pages.
    for (size_t index : mapped_now) {
      Status unmapped = backend.Unmap(Address(index), page_bytes_);
      if (!unmapped.ok()) {
        spdlog::warn("nanokv: undoing a failed map: unmapping index {}: {}", index,
                     unmapped.ToString());
      }
    }
    Status returned = ReturnLocked(page_device, Ids(pages));
    if (!returned.ok()) spdlog::warn("nanokv: undoing a failed map: {}", returned.ToString());
    return failure;
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    slots_[indices[i]] = Slot{true, page_device, pages[i].id};
  }
  mapped_ += indices.size();
  return Status::OK();
}

Status KVTensor::Unmap(size_t first, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  return UnmapLocked(first, count);
}

Status KVTensor::UnmapLocked(size_t first, size_t count) {
  NANOKV_RETURN_IF_ERROR(CheckRange(first, count));
  gpu::Backend& backend = client_.impl_->backend();
  std::map<int, std::vector<uint32_t>> to_return;
  Status failure;
  for (size_t i = first; i < first + count; ++i) {
    if (!slots_[i].mapped) continue;
    // One Unmap per page: each page is its own mapping (backend rule 2).
    Status unmapped = backend.Unmap(Address(i), page_bytes_);
    if (!unmapped.ok()) {
      // The page stays mapped and held; the rest still go.
      if (failure.ok()) failure = At(unmapped, "unmapping index " + std::to_string(i));
      continue;
    }
    to_return[slots_[i].device].push_back(slots_[i].id);
    slots_[i] = Slot{};
    --mapped_;
  }
  for (const auto& [device, ids] : to_return) {
    Status returned = ReturnLocked(device, ids);
    if (!returned.ok() && failure.ok()) failure = returned;
  }
  return failure;
}

Status KVTensor::ReturnLocked(int page_device, const std::vector<uint32_t>& ids) {
  Client::Impl& impl = *client_.impl_;
  std::span<const uint32_t> all(ids);
  for (size_t first = 0; first < all.size(); first += wire::kMaxPagesPerRequest) {
    size_t n = std::min<size_t>(wire::kMaxPagesPerRequest, all.size() - first);
    NANOKV_RETURN_IF_ERROR(impl.ReturnPages(page_device, all.subspan(first, n)));
  }
  return Status::OK();
}

Status KVTensor::Grow(size_t pages) {
  std::lock_guard<std::mutex> lock(mu_);
  return MapLocked(MappedPrefixLocked(), pages);
}

Status KVTensor::Shrink(size_t pages) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t prefix = MappedPrefixLocked();
  if (pages > prefix) {
    return Status::InvalidArgument("Shrink by " + std::to_string(pages) + " pages: only " +
                                   std::to_string(prefix) + " are mapped from the start");
  }
  return UnmapLocked(prefix - pages, pages);
}

}  // namespace nanokv
