#include "daemon/node/page_journal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/run_dir.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvd {
namespace {

using ipc::JournalHeader;
using ipc::kJournalEntriesOffset;
using ipc::kJournalGroupNameBytes;
using ipc::kJournalGroupTableOffset;

// Entry bits: held (bit 0), kvd's own group (bit 1, version 3), group index
// + 1 (bits 16-31), generation (32-63).
constexpr uint64_t kHeldBit = 1;
constexpr uint64_t kKvdOwnedBit = 2;
constexpr uint64_t kReservedBits = 0xfffc;
constexpr uint32_t kPreviousVersion = 2;  // no kvd's-own bit: still read

uint64_t PackEntry(uint32_t generation, int group, bool held, bool kvd_owned) {
  const uint64_t g = group >= 0 && group < PageJournal::kMaxGroups ? group + 1 : 0;
  return uint64_t{generation} << 32 | g << 16 | (kvd_owned ? kKvdOwnedBit : 0) | (held ? kHeldBit : 0);
}

// A journal of every device at most this big can exist; a file larger is
// refused before anything is read into memory.
constexpr uint64_t kMaxJournalBytes =
    kJournalEntriesOffset + uint64_t{ipc::kMaxDevices} * ipc::kJournalMaxPagesPerDevice * 8;

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

// Group `g`'s name, if the table holds a valid one there.
Result<std::string> GroupName(std::span<const std::byte> bytes, size_t g) {
  const char* raw =
      reinterpret_cast<const char*>(bytes.data() + kJournalGroupTableOffset + g * kJournalGroupNameBytes);
  const size_t length = strnlen(raw, kJournalGroupNameBytes);
  std::string name(raw, length);
  if (length == kJournalGroupNameBytes || !wire::ValidName(name)) {
    return Bad("group " + std::to_string(g) + " of the table has no valid name");
  }
  return name;
}

uint64_t UnixNanos() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

JournalHeader& HeaderAt(void* base) { return *static_cast<JournalHeader*>(base); }

}  // namespace

size_t Recovery::page_count() const {
  size_t n = 0;
  for (const Device& d : devices) n += d.pages.size();
  return n;
}

Result<Recovery> PageJournal::Decode(std::span<const std::byte> bytes) {
  JournalHeader header{};
  if (bytes.size() < kJournalEntriesOffset) {
    return Bad("it is " + std::to_string(bytes.size()) + " bytes, shorter than a journal's header (" +
               std::to_string(kJournalEntriesOffset) + ")");
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.magic != ipc::kJournalMagic) return Bad("it is not a page journal (wrong magic)");
  if (header.version != ipc::kJournalVersion && header.version != kPreviousVersion) {
    return Bad("version " + std::to_string(header.version) + "; this kvd reads version " +
               std::to_string(ipc::kJournalVersion));
  }
  if (header.device_count == 0 || header.device_count > ipc::kMaxDevices) {
    return Bad(std::to_string(header.device_count) + " devices (1 to " +
               std::to_string(ipc::kMaxDevices) + ")");
  }
  if (header.page_bytes < 4096 || (header.page_bytes & (header.page_bytes - 1)) != 0 ||
      header.page_bytes > (uint64_t{1} << 40)) {
    return Bad("page size " + std::to_string(header.page_bytes) + " is not a power of two from 4 KiB");
  }
  uint64_t expected = kJournalEntriesOffset;
  for (uint32_t d = 0; d < header.device_count; ++d) {
    const int32_t ordinal = header.ordinals[d];
    if (ordinal < 0 || static_cast<uint32_t>(ordinal) >= ipc::kMaxDevices) {
      return Bad("device " + std::to_string(d) + " has ordinal " + std::to_string(ordinal));
    }
    for (uint32_t e = 0; e < d; ++e) {
      if (header.ordinals[e] == ordinal) return Bad("device " + std::to_string(ordinal) + " twice");
    }
    if (header.capacities[d] > ipc::kJournalMaxPagesPerDevice) {
      return Bad("device " + std::to_string(ordinal) + " has " + std::to_string(header.capacities[d]) +
                 " pages (at most " + std::to_string(ipc::kJournalMaxPagesPerDevice) + ")");
    }
    expected += uint64_t{header.capacities[d]} * 8;
  }
  if (header.total_bytes != expected || bytes.size() != expected) {
    return Bad("it is " + std::to_string(bytes.size()) + " bytes and says " +
               std::to_string(header.total_bytes) + "; its devices make " + std::to_string(expected));
  }
  Recovery recovery;
  recovery.page_bytes = header.page_bytes;
  std::vector<std::string> names(kMaxGroups);  // filled as entries name them
  size_t offset = kJournalEntriesOffset;
  for (uint32_t d = 0; d < header.device_count; ++d) {
    Recovery::Device device;
    device.device = header.ordinals[d];
    device.capacity_pages = header.capacities[d];
    for (uint32_t id = 0; id < device.capacity_pages; ++id, offset += 8) {
      uint64_t entry;
      std::memcpy(&entry, bytes.data() + offset, 8);
      const std::string where = "page " + std::to_string(id) + " of device " + std::to_string(device.device);
      const uint64_t reserved = header.version == kPreviousVersion ? kReservedBits | kKvdOwnedBit : kReservedBits;
      if ((entry & reserved) != 0) return Bad(where + ": reserved bits set");
      const uint64_t group = (entry >> 16) & 0xffff;
      if (group > static_cast<uint64_t>(kMaxGroups)) {
        return Bad(where + ": group index " + std::to_string(group - 1) + " is beyond the table's " +
                   std::to_string(kMaxGroups));
      }
      if ((entry & kHeldBit) == 0) continue;
      if (group == 0) return Bad(where + ": held by no group");
      std::string& name = names[group - 1];
      if (name.empty()) {
        auto found = GroupName(bytes, group - 1);
        if (!found.ok()) return Bad(where + ": " + std::string(found.status().message()));
        name = std::move(found).value();
      }
      device.pages.push_back({id, static_cast<uint32_t>(entry >> 32), name, (entry & kKvdOwnedBit) != 0});
    }
    recovery.devices.push_back(std::move(device));
  }
  return recovery;
}

