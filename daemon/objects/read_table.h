// kvd's read table (ARCHITECTURE.md, "Reads without a lease"): per device
// of the store, one 32-bit word per object record, the epoch of the object
// whose copy in the store a reader may take without a lease, 0 for none.
// kvd publishes an entry when it tells a reader where a READY object lies,
// and withdraws it before that copy's space can go to anything else. A
// reader copies the bytes, then finds the entry still at the plan's epoch:
// the copy was the object's, since its space was not reused while it ran.
//
// The same memfd holds the location directory (ipc/segment/
// location_directory.h): every READY store copy by key, so that a reader
// finds one it never asked kvd about. The entry's word is published with
// it, and Withdraw takes both out.
//
// Shared as a sealed memfd (F_SEAL_FUTURE_WRITE): kvd's own mapping writes,
// no reader can map it writable, whatever it does with its fd.
//
// Threads: Publish and Withdraw under the store's mutex; the words are
// atomics, read by readers in other processes at any time.
#ifndef NANOKV_DAEMON_OBJECTS_READ_TABLE_H_
#define NANOKV_DAEMON_OBJECTS_READ_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/segment/location_directory.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

class ReadTable {
 public:
  // `devices` tables of `entries` words each. kUnimplemented where the
  // kernel cannot seal a memfd against future writes (Linux < 5.1): the
  // store then answers every read with a lease.
  static Result<std::unique_ptr<ReadTable>> Create(size_t devices, uint32_t entries);
  ~ReadTable();
  ReadTable(const ReadTable&) = delete;
  ReadTable& operator=(const ReadTable&) = delete;

  // Entry `record` of device index `d` names `epoch` (not 0) / nothing.
  void Publish(size_t d, uint32_t record, uint32_t epoch);
  // Publish, and the copy's location listed in the directory under `key`
  // (key_hash: xxhash64 of it, seed 0) where the key fits and its bucket
  // has room. Withdraw takes out both.
  void PublishLocation(size_t d, uint32_t record, std::string_view key, uint64_t key_hash, uint64_t payload_offset,
                       uint64_t bytes, uint32_t epoch);
  void Withdraw(size_t d, uint32_t record);
  uint32_t At(size_t d, uint32_t record) const;

  // What the directory lists at `record` (for CheckInvariants).
  struct Listed {
    std::string key;
    uint64_t payload_offset = 0;
    uint64_t bytes = 0;
    uint32_t epoch = 0;
  };
  std::optional<Listed> ListedAt(size_t d, uint32_t record) const;

  // A new fd for a reader, open read-only (the caller owns it).
  Result<int> ReaderFd() const;
  uint32_t entries() const { return entries_; }
  uint32_t buckets() const { return layout_.buckets; }
  size_t bytes() const { return bytes_; }

 private:
  ReadTable(size_t devices, uint32_t entries) : devices_(devices), entries_(entries) {}
  uint32_t* Word(size_t d, uint32_t record) const;
  void Unlist(size_t d, uint32_t record);
  // Bumps the seq of the bucket at word `bucket` (odd: changing; even: done).
  void BumpSeq(size_t bucket);

  size_t devices_ = 0;
  uint32_t entries_ = 0;
  size_t bytes_ = 0;
  int fd_ = -1;
  uint32_t* words_ = nullptr;
  uint64_t* dir_ = nullptr;  // the same mapping, as words
  ipc::DirectoryLayout layout_;
  // Per device x record: the word of its slot in the directory, 0: unlisted
  // (kvd's own memory; readers see only the slots).
  std::vector<size_t> slot_of_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_READ_TABLE_H_
