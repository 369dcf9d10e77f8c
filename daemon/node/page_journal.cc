#include "daemon/node/page_journal.h"

#include <atomic>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

#include "ipc/segment/layout.h"
#include "ipc/segment/shm_file.h"

namespace nanokv::kvd {
namespace {

// "NKVPJ001" read as a little-endian uint64.
constexpr uint64_t kJournalMagic = 0x3130304A50564B4EULL;
constexpr uint32_t kJournalVersion = 1;
constexpr size_t kGroupNameBytes = 64;

struct JournalHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t device_count;
  uint64_t page_bytes;
  uint64_t total_bytes;
  int32_t ordinals[ipc::kMaxDevices];
  uint32_t capacities[ipc::kMaxDevices];
};
static_assert(sizeof(JournalHeader) == 160);

constexpr size_t kGroupTableOffset = sizeof(JournalHeader);
constexpr size_t kEntriesOffset =
    kGroupTableOffset + PageJournal::kMaxGroups * kGroupNameBytes;

uint64_t PackEntry(uint32_t generation, int group, bool held) {
  const uint64_t g = group >= 0 && group < PageJournal::kMaxGroups ? group + 1 : 0;
  return uint64_t{generation} << 32 | g << 16 | (held ? 1 : 0);
}

}  // namespace

size_t Recovery::page_count() const {
  size_t n = 0;
  for (const Device& d : devices) n += d.pages.size();
  return n;
}

std::string PageJournal::ShmName(const std::string& ipc_name) {
  return "nanokv-pages_" + ipc_name;
}

std::optional<Recovery> PageJournal::TakeOver(const std::string& ipc_name) {
  const std::string name = ShmName(ipc_name);
  auto mapping = ipc::ShmMapping::OpenReadOnly(name);
  if (!mapping.ok()) {
    if (mapping.status().code() != Code::kNotFound) {
      spdlog::warn("kvd: cannot read the page journal /dev/shm/{}: {}", name,
                   mapping.status().ToString());
    }
    return std::nullopt;
  }
  std::optional<Recovery> out;
  const auto* bytes = static_cast<const std::byte*>((*mapping)->data());
  const size_t size = (*mapping)->size();
  JournalHeader header{};
  if (size >= sizeof(header)) std::memcpy(&header, bytes, sizeof(header));
  if (size < kEntriesOffset || header.magic != kJournalMagic ||
      header.version != kJournalVersion || header.total_bytes != size ||
      header.device_count > ipc::kMaxDevices) {
    spdlog::warn("kvd: the page journal /dev/shm/{} is not one this kvd can read ({} bytes); "
                 "ignoring it: pages engines still hold will not be re-adopted",
                 name, size);
  } else {
    Recovery recovery;
    recovery.page_bytes = header.page_bytes;
    size_t offset = kEntriesOffset;
    bool ok = true;
    for (uint32_t d = 0; d < header.device_count && ok; ++d) {
      Recovery::Device device;
      device.device = header.ordinals[d];
      device.capacity_pages = header.capacities[d];
      if (offset + size_t{device.capacity_pages} * 8 > size) {
        ok = false;
        break;
      }
      for (uint32_t id = 0; id < device.capacity_pages; ++id) {
        uint64_t entry;
        std::memcpy(&entry, bytes + offset + size_t{id} * 8, 8);
        const auto group = static_cast<int>((entry >> 16) & 0xffff) - 1;
        if ((entry & 1) == 0 || group < 0) continue;
        const char* raw =
            reinterpret_cast<const char*>(bytes + kGroupTableOffset + group * kGroupNameBytes);
        std::string group_name(raw, strnlen(raw, kGroupNameBytes));
        device.pages.push_back({id, static_cast<uint32_t>(entry >> 32), std::move(group_name)});
      }
      offset += size_t{device.capacity_pages} * 8;
      recovery.devices.push_back(std::move(device));
    }
    if (ok) {
      out = std::move(recovery);
    } else {
      spdlog::warn("kvd: the page journal /dev/shm/{} is truncated; ignoring it", name);
    }
  }
  mapping->reset();
  Status removed = ipc::RemoveShm(name);
  if (!removed.ok() && removed.code() != Code::kNotFound) {
    spdlog::warn("kvd: removing the old page journal: {}", removed.ToString());
  }
  return out;
}

