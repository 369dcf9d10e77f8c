#include "daemon/objects/host_range.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

namespace nanokv::kvd {
namespace {

Status Errno(const std::string& what, int device) {
  return Status::ResourceExhausted("object_store.host_tier of device " + std::to_string(device) + ": " + what + ": " +
                                   std::strerror(errno));
}

}  // namespace

Status HostRange::Reserve(uint32_t pages) {
  reserved_ = size_t{pages} * page_bytes_;
  void* base = mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return Errno("reserving " + std::to_string(reserved_) + " bytes", device_);
  base_ = base;
  return Status::OK();
}

Status HostRange::MapPage(uint32_t i) {
  void* at = static_cast<char*>(base_) + size_t{i} * page_bytes_;
  // Populated now: a demotion's copy then takes no page fault per 4 KiB.
  if (mmap(at, page_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fds_[i], 0) == MAP_FAILED) {
    return Errno("mapping page " + std::to_string(i), device_);
  }
  return Status::OK();
}

Status HostRange::Pin() {
  if (backend_.name() != "host" && reserved_ > 0) {
    NANOKV_RETURN_IF_ERROR(backend_.PinHost(base_, reserved_));
    pinned_ = true;
  }
  return Status::OK();
}

Result<std::unique_ptr<HostRange>> HostRange::Create(gpu::Backend& backend, int device, uint32_t pages,
                                                     size_t page_bytes) {
  std::unique_ptr<HostRange> range(new HostRange(backend, device, page_bytes));
  NANOKV_RETURN_IF_ERROR(range->Reserve(pages));
  for (uint32_t i = 0; i < pages; ++i) {
    int fd = memfd_create("nanokv-host-tier", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return Errno("memfd_create", device);
    range->fds_.push_back(fd);
    range->ids_.push_back(i);
    // Committed now: a tier the machine cannot hold fails at start.
    if (int err = posix_fallocate(fd, 0, static_cast<off_t>(page_bytes)); err != 0) {
      errno = err;
      return Errno("page " + std::to_string(i) + " of " + std::to_string(pages), device);
    }
    // Sealed as the host backend's pages are: a peer holding the fd cannot
    // shrink it under kvd's mapping (a SIGBUS in kvd).
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return Errno("sealing", device);
    // A memfd is 0777: a reader of another uid holding the read-only fd kvd
    // hands out could open /proc/self/fd/N read-write and write the tier.
    // 0600 leaves that to kvd's uid (the host backend's pages do the same).
    if (fchmod(fd, 0600) != 0) return Errno("mode 0600", device);
    NANOKV_RETURN_IF_ERROR(range->MapPage(i));
  }
  NANOKV_RETURN_IF_ERROR(range->Pin());
  return range;
}

Result<std::unique_ptr<HostRange>> HostRange::Adopt(gpu::Backend& backend, int device, std::vector<int> fds,
                                                    size_t page_bytes) {
  std::unique_ptr<HostRange> range(new HostRange(backend, device, page_bytes));
  range->fds_ = std::move(fds);  // the range closes them, adopted or not
  for (uint32_t i = 0; i < range->fds_.size(); ++i) range->ids_.push_back(i);
  NANOKV_RETURN_IF_ERROR(range->Reserve(static_cast<uint32_t>(range->fds_.size())));
  for (uint32_t i = 0; i < range->fds_.size(); ++i) {
    // Handed back by the keeper, so checked as hostile input: a page of
    // another size or unsealed could be cut under kvd's mapping (SIGBUS).
    struct stat st {};
    const int seals = fcntl(range->fds_[i], F_GET_SEALS);
    const int needed = F_SEAL_SHRINK | F_SEAL_GROW;
    if (fstat(range->fds_[i], &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != page_bytes ||
        seals < 0 || (seals & needed) != needed) {
      return Status::InvalidArgument("object_store.host_tier of device " + std::to_string(device) + ": page " +
                                     std::to_string(i) + " handed back is not a sealed memfd of " +
                                     std::to_string(page_bytes) + " bytes");
    }
    // Kept by a kvd before this check existed: closed to other uids now.
    if (fchmod(range->fds_[i], 0600) != 0) return Errno("mode 0600 of page " + std::to_string(i), device);
    NANOKV_RETURN_IF_ERROR(range->MapPage(i));
  }
  NANOKV_RETURN_IF_ERROR(range->Pin());
  return range;
}

HostRange::~HostRange() {
  if (pinned_) backend_.UnpinHost(base_);
  if (base_ != nullptr) munmap(base_, reserved_);
  for (int fd : fds_) close(fd);
}

Status HostRange::CheckSpan(uint64_t offset, size_t bytes) const {
  if (offset > reserved_ || bytes > reserved_ - offset) {
    return Status::InvalidArgument("object store: bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                   ") outside device " + std::to_string(device_) + "'s host tier of " +
                                   std::to_string(reserved_));
  }
  return Status::OK();
}

// Host memory to host memory: nothing for a device to do, so a copy asked
// for on a stream is done at once (done by SyncStream, as promised).
Status HostRange::Read(uint64_t offset, void* host, size_t bytes, gpu::StreamHandle /*stream*/) const {
  NANOKV_RETURN_IF_ERROR(CheckSpan(offset, bytes));
  std::memcpy(host, static_cast<const char*>(base_) + offset, bytes);
  return Status::OK();
}

Status HostRange::Write(uint64_t offset, const void* host, size_t bytes, gpu::StreamHandle /*stream*/) {
  NANOKV_RETURN_IF_ERROR(CheckSpan(offset, bytes));
  std::memcpy(static_cast<char*>(base_) + offset, host, bytes);
  return Status::OK();
}

Status HostRange::Fill(uint64_t offset, uint8_t value, size_t bytes) {
  NANOKV_RETURN_IF_ERROR(CheckSpan(offset, bytes));
  std::memset(static_cast<char*>(base_) + offset, value, bytes);
  return Status::OK();
}

}  // namespace nanokv::kvd
