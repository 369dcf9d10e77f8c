#include "daemon/objects/object_journal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "base/run_dir.h"
#include "ipc/segment/layout.h"
#include "nanokv/object_types.h"

namespace nanokv::kvd {
namespace {

// "NKVOJ001" read as a little-endian uint64.
constexpr uint64_t kMagic = 0x3130304A4F564B4EULL;
constexpr uint32_t kVersion = 2;        // 2: tiers (host_pages, a record's tier)
constexpr uint32_t kOldestVersion = 1;  // no tiers: those fields are zero there
constexpr uint64_t kHeaderBytes = 64;
constexpr uint64_t kRowBytes = 64;
constexpr uint32_t kMaxStorePages = 1u << 22;  // 8 TiB of 2 MiB pages

struct FileHeader {
  uint64_t magic;  // stored last, with release: a file without it is refused
  uint32_t version;
  uint32_t device_count;
  uint64_t page_bytes;
  uint64_t total_bytes;
  uint8_t reserved[32];
};
static_assert(sizeof(FileHeader) == kHeaderBytes);

struct DeviceRow {
  int32_t ordinal;
  uint32_t store_pages;
  uint32_t arena_pages;
  uint32_t slots_per_page;
  uint32_t max_objects;
  uint32_t header_count;  // header pages in use: atomic, after the entry
  uint32_t last_epoch;    // atomic
  uint32_t host_pages;    // the host tier's pages (version 2)
  uint8_t reserved[32];
};
static_assert(sizeof(DeviceRow) == kRowBytes);

// One record; checksum 0 is an empty one.
struct RecordBytes {
  uint64_t checksum;
  uint64_t seq;
  uint64_t payload_offset;
  uint64_t bytes_total;
  uint32_t slot;
  uint32_t epoch;
  uint32_t owner;
  uint16_t key_bytes;
  uint16_t pin;
  char key[kMaxObjectKeyBytes];
  uint32_t flags;  // kCommitted; other bits zero
  uint8_t tier;    // Tier (version 2)
  uint8_t reserved[11];
};
constexpr uint32_t kCommitted = 1;
static_assert(sizeof(RecordBytes) == ObjectJournal::kRecordBytes);

uint64_t Checksum(const RecordBytes& record, size_t d, uint32_t index) {
  const uint64_t sum = XXH64(reinterpret_cast<const std::byte*>(&record) + 8, sizeof(record) - 8,
                             uint64_t{d} << 32 | index);
  return sum == 0 ? 1 : sum;
}

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

// A record's fields in range for its store, or why not.
std::optional<std::string> RecordFault(const RecordBytes& r, const JournaledStore& store, uint64_t page_bytes) {
  const uint64_t store_bytes = uint64_t{store.pages.size()} * page_bytes;
  if (r.key_bytes == 0 || r.key_bytes > kMaxObjectKeyBytes ||
      !ValidObjectKey(std::string_view(r.key, r.key_bytes))) {
    return "no valid key";
  }
  if (r.epoch == 0) return "epoch 0";
  if (r.pin > static_cast<uint32_t>(kLastObjectPin)) return "no such pin";
  if ((r.flags & ~kCommitted) != 0) return "unknown flags";
  if (r.tier > static_cast<uint8_t>(Tier::kHost)) return "no such tier " + std::to_string(r.tier);
  if (r.tier == static_cast<uint8_t>(Tier::kHost)) {
    // No header slot, and only what kvd finished moving down is recorded.
    const uint64_t host_bytes = uint64_t{store.host_pages} * page_bytes;
    if (store.host_pages == 0) return "in a host tier the device had not";
    if (r.slot != 0) return "a host-tier record naming header slot " + std::to_string(r.slot);
    if ((r.flags & kCommitted) == 0) return "a host-tier record never committed";
    if (r.bytes_total == 0 || r.payload_offset >= host_bytes || r.bytes_total > host_bytes - r.payload_offset) {
      return "payload outside the host tier";
    }
    return std::nullopt;
  }
  if (r.slot >= store.header_pages.size() * uint64_t{store.slots_per_page}) return "slot past the header pages";
  if (r.bytes_total == 0 || r.payload_offset < uint64_t{store.arena_pages} * page_bytes ||
      r.payload_offset >= store_bytes || r.bytes_total > store_bytes - r.payload_offset) {
    return "payload outside the payload space";
  }
  return std::nullopt;
}

}  // namespace

size_t JournaledStores::object_count() const {
  size_t n = 0;
  for (const JournaledStore& d : devices) n += d.objects.size();
  return n;
}

std::vector<ObjectJournal::Sections> ObjectJournal::Place(
    const std::vector<std::pair<uint32_t, uint32_t>>& counts) {
  std::vector<Sections> out(counts.size());
  uint64_t at = kHeaderBytes + kRowBytes * counts.size();
  for (size_t d = 0; d < counts.size(); ++d) {
    Sections& s = out[d];
    s.row = kHeaderBytes + kRowBytes * d;
    s.store_pages = counts[d].first;
    s.max_objects = counts[d].second;
    s.pages = at;
    s.headers = s.pages + 4 * uint64_t{s.store_pages};
    s.records = (s.headers + 4 * uint64_t{s.store_pages} + 63) & ~uint64_t{63};
    s.end = s.records + kRecordBytes * uint64_t{s.max_objects};
    at = s.end;
  }
  return out;
}

Result<JournaledStores> ObjectJournal::Decode(std::span<const std::byte> bytes) {
  FileHeader header{};
  if (bytes.size() < kHeaderBytes) return Bad("it is shorter than an object journal's header");
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.magic != kMagic) return Bad("it is not an object journal (wrong magic)");
  if (header.version < kOldestVersion || header.version > kVersion) {
    return Bad("version " + std::to_string(header.version) + "; this kvd reads versions " +
               std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  }
  if (header.device_count == 0 || header.device_count > ipc::kMaxDevices) {
    return Bad(std::to_string(header.device_count) + " devices (1 to " + std::to_string(ipc::kMaxDevices) + ")");
  }
  if (header.page_bytes < 4096 || (header.page_bytes & (header.page_bytes - 1)) != 0 ||
      header.page_bytes > (uint64_t{1} << 40)) {
    return Bad("page size " + std::to_string(header.page_bytes) + " is not a power of two from 4 KiB");
  }
  if (bytes.size() < kHeaderBytes + kRowBytes * header.device_count) return Bad("its device table is cut short");
  std::vector<DeviceRow> rows(header.device_count);
  std::vector<std::pair<uint32_t, uint32_t>> counts;
  for (uint32_t d = 0; d < header.device_count; ++d) {
    DeviceRow& row = rows[d];
    std::memcpy(&row, bytes.data() + kHeaderBytes + kRowBytes * d, sizeof(row));
    const std::string where = "device row " + std::to_string(d) + ": ";
    if (row.ordinal < 0 || static_cast<uint32_t>(row.ordinal) >= ipc::kMaxDevices) {
      return Bad(where + "ordinal " + std::to_string(row.ordinal));
    }
    for (uint32_t e = 0; e < d; ++e) {
      if (rows[e].ordinal == row.ordinal) return Bad(where + "device " + std::to_string(row.ordinal) + " twice");
    }
    if (row.store_pages < 2 || row.store_pages > kMaxStorePages || row.arena_pages == 0 ||
        row.arena_pages >= row.store_pages || row.header_count < row.arena_pages ||
        row.header_count > row.store_pages) {
      return Bad(where + std::to_string(row.store_pages) + " store pages, " + std::to_string(row.arena_pages) +
                 " arena pages, " + std::to_string(row.header_count) + " header pages do not fit");
    }
    if (row.slots_per_page == 0 || row.slots_per_page > header.page_bytes / sizeof(ObjectHeader) ||
        row.max_objects == 0 || row.max_objects > kMaxRecords) {
      return Bad(where + std::to_string(row.slots_per_page) + " slots a page, " +
                 std::to_string(row.max_objects) + " records are out of range");
    }
    if (header.version < 2) row.host_pages = 0;  // reserved bytes there
    if (row.host_pages > kMaxStorePages) {
      return Bad(where + std::to_string(row.host_pages) + " host tier pages are out of range");
    }
    counts.emplace_back(row.store_pages, row.max_objects);
  }
  const std::vector<Sections> sections = Place(counts);
  if (header.total_bytes != sections.back().end || bytes.size() != sections.back().end) {
    return Bad("it is " + std::to_string(bytes.size()) + " bytes and says " + std::to_string(header.total_bytes) +
               "; its devices make " + std::to_string(sections.back().end));
  }
  JournaledStores out;
  out.page_bytes = header.page_bytes;
  for (uint32_t d = 0; d < header.device_count; ++d) {
    const DeviceRow& row = rows[d];
    const Sections& at = sections[d];
    const std::string where = "device " + std::to_string(row.ordinal) + ": ";
    JournaledStore store;
    store.device = row.ordinal;
    store.arena_pages = row.arena_pages;
    store.slots_per_page = row.slots_per_page;
    store.max_objects = row.max_objects;
    store.last_epoch = row.last_epoch;
    store.host_pages = row.host_pages;
    store.pages.resize(row.store_pages);
    std::memcpy(store.pages.data(), bytes.data() + at.pages, 4 * size_t{row.store_pages});
    std::vector<uint32_t> sorted = store.pages;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return Bad(where + "a page id twice");
    store.header_pages.resize(row.header_count);
    std::memcpy(store.header_pages.data(), bytes.data() + at.headers, 4 * size_t{row.header_count});
    std::vector<bool> seen(row.store_pages, false);
    for (uint32_t h = 0; h < row.header_count; ++h) {
      const uint32_t index = store.header_pages[h];
      const bool ok = h < row.arena_pages ? index == h : index >= row.arena_pages && index < row.store_pages;
      if (!ok || seen[index]) {
        return Bad(where + "header page " + std::to_string(h) + " is store page " + std::to_string(index));
      }
      seen[index] = true;
    }
    for (uint32_t r = 0; r < row.max_objects; ++r) {
      RecordBytes record;
      std::memcpy(&record, bytes.data() + at.records + kRecordBytes * uint64_t{r}, sizeof(record));
      if (record.checksum == 0) continue;
      std::optional<std::string> fault;
      if (record.checksum != Checksum(record, d, r)) {
        fault = "checksum mismatch (torn)";
      } else if (header.version < 2 && record.tier != 0) {
        fault = "a tier in a journal of version 1";
      } else {
        fault = RecordFault(record, store, header.page_bytes);
      }
      if (fault) {
        // The key too, when it is one: an operator can tell which object went.
        const std::string_view key(record.key, std::min<size_t>(record.key_bytes, kMaxObjectKeyBytes));
        spdlog::warn("object journal: {}record {}{} skipped: {}", where, r,
                     ValidObjectKey(key) ? " ('" + std::string(key.substr(0, 80)) + "')" : std::string(), *fault);
        ++store.bad_records;
        continue;
      }
      JournaledObject object;
      object.key.assign(record.key, record.key_bytes);
      object.committed = (record.flags & kCommitted) != 0;
      object.tier = static_cast<Tier>(record.tier);
      object.slot = record.slot;
      object.epoch = record.epoch;
      object.owner = record.owner;
      object.pin = static_cast<ObjectPin>(record.pin);
      object.seq = record.seq;
      object.payload_offset = record.payload_offset;
      object.bytes_total = record.bytes_total;
      store.objects.push_back(std::move(object));
    }
    out.devices.push_back(std::move(store));
  }
  return out;
}

std::optional<JournaledStores> ObjectJournal::TakeOver(const std::string& path) {
  // At most every device at the bounds Decode allows.
  constexpr uint64_t kMaxBytes = uint64_t{ipc::kMaxDevices} * (8 * uint64_t{kMaxStorePages} + 64 +
                                                               kRecordBytes * uint64_t{kMaxRecords}) + 4096;
  auto bytes = ReadOwnFile(path, "object journal", kMaxBytes);
  if (!bytes.ok() && bytes.status().code() == Code::kNotFound) return std::nullopt;
  Status fault = bytes.status();
  if (fault.ok()) {
    auto stores = Decode(*bytes);
    if (stores.ok()) return std::move(stores).value();
    fault = Bad("object journal " + path + " is refused: " + std::string(stores.status().message()));
  }
  spdlog::warn("kvd: {}; removing it: the store's objects will not come back", fault.message());
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("kvd: removing {}: {}", path, Status::FromErrno("unlink", errno, path).ToString());
  }
  return std::nullopt;
}

