#include "ipc/segment/shm_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include "base/naming.h"
#include "ipc/segment/layout.h"
#include "ipc/segment/process_identity.h"
#include "ipc/segment/seqlock.h"

namespace nanokv::ipc {
namespace bip = boost::interprocess;
namespace {

// Boost reports failures by exception; nothing past this file sees one.
Status FromBoost(std::string_view call, const bip::interprocess_exception& e,
                 const std::string& context) {
  int error_number = e.get_native_error();
  if (error_number == EEXIST || e.get_error_code() == bip::already_exists_error) {
    return Status(Code::kAlreadyExists, context + ": already exists", call, "EEXIST");
  }
  if (error_number != 0) return Status::FromErrno(call, error_number, context);
  return Status(Code::kIOError, context + ": " + e.what(), call);
}

Status FromException(std::string_view call, const std::exception& e, const std::string& context) {
  return Status(Code::kInternal, context + ": " + e.what(), call);
}

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016" PRIx64, value);
  return text;
}

}  // namespace

Status ValidateIpcName(std::string_view ipc_name) {
  // One rule for every file derived from the name (base/naming.h).
  if (ValidIpcName(ipc_name)) return Status::OK();
  return Status::InvalidArgument("IPC name \"" + std::string(ipc_name.substr(0, 64)) +
                                 "\" must be 1 to 48 characters of [A-Za-z0-9_.-], "
                                 "not starting with '.'");
}

std::string ShmName(std::string_view ipc_name) {
  return std::string(kShmPrefix) + std::string(ipc_name);
}

std::string ShmPath(std::string_view ipc_name) {
  return std::string(kShmDirectory) + "/" + ShmName(ipc_name);
}

ShmMapping::ShmMapping(std::unique_ptr<bip::shared_memory_object> object,
                       std::unique_ptr<bip::mapped_region> region)
    : object_(std::move(object)), region_(std::move(region)) {}

ShmMapping::~ShmMapping() = default;  // unmaps, then closes the fd

void* ShmMapping::data() const { return region_ ? region_->get_address() : nullptr; }
size_t ShmMapping::size() const { return region_ ? region_->get_size() : 0; }
int ShmMapping::fd() const { return object_->get_mapping_handle().handle; }

Result<std::unique_ptr<ShmMapping>> ShmMapping::OpenReadOnly(const std::string& shm_name) {
  try {
    auto object =
        std::make_unique<bip::shared_memory_object>(bip::open_only, shm_name.c_str(), bip::read_only);
    bip::offset_t size = 0;
    if (!object->get_size(size)) return Status::FromErrno("fstat", errno, shm_name);
    // Boost refuses to map an empty object; an empty mapping is what it is.
    std::unique_ptr<bip::mapped_region> region;
    if (size > 0) region = std::make_unique<bip::mapped_region>(*object, bip::read_only);
    return std::unique_ptr<ShmMapping>(new ShmMapping(std::move(object), std::move(region)));
  } catch (const bip::interprocess_exception& e) {
    return FromBoost("shm_open/mmap", e, shm_name);
  } catch (const std::exception& e) {
    return FromException("shm_open/mmap", e, shm_name);
  }
}

Result<std::unique_ptr<ShmMapping>> ShmMapping::CreateReadWrite(const std::string& shm_name,
                                                                size_t bytes, mode_t mode,
                                                                std::optional<gid_t> gid) {
  std::unique_ptr<bip::shared_memory_object> object;
  try {
    object = std::make_unique<bip::shared_memory_object>(bip::create_only, shm_name.c_str(),
                                                         bip::read_write, bip::permissions(mode));
  } catch (const bip::interprocess_exception& e) {
    return FromBoost("shm_open", e, shm_name);
  } catch (const std::exception& e) {
    return FromException("shm_open", e, shm_name);
  }
  // From here on the name is ours: any failure unlinks it again.
  Status failed;
  int fd = object->get_mapping_handle().handle;
  // shm_open applies the umask to the mode; the security model wants exactly
  // `mode` (0660 by default), so set it again on the open descriptor.
  if (fchmod(fd, mode) != 0) {
    failed = Status::FromErrno("fchmod", errno, shm_name);
  } else if (gid.has_value() && fchown(fd, static_cast<uid_t>(-1), *gid) != 0) {
    failed = Status::FromErrno("fchown", errno, shm_name + " to gid " + std::to_string(*gid));
  } else {
    try {
      object->truncate(static_cast<bip::offset_t>(bytes));
      auto region = std::make_unique<bip::mapped_region>(*object, bip::read_write);
      return std::unique_ptr<ShmMapping>(new ShmMapping(std::move(object), std::move(region)));
    } catch (const bip::interprocess_exception& e) {
      failed = FromBoost("ftruncate/mmap", e, shm_name);
    } catch (const std::exception& e) {
      failed = FromException("ftruncate/mmap", e, shm_name);
    }
  }
  object.reset();
  (void)RemoveShm(shm_name);  // best effort; `failed` says what went wrong
  return failed;
}

