// kvd's read table as a reader maps it (daemon/objects/read_table.h;
// ARCHITECTURE.md, "Reads without a lease"): read-only, one 32-bit word
// per object record of each device of kvd's store. A copy taken from a
// plan with a read entry is the object's when the entry still holds the
// plan's epoch after the copy is done.
#ifndef NANOKV_LIBKV_CLIENT_READ_TABLE_VIEW_H_
#define NANOKV_LIBKV_CLIENT_READ_TABLE_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::client {

class ReadTableView {
 public:
  // Maps `fd` (taken: closed here) read-only: `entries` words for each of
  // `devices` (kvd's ordinals), in that order. kProtocolError when the fd
  // is smaller than that.
  static Result<std::unique_ptr<ReadTableView>> Map(int fd, uint32_t entries, std::vector<int> devices);
  ~ReadTableView();
  ReadTableView(const ReadTableView&) = delete;
  ReadTableView& operator=(const ReadTableView&) = delete;

  // Whether kvd's entry `read_entry` (a plan's: index plus one) of its
  // device `device` holds `epoch` now. An acquire load: call it after the
  // copy it vouches for is done.
  bool Holds(int device, uint32_t read_entry, uint32_t epoch) const;

 private:
  ReadTableView(uint32_t entries, std::vector<int> devices) : entries_(entries), devices_(std::move(devices)) {}

  uint32_t entries_ = 0;
  std::vector<int> devices_;
  const uint32_t* words_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_READ_TABLE_VIEW_H_