Result<std::unique_ptr<ObjectJournal>> ObjectJournal::Create(const std::string& path, uint64_t page_bytes,
                                                             const std::vector<Layout>& layouts) {
  if (layouts.empty() || layouts.size() > ipc::kMaxDevices) {
    return Status::InvalidArgument("object journal: " + std::to_string(layouts.size()) + " devices");
  }
  std::vector<std::pair<uint32_t, uint32_t>> counts;
  for (const Layout& layout : layouts) {
    if (layout.pages.size() < 2 || layout.pages.size() > kMaxStorePages || layout.arena_pages == 0 ||
        layout.arena_pages >= layout.pages.size() || layout.max_objects == 0 || layout.max_objects > kMaxRecords ||
        layout.slots_per_page == 0 || layout.host_pages > kMaxStorePages) {
      return Status::InvalidArgument("object journal: device " + std::to_string(layout.device) +
                                     ": a store layout out of the journal's range");
    }
    counts.emplace_back(static_cast<uint32_t>(layout.pages.size()), layout.max_objects);
  }
  std::vector<Sections> sections = Place(counts);
  const uint64_t total = sections.back().end;
  const std::string private_path = path + ".new" + std::to_string(getpid());
  NANOKV_ASSIGN_OR_RETURN(void* base, CreateMappedFile(private_path, total, "object journal"));
  std::unique_ptr<ObjectJournal> journal(
      new ObjectJournal(base, total, path, private_path, std::move(sections)));
  FileHeader header{};
  header.version = kVersion;
  header.device_count = static_cast<uint32_t>(layouts.size());
  header.page_bytes = page_bytes;
  header.total_bytes = total;
  for (size_t d = 0; d < layouts.size(); ++d) {
    const Layout& layout = layouts[d];
    const Sections& at = journal->sections_[d];
    DeviceRow row{};
    row.ordinal = layout.device;
    row.store_pages = at.store_pages;
    row.arena_pages = layout.arena_pages;
    row.slots_per_page = layout.slots_per_page;
    row.max_objects = layout.max_objects;
    row.header_count = layout.arena_pages;
    row.host_pages = layout.host_pages;
    std::memcpy(journal->At(at.row), &row, sizeof(row));
    std::memcpy(journal->At(at.pages), layout.pages.data(), 4 * layout.pages.size());
    for (uint32_t h = 0; h < layout.arena_pages; ++h) std::memcpy(journal->At(at.headers + 4 * h), &h, 4);
  }
  std::memcpy(base, &header, sizeof(header));
  std::atomic_ref<uint64_t>(static_cast<FileHeader*>(base)->magic).store(kMagic, std::memory_order_release);
  return journal;
}