Status RemoveShm(const std::string& shm_name) {
  // Boost's remove() only says true or false; shm_unlink gives the reason.
  // Same call Boost makes (a leading '/' names an object in /dev/shm).
  if (shm_unlink(("/" + shm_name).c_str()) == 0) return Status::OK();
  return Status::FromErrno("shm_unlink", errno, shm_name);
}

Result<std::unique_ptr<ShmDirectoryLock>> ShmDirectoryLock::Acquire() {
  const std::string directory(kShmDirectory);
  int fd = open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open", errno, directory);
  // Non-blocking tries with a bounded wait: a stuck holder must not hang kvd.
  constexpr auto kWait = std::chrono::seconds(2);
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      return std::unique_ptr<ShmDirectoryLock>(new ShmDirectoryLock(fd));
    }
    int err = errno;
    if (err != EWOULDBLOCK && err != EINTR) {
      close(fd);
      return Status::FromErrno("flock", err, directory);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      close(fd);
      return Status::Unavailable("another process has held the lock on " + directory +
                                 " (flock) for over 2 s; is a kvd stuck starting?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ShmDirectoryLock::~ShmDirectoryLock() { close(fd_); }  // closing releases the flock

SegmentProbe ProbeMapping(const ShmMapping& mapping) {
  SegmentProbe probe;
  probe.size_bytes = mapping.size();
  if (probe.size_bytes < kFrozenPrefixBytes) return probe;
  // Word by word, magic first with acquire: after it, the rest of the prefix
  // holds the creator's final values (they never change afterwards).
  SegmentHeader prefix{};
  auto* dst = reinterpret_cast<unsigned char*>(&prefix);
  for (size_t i = 0; i < kFrozenPrefixBytes / sizeof(uint64_t); ++i) {
    const uint64_t word = SharedWord(mapping.data(), i)
                              .load(i == kMagicWord ? std::memory_order_acquire
                                                    : std::memory_order_relaxed);
    std::memcpy(dst + i * sizeof(uint64_t), &word, sizeof(word));
    if (i == kMagicWord && word == 0) return probe;
  }
  probe.magic = prefix.magic;
  probe.layout_version = prefix.layout_version;
  probe.total_bytes = prefix.total_bytes;
  probe.kvd_pid = prefix.kvd_pid;
  probe.kvd_start_ticks = prefix.kvd_start_ticks;
  return probe;
}

Result<SegmentProbe> ProbeSegment(const std::string& shm_name) {
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<ShmMapping> mapping, ShmMapping::OpenReadOnly(shm_name));
  return ProbeMapping(*mapping);
}

std::string StaleReason(const SegmentProbe& probe) {
  if (probe.size_bytes < kFrozenPrefixBytes) {
    return "too small to be a nanokv segment (" + std::to_string(probe.size_bytes) + " bytes)";
  }
  if (probe.magic == 0) return "never initialised (its creator died while creating it)";
  if (probe.magic != kSegmentMagic) return "not a nanokv segment (magic " + Hex(probe.magic) + ")";
  if (ProcessAlive(probe.kvd_pid, probe.kvd_start_ticks)) return "";
  std::string who = "its kvd (pid " + std::to_string(probe.kvd_pid) + ")";
  auto ticks = ProcessStartTicks(probe.kvd_pid);
  if (ticks.ok() && *ticks != probe.kvd_start_ticks) return who + " is gone and the pid reused";
  return who + " is gone";
}

Status CheckReadable(const SegmentProbe& probe, std::string_view ipc_name) {
  const std::string what = "segment " + ShmPath(ipc_name);
  if (probe.size_bytes < kFrozenPrefixBytes) {
    return Status::InvalidArgument(what + " is " + std::to_string(probe.size_bytes) +
                                   " bytes, too small to be a nanokv segment");
  }
  if (probe.magic == 0) return Status::Unavailable(what + " is still being created");
  if (probe.magic != kSegmentMagic) {
    return Status::InvalidArgument(what + " is not a nanokv segment (magic " + Hex(probe.magic) +
                                   ", expected " + Hex(kSegmentMagic) + ")");
  }
  if (probe.layout_version != kSegmentLayoutVersion) {
    return Status::Unsupported(what + " has layout version " +
                               std::to_string(probe.layout_version) + "; this build reads version " +
                               std::to_string(kSegmentLayoutVersion));
  }
  if (probe.total_bytes != sizeof(Segment)) {
    return Status::InvalidArgument(what + " says it is " + std::to_string(probe.total_bytes) +
                                   " bytes; layout version 1 is " + std::to_string(sizeof(Segment)));
  }
  if (probe.size_bytes < sizeof(Segment)) {
    return Status::InvalidArgument(what + " is truncated to " + std::to_string(probe.size_bytes) +
                                   " bytes");
  }
  return Status::OK();
}

}  // namespace nanokv::ipc
