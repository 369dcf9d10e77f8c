// The object journal: what kvd knows of its committed
// objects, kept in a /dev/shm file beside the page journal so it outlives
// kvd, for the next kvd to bring the store's index back after a restart.
//
// Why a file of kvd's and not key bytes in the store: the store's headers
// (nanokv/object_header.h) hold the key's hash only, and are written by
// producers, who are not trusted; kvd writes nothing on the device while it
// serves, so it cannot mark a removed object DEAD there
// either: a removed object's header still says READY at its epoch. This file
// is kvd's own record: every object kvd opened (key, slot, epoch, payload
// range, owner uid, pin, creation order, whether committed), cleared when
// the object goes, plus
// each device's store layout (page ids in range order, which store pages are
// header pages) and the last epoch issued. At a restart an object comes back
// only if its record is whole and its header in the store still says
// {READY, that epoch} with the same hash, range and size
// (object_recovery.h): the header tells the bytes are there, the record what
// they are and whose.
//
// Host-tier objects (object_store.host_tier) are recorded too, with their
// tier: no header slot (slot 0), their payload offset in the device's host
// tier, whose size in pages the device row keeps; a restart brings them
// back from the host tier's memfds the page keeper held (no header vouches
// for them: the host tier is kvd's memory alone, written by kvd's copies).
// A move between tiers writes the object's new record into a free record
// before it clears the old one, so a kill in between leaves both, never
// neither, and the scan keeps one (object_recovery.h).
//
// Format (version 2, little-endian; version 1, without tiers, is read too):
// a 64-byte header, one 64-byte device table row per device, then per device its page ids (u32 per store page),
// its header page table (u32 store page index per header ordinal, as many
// as store pages) and its records (kRecordBytes each, max_objects of them).
// Sections are placed by the counts alone (no offsets are read from the
// file). Each record starts with a checksum (xxhash64 of the rest, seeded
// with its device and index, so a record copied elsewhere fails), written
// last and zeroed first: a kvd killed mid-write leaves a record that fails
// its checksum, which the next kvd skips (its object is reclaimed).
//
// Where: <run dir>/<ipc>.objects (base/naming.h), read as hostile input as
// the page journal is (opened without following links, refused unless a
// plain file of kvd's uid that others cannot write, every field checked).
//
// Threads: none of its own. The object store writes it under its mutex.
#ifndef NANOKV_DAEMON_OBJECTS_OBJECT_JOURNAL_H_
#define NANOKV_DAEMON_OBJECTS_OBJECT_JOURNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/objects/payload_placement.h"
#include "nanokv/object_header.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// One object as kvd recorded it: at its open (WRITING), again at its commit.
struct JournaledObject {
  std::string key;
  bool committed = false;       // kvd answered its commit: READY in kvd's index
  Tier tier = Tier::kGpu;       // where its bytes lie: the store or the host tier
  uint32_t slot = 0;            // header slot: ordinal * slots_per_page + index (host tier: 0)
  uint32_t epoch = 0;
  uint32_t owner = 0;           // the producer's uid, or kvd's own callers
  ObjectPin pin = ObjectPin::kNone;
  uint64_t seq = 0;             // creation order (FIFO eviction)
  uint64_t payload_offset = 0;  // in the store range, or in the host tier
  uint64_t bytes_total = 0;
};

// One device's store as the journal recorded it.
struct JournaledStore {
  int device = 0;
  uint32_t arena_pages = 0;
  uint32_t slots_per_page = 0;
  uint32_t max_objects = 0;
  uint32_t last_epoch = 0;               // the last epoch kvd issued on it
  uint32_t host_pages = 0;               // its host tier's pages (0: none)
  std::vector<uint32_t> pages;           // page ids, in store range order
  std::vector<uint32_t> header_pages;    // store page index by header ordinal
  std::vector<JournaledObject> objects;  // whole, in-range records
  uint32_t bad_records = 0;              // torn or out of range: skipped
};

struct JournaledStores {
  uint64_t page_bytes = 0;
  std::vector<JournaledStore> devices;
  size_t object_count() const;
};

class ObjectJournal {
 public:
  static constexpr size_t kRecordBytes = 320;
  // Records per device a journal may hold: a bound on what a file can make
  // kvd allocate (max_objects is at most this).
  static constexpr uint32_t kMaxRecords = 1u << 22;

  // A device's store as this kvd lays it out.
  struct Layout {
    int device = 0;
    std::vector<uint32_t> pages;  // page ids in range order
    uint32_t arena_pages = 0;
    uint32_t slots_per_page = 0;
    uint32_t max_objects = 0;  // records
    uint32_t host_pages = 0;   // the host tier under the store, in pages
  };

  // What a journal's bytes say. kInvalidArgument naming the first fault of
  // its structure (magic, version, sizes, counts, page ids, header table);
  // a record that fails its checksum or whose fields are out of range is
  // skipped and counted instead (bad_records). Never reads outside `bytes`.
  static Result<JournaledStores> Decode(std::span<const std::byte> bytes);
  // Reads the journal a previous kvd left at `path`: nullopt when there is
  // none or it is refused (then logged naming the file and the fault, and
  // removed). REQUIRES: this process holds the run directory's lock.
  static std::optional<JournaledStores> TakeOver(const std::string& path);

  // Makes this kvd's journal under a private name beside `path` (0600):
  // the layouts, the arena's header pages, no record.
  static Result<std::unique_ptr<ObjectJournal>> Create(const std::string& path, uint64_t page_bytes,
                                                       const std::vector<Layout>& layouts);
  // Unmaps; unlinks the private file if Install never ran.
  ~ObjectJournal();
  ObjectJournal(const ObjectJournal&) = delete;
  ObjectJournal& operator=(const ObjectJournal&) = delete;
  // Renames it over `path` (the previous kvd's is replaced).
  Status Install();
  // Unlinks it (a stop: the store's pages go with kvd).
  void Remove();

  // Writes below ignore a device index or record past the layout.
  // Header ordinal `ordinal` is store page `index` (a payload page made a
  // header page): the entry, then the count, so a torn update is unseen.
  void SetHeaderPage(size_t d, uint32_t ordinal, uint32_t index);
  void SetLastEpoch(size_t d, uint32_t epoch);
  // Record `record` of device index `d` holds `object` (the checksum zeroed
  // first, stored last).
  void Record(size_t d, uint32_t record, const JournaledObject& object);
  void Clear(size_t d, uint32_t record);
  std::span<const std::byte> bytes() const;

 private:
  // Where a device's parts lie, from its counts alone.
  struct Sections {
    uint64_t row = 0, pages = 0, headers = 0, records = 0, end = 0;
    uint32_t store_pages = 0, max_objects = 0;
  };
  static std::vector<Sections> Place(const std::vector<std::pair<uint32_t, uint32_t>>& counts);

  ObjectJournal(void* base, size_t bytes, std::string path, std::string private_path,
                std::vector<Sections> sections);
  std::byte* At(uint64_t offset) const { return static_cast<std::byte*>(base_) + offset; }

  void* base_;
  size_t bytes_;
  std::string path_;
  std::string private_path_;
  bool installed_ = false;
  std::vector<Sections> sections_;  // by device index
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_OBJECT_JOURNAL_H_
