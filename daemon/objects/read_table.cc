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
  table->bytes_ = std::max(page, (devices * entries * sizeof(uint32_t) + page - 1) / page * page);
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
