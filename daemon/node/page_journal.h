// The page journal: which page ids kvd has granted, to which tenant group, at
// which generation, kept in a /dev/shm file so that it outlives kvd. When kvd
// dies (kill -9, a crash), engines keep the pages they mapped (their imported
// handles keep the memory alive, backend rule 3) and reconnect; the next kvd
// of the same IPC name reads the journal, holds those ids back from its pool
// and waits for the engines to hand each page back (NodeState::Adopt), so no
// id is granted twice and no page is lost (docs/ARCHITECTURE.md, "kvd restart").
// Engines hand pages back by id and generation alone: the journal is what
// vouches for each claim (no fd is kept per page, "The engine side").
//
// Format: a header, a table of group names, then one 64-bit entry per page id
// per device: generation << 32 | (group index + 1) << 16 | kvd's own << 1 |
// held (version 3; version 2 had no kvd's-own bit and is still read). The
// object store's pages are journaled held under kvd's own group (bit 1), so
// the next kvd holds their ids back for the page keeper to hand them back
// (daemon/node/page_keeper.h), and no engine group of the same name can
// claim them. Each entry is
// written with one aligned 64-bit store, so a kvd that dies mid-update leaves
// every entry either old or new, never torn. Entries are written before kvd
// answers the request that changed them, so a page an engine was told it
// holds is always journaled as held; the reverse (held in the journal, not
// in any engine) only costs the restart's recovery window for that id.
//
// Where: <run dir>/<ipc>.journal (base/naming.h), in the directory only kvd's
// uid may write (base/run_dir.h), so nobody else can plant or squat one. It is
// still read as hostile input: opened without following links, refused unless
// a plain file of kvd's uid that others cannot write, and decoded with every
// field range-checked (Decode, fuzzed by fuzz/fuzz_journal_decode.cc). A
// journal refused is logged naming the file and the fault, and removed, so it
// never meets a second start. A new journal is made whole under a private
// name and renamed over the old one (Install), so a start that fails before
// leaves the old one for the next.
//
// Only one kvd serves an IPC name from a run directory at a time (its lock,
// base/run_dir.h), so the journal needs no lock: a journal found at start is
// a dead or stopped kvd's.
#ifndef NANOKV_DAEMON_NODE_PAGE_JOURNAL_H_
#define NANOKV_DAEMON_NODE_PAGE_JOURNAL_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/node/page_types.h"
#include "ipc/segment/journal_header.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// One page a dead kvd had granted.
struct RecoveredPage {
  PageId id = 0;
  uint32_t generation = 0;
  std::string group;
  bool kvd_owned = false;  // a group of kvd's own tenants (the object store)
};

// What a dead kvd's journal says was held, per device ordinal.
struct Recovery {
  size_t page_bytes = 0;
  struct Device {
    int device = 0;
    uint32_t capacity_pages = 0;
    std::vector<RecoveredPage> pages;
  };
  std::vector<Device> devices;
  size_t page_count() const;
};

// One device's geometry, for the journal's table.
struct JournalDevice {
  int device = 0;
  uint32_t capacity_pages = 0;
};

class PageJournal {
 public:
  static constexpr int kMaxGroups = ipc::kJournalMaxGroups;

  // The pages a journal's bytes say were held. kInvalidArgument naming the
  // first fault (magic, version, sizes, device count and ordinals, page
  // counts, page size, group names, an entry's group index or reserved bits).
  // Never reads outside `bytes`, whatever they hold.
  static Result<Recovery> Decode(std::span<const std::byte> bytes);

  // Reads the journal a previous kvd left at `path`. nullopt when there is
  // none, or when it is refused (not a plain file of kvd's uid that others
  // cannot write, unreadable, or not a journal Decode accepts): then it is
  // logged naming the file and the fault, and removed. A journal read is left
  // in place until Install replaces it.
  // REQUIRES: this process holds the run directory's lock for the IPC name.
  static std::optional<Recovery> TakeOver(const std::string& path);

  // Makes this kvd's journal under a private name beside `path` (0600),
  // empty (nothing held). `recovery_window_ms` is kept for `kvctl cleanup`
  // (a journal older than that after its kvd stopped is nobody's any more).
  static Result<std::unique_ptr<PageJournal>> Create(const std::string& path, size_t page_bytes,
                                                     const std::vector<JournalDevice>& devices,
                                                     uint64_t recovery_window_ms);
  // Unlinks the private file if Install never ran.
  ~PageJournal();
  PageJournal(const PageJournal&) = delete;
  PageJournal& operator=(const PageJournal&) = delete;

  // Renames the journal over `path`, replacing the old one, once it holds
  // this kvd's state (NodeState::SetJournal wrote it).
  Status Install();

  // Names group `index` (ignored beyond the table's kMaxGroups, logged once).
  void SetGroup(int index, const std::string& name);
  // Records page `id` of device index `d`: its generation, owner group
  // (-1: none), whether some tenant holds it and whether the group is kvd's own.
  void SetPage(size_t d, PageId id, uint32_t generation, int group, bool held, bool kvd_owned = false);
  // Says kvd stopped now, with pages still held: the journal stays for the
  // next kvd, and `kvctl cleanup` counts the recovery window from here.
  void MarkStopped();
  // Unlinks the journal (a stop with no page held: nothing to recover).
  void Remove();

 private:
  PageJournal(void* base, size_t bytes, std::string path, std::string private_path,
              std::vector<uint64_t> offsets, std::vector<uint32_t> capacities);

  void* base_;
  size_t bytes_;
  std::string path_;
  std::string private_path_;
  bool installed_ = false;
  std::vector<uint64_t> entry_offsets_;  // by device index: byte offset of its entries
  std::vector<uint32_t> capacities_;
  bool warned_groups_ = false;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_PAGE_JOURNAL_H_
