// kvd's read table as a reader maps it (daemon/objects/read_table.h;
// ARCHITECTURE.md, "Reads without a lease"): read-only, one 32-bit word
// per object record of each device of kvd's store. A copy taken from a
// plan with a read entry is the object's when the entry still holds the
// plan's epoch after the copy is done. After the words, the location
// directory (ipc/segment/location_directory.h): where READY store copies
// lie, found by key with no request to kvd.
#ifndef NANOKV_LIBKV_CLIENT_READ_TABLE_VIEW_H_
#define NANOKV_LIBKV_CLIENT_READ_TABLE_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ipc/segment/location_directory.h"
#include "nanokv/status.h"

namespace nanokv::client {

// A copy the directory lists: check it with Holds(device, read_entry, epoch)
// after reading it, as any unleased read.
struct ListedCopy {
  int device = 0;  // kvd's ordinal
  uint32_t read_entry = 0;
  uint64_t payload_offset = 0;  // into the device's store range
  uint64_t bytes = 0;
  uint32_t epoch = 0;
};

class ReadTableView {
 public:
  // Maps `fd` (taken: closed here) read-only: `entries` words for each of
  // `devices` (kvd's ordinals), in that order, then `buckets` of the
  // directory (0: none). kProtocolError when the fd is smaller than that.
  static Result<std::unique_ptr<ReadTableView>> Map(int fd, uint32_t entries, std::vector<int> devices,
                                                    uint32_t buckets = 0);
  ~ReadTableView();
  ReadTableView(const ReadTableView&) = delete;
  ReadTableView& operator=(const ReadTableView&) = delete;

  // Whether kvd's entry `read_entry` (a plan's: index plus one) of its
  // device `device` holds `epoch` now. An acquire load: call it after the
  // copy it vouches for is done.
  bool Holds(int device, uint32_t read_entry, uint32_t epoch) const;
  // Where the directory says `key` (xxhash64 `key_hash`) lies now, if it
  // lists it.
  std::optional<ListedCopy> Find(std::string_view key, uint64_t key_hash) const;
  bool has_directory() const { return layout_.buckets != 0; }

 private:
  ReadTableView(uint32_t entries, std::vector<int> devices) : entries_(entries), devices_(std::move(devices)) {}

  uint32_t entries_ = 0;
  std::vector<int> devices_;
  const uint32_t* words_ = nullptr;
  size_t bytes_ = 0;
  ipc::DirectoryLayout layout_;
};

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_READ_TABLE_VIEW_H_
