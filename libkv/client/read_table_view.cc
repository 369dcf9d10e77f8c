#include "libkv/client/read_table_view.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace nanokv::client {

Result<std::unique_ptr<ReadTableView>> ReadTableView::Map(int fd, uint32_t entries, std::vector<int> devices) {
  std::unique_ptr<ReadTableView> view(new ReadTableView(entries, std::move(devices)));
  const size_t need = view->devices_.size() * size_t{entries} * sizeof(uint32_t);
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

}  // namespace nanokv::client