Result<std::unique_ptr<PageJournal>> PageJournal::Create(const std::string& ipc_name,
                                                         size_t page_bytes,
                                                         const std::vector<JournalDevice>& devices,
                                                         mode_t mode, std::optional<gid_t> gid) {
  if (devices.size() > ipc::kMaxDevices) {
    return Status::InvalidArgument("page journal: more than " +
                                   std::to_string(ipc::kMaxDevices) + " devices");
  }
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> capacities;
  size_t total = kEntriesOffset;
  for (const JournalDevice& d : devices) {
    offsets.push_back(total);
    capacities.push_back(d.capacity_pages);
    total += size_t{d.capacity_pages} * 8;
  }
  const std::string name = ShmName(ipc_name);
  auto mapping = ipc::ShmMapping::CreateReadWrite(name, total, mode, gid);
  if (!mapping.ok()) {
    const Status& s = mapping.status();
    return Status(s.code(), "creating the page journal /dev/shm/" + name + ": " +
                                std::string(s.message()),
                  s.call(), s.error_name());
  }
  JournalHeader header{};
  header.magic = 0;  // stored last: a journal without magic is ignored
  header.version = kJournalVersion;
  header.device_count = static_cast<uint32_t>(devices.size());
  header.page_bytes = page_bytes;
  header.total_bytes = total;
  for (size_t d = 0; d < devices.size(); ++d) {
    header.ordinals[d] = devices[d].device;
    header.capacities[d] = devices[d].capacity_pages;
  }
  auto* base = static_cast<std::byte*>((*mapping)->data());
  std::memcpy(base, &header, sizeof(header));
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base))
      .store(kJournalMagic, std::memory_order_release);
  return std::unique_ptr<PageJournal>(
      new PageJournal(std::move(*mapping), name, std::move(offsets), std::move(capacities)));
}

PageJournal::PageJournal(std::unique_ptr<ipc::ShmMapping> mapping, std::string shm_name,
                         std::vector<uint64_t> offsets, std::vector<uint32_t> capacities)
    : mapping_(std::move(mapping)),
      shm_name_(std::move(shm_name)),
      entry_offsets_(std::move(offsets)),
      capacities_(std::move(capacities)) {}

PageJournal::~PageJournal() = default;

void PageJournal::SetGroup(int index, const std::string& name) {
  if (index < 0 || index >= kMaxGroups) {
    if (!warned_groups_) {
      spdlog::warn("kvd: more than {} tenant groups: pages of the later ones are not "
                   "journaled and would not survive a kvd restart",
                   kMaxGroups);
      warned_groups_ = true;
    }
    return;
  }
  char* field = static_cast<char*>(mapping_->data()) + kGroupTableOffset + index * kGroupNameBytes;
  std::memset(field, 0, kGroupNameBytes);
  std::memcpy(field, name.data(), std::min(name.size(), kGroupNameBytes - 1));
}

void PageJournal::SetPage(size_t d, alloc::PageId id, uint32_t generation, int group, bool held) {
  if (d >= entry_offsets_.size() || id >= capacities_[d]) return;
  auto* entry = reinterpret_cast<uint64_t*>(static_cast<std::byte*>(mapping_->data()) +
                                            entry_offsets_[d] + size_t{id} * 8);
  std::atomic_ref<uint64_t>(*entry).store(PackEntry(generation, group, held),
                                          std::memory_order_relaxed);
}

void PageJournal::Remove() {
  Status removed = ipc::RemoveShm(shm_name_);
  if (!removed.ok() && removed.code() != Code::kNotFound) {
    spdlog::warn("kvd: removing the page journal: {}", removed.ToString());
  }
}

}  // namespace nanokv::kvd