ObjectJournal::ObjectJournal(void* base, size_t bytes, std::string path, std::string private_path,
                             std::vector<Sections> sections)
    : base_(base),
      bytes_(bytes),
      path_(std::move(path)),
      private_path_(std::move(private_path)),
      sections_(std::move(sections)) {}

ObjectJournal::~ObjectJournal() {
  munmap(base_, bytes_);
  if (!installed_) unlink(private_path_.c_str());
}

Status ObjectJournal::Install() {
  if (installed_) return Status::OK();
  if (rename(private_path_.c_str(), path_.c_str()) != 0) {
    return Status::FromErrno("rename", errno, private_path_ + " -> " + path_);
  }
  installed_ = true;
  return Status::OK();
}

void ObjectJournal::Remove() {
  const std::string& path = installed_ ? path_ : private_path_;
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("kvd: removing the object journal: {}", Status::FromErrno("unlink", errno, path).ToString());
  }
}

void ObjectJournal::SetHeaderPage(size_t d, uint32_t ordinal, uint32_t index) {
  if (d >= sections_.size() || ordinal >= sections_[d].store_pages) return;
  std::memcpy(At(sections_[d].headers + 4 * uint64_t{ordinal}), &index, 4);
  auto* row = reinterpret_cast<DeviceRow*>(At(sections_[d].row));
  // The entry first: a kvd killed between the two leaves the old count.
  if (ordinal + 1 > row->header_count) {
    std::atomic_ref<uint32_t>(row->header_count).store(ordinal + 1, std::memory_order_release);
  }
}

