// The page journal: which page ids kvd has granted, to which tenant group, at
// which generation, kept in a /dev/shm file so that it outlives kvd. When kvd
// dies (kill -9, a crash), engines keep the pages they mapped (their imported
// handles keep the memory alive, backend rule 3) and reconnect; the next kvd
// of the same IPC name reads the journal, holds those ids back from its pool
// and waits for the engines to hand each page back (NodeState::Adopt), so no
// id is granted twice and no page is lost (docs/ARCHITECTURE.md, "kvd restart").
//
// Format: a header, a table of group names, then one 64-bit entry per page id
// per device: generation << 32 | (group index + 1) << 16 | held. Each entry is
// written with one aligned 64-bit store, so a kvd that dies mid-update leaves
// every entry either old or new, never torn. Entries are written before kvd
// answers the request that changed them, so a page an engine was told it
// holds is always journaled as held; the reverse (held in the journal, not
// in any engine) only costs the restart's recovery window for that id.
//
// Only one kvd serves an IPC name at a time (the state segment guarantees
// it), so the journal needs no lock: a journal found at start is a dead kvd's.
#ifndef NANOKV_DAEMON_NODE_PAGE_JOURNAL_H_
#define NANOKV_DAEMON_NODE_PAGE_JOURNAL_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/node/page_types.h"
#include "nanokv/status.h"

namespace nanokv::ipc {
class ShmMapping;
}

namespace nanokv::kvd {

// One page a dead kvd had granted.
struct RecoveredPage {
  alloc::PageId id = 0;
  uint32_t generation = 0;
  std::string group;
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
  // The shared-memory name of the journal of `ipc_name` ("nanokv-pages_<ipc>",
  // outside the "nanokv_" prefix that state segments use).
  static std::string ShmName(const std::string& ipc_name);

  // Reads the journal a previous kvd of `ipc_name` left and removes it.
  // nullopt when there is none; a journal this build cannot read is logged,
  // removed, and answered as nullopt (nothing to recover, nothing to trust).
  // REQUIRES: this process owns the IPC name (its state segment is created).
  static std::optional<Recovery> TakeOver(const std::string& ipc_name);

  // Creates this kvd's journal (replacing none: TakeOver removed the old one).
  static Result<std::unique_ptr<PageJournal>> Create(const std::string& ipc_name,
                                                     size_t page_bytes,
                                                     const std::vector<JournalDevice>& devices,
                                                     mode_t mode, std::optional<gid_t> gid);
  ~PageJournal();
  PageJournal(const PageJournal&) = delete;
  PageJournal& operator=(const PageJournal&) = delete;

  // Names group `index` (ignored beyond the table's kMaxGroups, logged once).
  void SetGroup(int index, const std::string& name);
  // Records page `id` of device index `d`: its generation, owner group
  // (-1: none) and whether some tenant holds it.
  void SetPage(size_t d, alloc::PageId id, uint32_t generation, int group, bool held);
  // Unlinks the journal (a clean stop with no page held: nothing to recover).
  void Remove();

  static constexpr int kMaxGroups = 1024;

 private:
  PageJournal(std::unique_ptr<ipc::ShmMapping> mapping, std::string shm_name,
              std::vector<uint64_t> offsets, std::vector<uint32_t> capacities);

  std::unique_ptr<ipc::ShmMapping> mapping_;
  std::string shm_name_;
  std::vector<uint64_t> entry_offsets_;  // by device index: byte offset of its entries
  std::vector<uint32_t> capacities_;
  bool warned_groups_ = false;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_PAGE_JOURNAL_H_
