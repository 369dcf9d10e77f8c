#include "libkv/client/read_table_view.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace nanokv::client {

Result<std::unique_ptr<ReadTableView>> ReadTableView::Map(int fd, uint32_t entries, std::vector<int> devices,
                                                          uint32_t buckets) {
  std::unique_ptr<ReadTableView> view(new ReadTableView(entries, std::move(devices)));
  size_t need = view->devices_.size() * size_t{entries} * sizeof(uint32_t);
  // A bucket count that is no power of two is no directory this reader knows.
  if (buckets != 0 && (buckets & (buckets - 1)) == 0 && buckets <= (1u << 30)) {
    view->layout_ = {view->devices_.size(), entries, buckets};
    need = view->layout_.Bytes();
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < need || need == 0) {
    close(fd);
    return Status::ProtocolError("nanokv objects: kvd's read table is not a file of " + std::to_string(need) +
                                 " bytes");
  }
  void* at = mmap(nullptr, need, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (at == MAP_FAILED) return Status::FromErrno("mmap", err, "kvd's read table");
  view->words_ = static_cast<const uint32_t*>(at);
  view->bytes_ = need;
  return view;
}

ReadTableView::~ReadTableView() {
  if (words_ != nullptr) munmap(const_cast<uint32_t*>(words_), bytes_);
}

bool ReadTableView::Holds(int device, uint32_t read_entry, uint32_t epoch) const {
  if (read_entry == 0 || read_entry > entries_ || epoch == 0) return false;
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (devices_[d] != device) continue;
    return __atomic_load_n(words_ + d * entries_ + (read_entry - 1), __ATOMIC_ACQUIRE) == epoch;
  }
  return false;
}

std::optional<ListedCopy> ReadTableView::Find(std::string_view key, uint64_t key_hash) const {
  if (layout_.buckets == 0) return std::nullopt;
  auto found = ipc::DirectoryFind(reinterpret_cast<const uint64_t*>(words_), layout_, key, key_hash);
  if (!found) return std::nullopt;
  return ListedCopy{devices_[found->device_index], found->read_entry, found->payload_offset, found->bytes,
                    found->epoch};
}

}  // namespace nanokv::client