void ObjectJournal::SetLastEpoch(size_t d, uint32_t epoch) {
  if (d >= sections_.size()) return;
  auto* row = reinterpret_cast<DeviceRow*>(At(sections_[d].row));
  std::atomic_ref<uint32_t>(row->last_epoch).store(epoch, std::memory_order_relaxed);
}

void ObjectJournal::Record(size_t d, uint32_t record, const JournaledObject& object) {
  if (d >= sections_.size() || record >= sections_[d].max_objects) return;
  auto* slot = reinterpret_cast<RecordBytes*>(At(sections_[d].records + kRecordBytes * uint64_t{record}));
  RecordBytes fresh{};
  fresh.seq = object.seq;
  fresh.payload_offset = object.payload_offset;
  fresh.bytes_total = object.bytes_total;
  fresh.slot = object.slot;
  fresh.epoch = object.epoch;
  fresh.owner = object.owner;
  fresh.key_bytes = static_cast<uint16_t>(std::min(object.key.size(), kMaxObjectKeyBytes));
  fresh.pin = static_cast<uint16_t>(object.pin);
  fresh.flags = object.committed ? kCommitted : 0;
  fresh.tier = static_cast<uint8_t>(object.tier);
  std::memcpy(fresh.key, object.key.data(), fresh.key_bytes);
  fresh.checksum = Checksum(fresh, d, record);
  // Zeroed, then the body, then the checksum: a kill in between leaves a
  // record that fails its checksum, never a whole-looking wrong one.
  std::atomic_ref<uint64_t>(slot->checksum).store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::memcpy(reinterpret_cast<std::byte*>(slot) + 8, reinterpret_cast<const std::byte*>(&fresh) + 8,
              sizeof(fresh) - 8);
  std::atomic_ref<uint64_t>(slot->checksum).store(fresh.checksum, std::memory_order_release);
}

void ObjectJournal::Clear(size_t d, uint32_t record) {
  if (d >= sections_.size() || record >= sections_[d].max_objects) return;
  auto* slot = reinterpret_cast<RecordBytes*>(At(sections_[d].records + kRecordBytes * uint64_t{record}));
  std::atomic_ref<uint64_t>(slot->checksum).store(0, std::memory_order_release);
}

std::span<const std::byte> ObjectJournal::bytes() const {
  return {static_cast<const std::byte*>(base_), bytes_};
}

}  // namespace nanokv::kvd
