#include "daemon/objects/read_table.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace nanokv::kvd {

Result<std::unique_ptr<ReadTable>> ReadTable::Create(size_t devices, uint32_t entries) {
  std::unique_ptr<ReadTable> table(new ReadTable(devices, entries));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  table->layout_ = {devices, entries, ipc::DirectoryBucketsFor(devices * entries)};
  table->slot_of_.assign(devices * entries, 0);
  table->bytes_ = std::max(page, (table->layout_.Bytes() + page - 1) / page * page);
  auto fail = [](const char* what) {
    return Status::Internal(std::string("object store read table: ") + what + ": " + std::strerror(errno));
  };
  table->fd_ = memfd_create("nanokv-read-table", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (table->fd_ < 0) return fail("memfd_create");
  if (ftruncate(table->fd_, static_cast<off_t>(table->bytes_)) != 0) return fail("ftruncate");
  // Not reopenable read-write by another uid through /proc/self/fd (a memfd is 0777).
  if (fchmod(table->fd_, 0600) != 0) return fail("fchmod 0600");
  void* at = mmap(nullptr, table->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, table->fd_, 0);
  if (at == MAP_FAILED) return fail("mmap");
  table->words_ = static_cast<uint32_t*>(at);
  table->dir_ = static_cast<uint64_t*>(at);
  // After kvd's mapping: no new writable one, for anyone (kvd's stays).
  if (fcntl(table->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
    const int err = errno;
    return Status::Unimplemented(std::string("object store read table: sealing against writes: ") + std::strerror(err) +
                                 " (Linux 5.1 or later seals a memfd so)");
  }
  return table;
}

ReadTable::~ReadTable() {
  if (words_ != nullptr) munmap(words_, bytes_);
  if (fd_ >= 0) close(fd_);
}

uint32_t* ReadTable::Word(size_t d, uint32_t record) const {
  if (d >= devices_ || record >= entries_) return nullptr;
  return words_ + d * entries_ + record;
}

// Seq-cst stores: a withdrawal is in memory before kvd goes on to give the
// space away (the reply that does so is a later syscall).
void ReadTable::Publish(size_t d, uint32_t record, uint32_t epoch) {
  if (uint32_t* word = Word(d, record)) std::atomic_ref<uint32_t>(*word).store(epoch);
}

void ReadTable::Withdraw(size_t d, uint32_t record) {
  if (uint32_t* word = Word(d, record)) std::atomic_ref<uint32_t>(*word).store(0);
  Unlist(d, record);
}

void ReadTable::PublishLocation(size_t d, uint32_t record, std::string_view key, uint64_t key_hash,
                                uint64_t payload_offset, uint64_t bytes, uint32_t epoch) {
  if (Word(d, record) == nullptr) return;
  Publish(d, record, epoch);
  Unlist(d, record);  // a record is rewritten only while no bucket names it
  if (key.empty() || key.size() > ipc::kDirectoryKeyBytes) return;
  const size_t bucket = layout_.Bucket(key_hash);
  size_t free_slot = 0;
  for (size_t slot = 1; slot <= ipc::kDirectorySlots && free_slot == 0; ++slot) {
    if (ipc::DirectoryWord(dir_, bucket + slot).load(std::memory_order_relaxed) == 0) free_slot = bucket + slot;
  }
  if (free_slot == 0) return;  // a full bucket: its reader asks kvd
  const size_t at = layout_.Record(d, record);
  ipc::DirectoryWord(dir_, at + ipc::kRecordOffsetWord).store(payload_offset, std::memory_order_release);
  ipc::DirectoryWord(dir_, at + ipc::kRecordBytesWord).store(bytes, std::memory_order_release);
  ipc::DirectoryWord(dir_, at + ipc::kRecordEpochWord)
      .store(ipc::PackEpochAndKeyLength(epoch, key.size()), std::memory_order_release);
  ipc::StoreDirectoryKey(dir_, at, key);
  BumpSeq(bucket);
  ipc::DirectoryWord(dir_, free_slot).store(uint64_t{d} << 32 | (record + 1), std::memory_order_release);
  BumpSeq(bucket);
  slot_of_[d * entries_ + record] = free_slot;
}

void ReadTable::Unlist(size_t d, uint32_t record) {
  if (Word(d, record) == nullptr) return;
  size_t& slot = slot_of_[d * entries_ + record];
  if (slot == 0) return;
  const size_t bucket =
      layout_.BucketsWord() + (slot - layout_.BucketsWord()) / ipc::kDirectoryBucketWords * ipc::kDirectoryBucketWords;
  BumpSeq(bucket);
  ipc::DirectoryWord(dir_, slot).store(0, std::memory_order_release);
  BumpSeq(bucket);
  slot = 0;
}

void ReadTable::BumpSeq(size_t bucket) {
  auto seq = ipc::DirectoryWord(dir_, bucket);
  seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

std::optional<ReadTable::Listed> ReadTable::ListedAt(size_t d, uint32_t record) const {
  if (Word(d, record) == nullptr || slot_of_[d * entries_ + record] == 0) return std::nullopt;
  const size_t at = layout_.Record(d, record);
  Listed listed;
  listed.payload_offset = ipc::DirectoryWord(dir_, at + ipc::kRecordOffsetWord).load(std::memory_order_relaxed);
  listed.bytes = ipc::DirectoryWord(dir_, at + ipc::kRecordBytesWord).load(std::memory_order_relaxed);
  const uint64_t packed = ipc::DirectoryWord(dir_, at + ipc::kRecordEpochWord).load(std::memory_order_relaxed);
  listed.epoch = ipc::EpochOf(packed);
  listed.key.resize(std::min(ipc::KeyLengthOf(packed), ipc::kDirectoryKeyBytes));
  ipc::LoadDirectoryKey(dir_, at, listed.key.size(), listed.key.data(), std::memory_order_relaxed);
  return listed;
}

uint32_t ReadTable::At(size_t d, uint32_t record) const {
  uint32_t* word = Word(d, record);
  return word == nullptr ? 0 : std::atomic_ref<uint32_t>(*word).load();
}

Result<int> ReadTable::ReaderFd() const {
  // A new open file description that reads only (the seal already refuses
  // a writable mapping; this refuses the rest).
  const std::string path = "/proc/self/fd/" + std::to_string(fd_);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::Internal("object store read table: opening it read-only: " + std::string(std::strerror(errno)));
  return fd;
}

}  // namespace nanokv::kvd