std::optional<Recovery> PageJournal::TakeOver(const std::string& path) {
  auto bytes = ReadOwnFile(path, "page journal", kMaxJournalBytes);
  if (!bytes.ok() && bytes.status().code() == Code::kNotFound) return std::nullopt;
  Status fault = bytes.status();
  if (fault.ok()) {
    auto recovery = Decode(*bytes);
    if (recovery.ok()) return std::move(recovery).value();
    fault = Status::InvalidArgument("page journal " + path + " is refused: " +
                                    std::string(recovery.status().message()));
  }
  // Never trusted, and never met again: removed (the run directory is ours).
  spdlog::warn("kvd: {}; removing it: pages engines still hold will not be re-adopted",
               fault.message());
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("kvd: removing {}: {}", path, Status::FromErrno("unlink", errno, path).ToString());
  }
  return std::nullopt;
}

Result<std::unique_ptr<PageJournal>> PageJournal::Create(const std::string& path, size_t page_bytes,
                                                         const std::vector<JournalDevice>& devices,
                                                         uint64_t recovery_window_ms) {
  if (devices.empty() || devices.size() > ipc::kMaxDevices) {
    return Status::InvalidArgument("page journal: " + std::to_string(devices.size()) +
                                   " devices (1 to " + std::to_string(ipc::kMaxDevices) + ")");
  }
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> capacities;
  size_t total = kJournalEntriesOffset;
  for (const JournalDevice& d : devices) {
    if (d.capacity_pages > ipc::kJournalMaxPagesPerDevice) {
      return Status::InvalidArgument("page journal: device " + std::to_string(d.device) + " has " +
                                     std::to_string(d.capacity_pages) + " pages, more than " +
                                     std::to_string(ipc::kJournalMaxPagesPerDevice));
    }
    offsets.push_back(total);
    capacities.push_back(d.capacity_pages);
    total += size_t{d.capacity_pages} * 8;
  }
  const std::string private_path = path + ".new" + std::to_string(getpid());
  NANOKV_ASSIGN_OR_RETURN(void* base, CreateMappedFile(private_path, total, "page journal"));
  JournalHeader header{};
  header.magic = 0;  // stored last: a journal without magic is refused
  header.version = ipc::kJournalVersion;
  header.device_count = static_cast<uint32_t>(devices.size());
  header.page_bytes = page_bytes;
  header.total_bytes = total;
  header.recovery_window_ms = recovery_window_ms;
  for (size_t d = 0; d < devices.size(); ++d) {
    header.ordinals[d] = devices[d].device;
    header.capacities[d] = devices[d].capacity_pages;
  }
  std::memcpy(base, &header, sizeof(header));
  std::atomic_ref<uint64_t>(HeaderAt(base).magic).store(ipc::kJournalMagic, std::memory_order_release);
  return std::unique_ptr<PageJournal>(new PageJournal(base, total, path, private_path,
                                                      std::move(offsets), std::move(capacities)));
}

PageJournal::PageJournal(void* base, size_t bytes, std::string path, std::string private_path,
                         std::vector<uint64_t> offsets, std::vector<uint32_t> capacities)
    : base_(base),
      bytes_(bytes),
      path_(std::move(path)),
      private_path_(std::move(private_path)),
      entry_offsets_(std::move(offsets)),
      capacities_(std::move(capacities)) {}

PageJournal::~PageJournal() {
  munmap(base_, bytes_);
  if (!installed_) unlink(private_path_.c_str());
}

Status PageJournal::Install() {
  if (installed_) return Status::OK();
  if (rename(private_path_.c_str(), path_.c_str()) != 0) {
    return Status::FromErrno("rename", errno, private_path_ + " -> " + path_);
  }
  installed_ = true;
  return Status::OK();
}

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
  char* field = static_cast<char*>(base_) + kJournalGroupTableOffset + index * kJournalGroupNameBytes;
  std::memset(field, 0, kJournalGroupNameBytes);
  std::memcpy(field, name.data(), std::min(name.size(), kJournalGroupNameBytes - 1));
}

void PageJournal::SetPage(size_t d, PageId id, uint32_t generation, int group, bool held, bool kvd_owned) {
  if (d >= entry_offsets_.size() || id >= capacities_[d]) return;
  auto* entry = reinterpret_cast<uint64_t*>(static_cast<std::byte*>(base_) + entry_offsets_[d] +
                                            size_t{id} * 8);
  std::atomic_ref<uint64_t>(*entry).store(PackEntry(generation, group, held, kvd_owned),
                                          std::memory_order_relaxed);
}

void PageJournal::MarkStopped() {
  std::atomic_ref<uint64_t>(HeaderAt(base_).stopped_unix_ns)
      .store(UnixNanos(), std::memory_order_relaxed);
}

void PageJournal::Remove() {
  const std::string& path = installed_ ? path_ : private_path_;
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("kvd: removing the page journal: {}",
                 Status::FromErrno("unlink", errno, path).ToString());
  }
}

}  // namespace nanokv::kvd
