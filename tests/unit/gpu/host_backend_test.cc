// What the host backend enforces beyond the conformance suite: exact error
// codes where CUDA's are not pinned down, fault on access without SetAccess,
// memory accounting, and refusal of fds that are not nanokv pages.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"

namespace nanokv::gpu {
namespace {

constexpr size_t kGran = 2u << 20;

class HostBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ =
      MakeHostBackend({.devices = 2, .granularity = kGran, .device_bytes = 8 * kGran});
  Backend& b() { return *backend_; }
};

TEST_F(HostBackendTest, TouchingAMappingWithoutAccessFaults) {
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  volatile char* p = reinterpret_cast<char*>(*base);
  EXPECT_DEATH(p[0] = 1, "") << "a mapping without access must not be writable";
  char byte = 1;
  EXPECT_EQ(b().Copy(reinterpret_cast<void*>(*base), &byte, 1, CopyKind::kHostToDevice).code(),
            Code::kPermissionDenied);
  int devices[] = {1};  // access for device 1 makes it writable from the host
  ASSERT_TRUE(b().SetAccess(*base, kGran, devices).ok());
  p[0] = 1;
  EXPECT_EQ(p[0], 1);
  EXPECT_FALSE(*b().HasAccess(*base, 0));
  EXPECT_TRUE(*b().HasAccess(*base, 1));
}

// Issue 19 item 12: a store through a read-only mapping faults, as a GPU
// kernel's store through a PROT_READ mapping would.
TEST_F(HostBackendTest, AStoreThroughAReadOnlyMappingFaults) {
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  int devices[] = {0};
  ASSERT_TRUE(b().SetAccess(*base, kGran, devices, Access::kReadOnly).ok());
  volatile char* p = reinterpret_cast<char*>(*base);
  EXPECT_EQ(p[0], 0) << "reads go";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer takes the SIGSEGV and ends the process with its report.
  EXPECT_DEATH(p[0] = 1, "SEGV") << "a read-only mapping must not be writable";
#else
  EXPECT_EXIT(p[0] = 1, ::testing::KilledBySignal(SIGSEGV), "")
      << "a read-only mapping must not be writable";
#endif
}

// A read-only export cannot be mapped writable, by the backend or by a raw
// mmap, and the page itself is 0600, so whoever holds the fd cannot re-open
// it read-write through /proc unless it is the page's owner.
TEST_F(HostBackendTest, AReadOnlyExportCannotBeMappedWritable) {
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(page.ok());
  auto exported = b().ExportPage(*page);
  ASSERT_TRUE(exported.ok());
  auto read_only = b().ExportReadOnly(*exported);
  ASSERT_TRUE(read_only.ok()) << read_only.status().ToString();
  close(*exported);
  EXPECT_EQ(fcntl(*read_only, F_GETFL) & O_ACCMODE, O_RDONLY);
  struct stat st {};
  ASSERT_EQ(fstat(*read_only, &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  void* raw = mmap(nullptr, kGran, PROT_READ | PROT_WRITE, MAP_SHARED, *read_only, 0);
  EXPECT_EQ(raw, MAP_FAILED) << "a read-only fd mapped writable";
  EXPECT_EQ(errno, EACCES);
  if (raw != MAP_FAILED) munmap(raw, kGran);

  auto other = MakeHostBackend({.devices = 2, .granularity = kGran, .device_bytes = 8 * kGran});
  auto imported = other->ImportPage(*read_only, 0, kGran);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  auto base = other->ReserveRange(kGran, 0);
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(other->Map(*base, kGran, *imported).ok());
  int devices[] = {0};
  Status writable = other->SetAccess(*base, kGran, devices);
  EXPECT_EQ(writable.code(), Code::kPermissionDenied) << writable.ToString();
  EXPECT_TRUE(other->SetAccess(*base, kGran, devices, Access::kReadOnly).ok());
  EXPECT_TRUE(other->Unmap(*base, kGran).ok());
  EXPECT_TRUE(other->FreeRange(*base, kGran).ok());
  EXPECT_TRUE(other->ReleasePage(*imported).ok());
  EXPECT_TRUE(b().ReleasePage(*page).ok());
}

// Issue 19 item 11: on a GPU a copy to an address that is no device memory
// faults; the host backend refuses it instead of writing there.
TEST_F(HostBackendTest, CopiesOutsideEveryRangeAreRefusedAsAGpuWouldFault) {
  std::vector<char> host(64, 1);
  char byte = 7;
  Status to = b().Copy(host.data(), &byte, 1, CopyKind::kHostToDevice);
  EXPECT_EQ(to.code(), Code::kInvalidArgument);
  EXPECT_NE(to.message().find("not device memory"), std::string::npos) << to.ToString();
  EXPECT_EQ(b().Copy(&byte, host.data(), 1, CopyKind::kDeviceToHost).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(b().Fill(host.data(), 0, host.size()).code(), Code::kInvalidArgument);
  EXPECT_EQ(host[0], 1) << "nothing written";

  // Memory another host backend of this process mapped is device memory, as
  // every context of a process sees a GPU's memory.
  auto other = MakeHostBackend({.devices = 1, .granularity = kGran, .device_bytes = 2 * kGran});
  auto base = other->ReserveRange(kGran, 0);
  auto page = other->CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(other->Map(*base, kGran, *page).ok());
  int devices[] = {0};
  ASSERT_TRUE(other->SetAccess(*base, kGran, devices).ok());
  void* mapped = reinterpret_cast<void*>(*base);
  ASSERT_TRUE(b().Copy(mapped, &byte, 1, CopyKind::kHostToDevice).ok());
  char back = 0;
  ASSERT_TRUE(b().Copy(&back, mapped, 1, CopyKind::kDeviceToHost).ok());
  EXPECT_EQ(back, 7);
  // The wrapped spans of the finding: a clear error, no crash.
  EXPECT_EQ(b().Copy(&back, mapped, SIZE_MAX, CopyKind::kDeviceToHost).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(b().Fill(static_cast<char*>(mapped) + kGran - 1, 0, SIZE_MAX).code(),
            Code::kInvalidArgument);
  ASSERT_TRUE(other->Unmap(*base, kGran).ok());
  ASSERT_TRUE(other->ReleasePage(*page).ok());
  ASSERT_TRUE(other->FreeRange(*base, kGran).ok());
  EXPECT_EQ(b().Copy(mapped, &byte, 1, CopyKind::kHostToDevice).code(), Code::kInvalidArgument)
      << "freed: no longer device memory";
}

TEST_F(HostBackendTest, CountsDeviceMemoryLikeADriver) {
  std::vector<PageHandle> pages;
  for (int i = 0; i < 8; ++i) {
    auto page = b().CreatePage(0, kGran);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    pages.push_back(*page);
  }
  auto full = b().CreatePage(0, kGran);
  EXPECT_EQ(full.status().code(), Code::kOutOfMemory);
  EXPECT_EQ(full.status().call(), "CreatePage");
  EXPECT_EQ(*b().GetFreeMemory(0), 0u);
  EXPECT_TRUE(b().CreatePage(1, kGran).ok()) << "devices are accounted apart";
  // An import is not an allocation.
  auto fd = b().ExportPage(pages[0]);
  ASSERT_TRUE(fd.ok());
  EXPECT_TRUE(b().ImportPage(*fd, 0, kGran).ok());
  ASSERT_TRUE(b().ReleasePage(pages[0]).ok());
  EXPECT_EQ(*b().GetFreeMemory(0), kGran);
  EXPECT_TRUE(b().CreatePage(0, kGran).ok());
}

// As CUDA's imported handle: an imported page holds no fd (issue 16 item 2:
// an engine's fds do not grow with its pages), yet keeps its memory, maps as
// the same bytes, and a read-only import still cannot be made writable.
TEST_F(HostBackendTest, AnImportedPageHoldsNoFd) {
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(page.ok());
  auto count_fds = [] {
    int n = 0;
    for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
    return n;
  };
  const int before = count_fds();
  std::vector<PageHandle> imported;
  for (int i = 0; i < 16; ++i) {
    auto fd = b().ExportPage(*page);
    ASSERT_TRUE(fd.ok());
    auto handle = b().ImportPage(*fd, 0, kGran);
    ASSERT_TRUE(handle.ok()) << handle.status().ToString();
    imported.push_back(*handle);
  }
  EXPECT_EQ(count_fds(), before);
  // The creator lets go: the imports keep the memory and map it.
  ASSERT_TRUE(b().ReleasePage(*page).ok());
  auto base = b().ReserveRange(2 * kGran, 0);
  ASSERT_TRUE(base.ok());
  const int device = 0;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(b().Map(*base + i * kGran, kGran, imported[i]).ok());
    ASSERT_TRUE(b().SetAccess(*base + i * kGran, kGran, {&device, 1}).ok());
  }
  reinterpret_cast<volatile char*>(*base)[100] = 42;
  EXPECT_EQ(reinterpret_cast<volatile char*>(*base + kGran)[100], 42) << "one page, two mappings";
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(b().Unmap(*base + i * kGran, kGran).ok());
  for (PageHandle handle : imported) ASSERT_TRUE(b().ReleasePage(handle).ok());
  ASSERT_TRUE(b().FreeRange(*base, 2 * kGran).ok());

  auto other = b().CreatePage(0, kGran);
  auto exported = b().ExportPage(*other);
  ASSERT_TRUE(exported.ok());
  auto read_only = b().ExportReadOnly(*exported);
  close(*exported);
  ASSERT_TRUE(read_only.ok());
  auto handle = b().ImportPage(*read_only, 0, kGran);
  ASSERT_TRUE(handle.ok());
  auto at = b().ReserveRange(kGran, 0);
  ASSERT_TRUE(at.ok());
  ASSERT_TRUE(b().Map(*at, kGran, *handle).ok());
  EXPECT_EQ(b().SetAccess(*at, kGran, {&device, 1}).code(), Code::kPermissionDenied);
  EXPECT_TRUE(b().SetAccess(*at, kGran, {&device, 1}, Access::kReadOnly).ok());
  ASSERT_TRUE(b().Unmap(*at, kGran).ok());
  ASSERT_TRUE(b().ReleasePage(*handle).ok());
  ASSERT_TRUE(b().ReleasePage(*other).ok());
  ASSERT_TRUE(b().FreeRange(*at, kGran).ok());
}

TEST_F(HostBackendTest, StaleHandlesAreNotFound) {
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(page.ok());
  ASSERT_TRUE(b().ReleasePage(*page).ok());
  EXPECT_EQ(b().ReleasePage(*page).code(), Code::kNotFound);
  EXPECT_EQ(b().ExportPage(*page).status().code(), Code::kNotFound);
  EXPECT_EQ(b().ExportPage(PageHandle{}).status().code(), Code::kNotFound);
}

TEST_F(HostBackendTest, ImportRefusesWhatIsNotAPage) {
  int fd = memfd_create("not-a-page", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, kGran), 0);
  // Unsealed: could be truncated under a mapping and SIGBUS its readers.
  EXPECT_EQ(b().ImportPage(fd, 0, kGran).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "ImportPage must take ownership of the fd even on failure";

  auto page = b().CreatePage(0, kGran);
  auto exported = b().ExportPage(*page);
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(b().ImportPage(*exported, 0, 2 * kGran).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(b().ImportPage(-1, 0, kGran).ok());
  // A shared page cannot be resized by anyone who holds it.
  auto again = b().ExportPage(*page);
  EXPECT_NE(ftruncate(*again, kGran / 2), 0);
  close(*again);
}

TEST_F(HostBackendTest, RangesAreFreedWholeAndOnlyWhenEmpty) {
  auto base = b().ReserveRange(2 * kGran, 0);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(*base % kGran, 0u);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(b().Map(*base + kGran, kGran, *page).ok());
  EXPECT_EQ(b().FreeRange(*base, 2 * kGran).code(), Code::kFailedPrecondition);
  EXPECT_EQ(b().FreeRange(*base, kGran).code(), Code::kInvalidArgument);
  EXPECT_EQ(b().Map(*base + kGran, kGran, *page).code(), Code::kFailedPrecondition);
  EXPECT_EQ(b().Map(*base + 1, kGran, *page).code(), Code::kInvalidArgument);
  ASSERT_TRUE(b().Unmap(*base + kGran, kGran).ok());
  EXPECT_EQ(b().Unmap(*base + kGran, kGran).code(), Code::kInvalidArgument);
  EXPECT_TRUE(b().FreeRange(*base, 2 * kGran).ok());
  EXPECT_EQ(b().ReserveRange(kGran, 3 * 4096).status().code(), Code::kInvalidArgument);
}

// A stream's copies run at SyncStream, the latest a GPU may run them: a
// caller that reads before it waits sees stale bytes here too, in CI.
TEST_F(HostBackendTest, AStreamsCopiesLandAtSyncStreamAndNotBefore) {
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  int devices[] = {0};
  ASSERT_TRUE(b().SetAccess(*base, kGran, devices).ok());
  auto stream = b().CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  volatile uint8_t* p = reinterpret_cast<uint8_t*>(*base);
  void* device = reinterpret_cast<void*>(*base);
  const std::vector<uint8_t> first(4096, 0xab), second(4096, 0xcd);
  ASSERT_TRUE(b().CopyAsync(device, first.data(), first.size(), CopyKind::kHostToDevice, *stream).ok());
  EXPECT_EQ(p[0], 0) << "queued, not run";
  ASSERT_TRUE(b().Copy(device, second.data(), 1, CopyKind::kHostToDevice).ok());
  EXPECT_EQ(p[0], 0xcd) << "Copy waits for no stream";
  ASSERT_TRUE(b().SyncStream(*stream).ok());
  EXPECT_EQ(p[0], 0xab);
  EXPECT_EQ(p[4095], 0xab);
  // As cuStreamDestroy: what was queued still runs.
  ASSERT_TRUE(b().CopyAsync(device, second.data(), second.size(), CopyKind::kHostToDevice, *stream).ok());
  ASSERT_TRUE(b().DestroyStream(*stream).ok());
  EXPECT_EQ(p[4095], 0xcd);
  EXPECT_TRUE(b().Unmap(*base, kGran).ok());
  EXPECT_TRUE(b().FreeRange(*base, kGran).ok());
  EXPECT_TRUE(b().ReleasePage(*page).ok());
}

// Memory unmapped between CopyAsync and SyncStream: a GPU faults there (and
// the fault ends the context's work); here the sync fails and drops the
// stream's queue, never writing into the hole.
TEST_F(HostBackendTest, MemoryUnmappedBeforeTheSyncFailsTheSyncNotTheProcess) {
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  int devices[] = {0};
  ASSERT_TRUE(b().SetAccess(*base, kGran, devices).ok());
  auto stream = b().CreateStream(0);
  ASSERT_TRUE(stream.ok());
  void* device = reinterpret_cast<void*>(*base);
  const std::vector<uint8_t> data(64, 0x5a);
  ASSERT_TRUE(b().CopyAsync(device, data.data(), data.size(), CopyKind::kHostToDevice, *stream).ok());
  ASSERT_TRUE(b().CopyAsync(device, data.data(), data.size(), CopyKind::kHostToDevice, *stream).ok());
  ASSERT_TRUE(b().Unmap(*base, kGran).ok());
  Status synced = b().SyncStream(*stream);
  EXPECT_EQ(synced.code(), Code::kInvalidArgument) << synced.ToString();
  EXPECT_NE(synced.message().find("not mapped"), std::string::npos) << synced.ToString();
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  ASSERT_TRUE(b().SetAccess(*base, kGran, devices).ok());
  EXPECT_TRUE(b().SyncStream(*stream).ok()) << "the failed queue was dropped";
  EXPECT_EQ(reinterpret_cast<volatile uint8_t*>(*base)[0], 0) << "nothing of it ran";
  EXPECT_TRUE(b().DestroyStream(*stream).ok());
  EXPECT_TRUE(b().Unmap(*base, kGran).ok());
  EXPECT_TRUE(b().FreeRange(*base, kGran).ok());
  EXPECT_TRUE(b().ReleasePage(*page).ok());
}

// A stream is one device's, and that device runs its copies: it needs
// access to the device ends, where Copy would pick any device that has it.
TEST_F(HostBackendTest, AStreamsDeviceMustHaveAccessToWhatItCopies) {
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  int zero[] = {0};
  ASSERT_TRUE(b().SetAccess(*base, kGran, zero).ok());
  auto on_one = b().CreateStream(1);
  ASSERT_TRUE(on_one.ok());
  uint8_t byte = 1;
  void* device = reinterpret_cast<void*>(*base);
  Status refused = b().CopyAsync(device, &byte, 1, CopyKind::kHostToDevice, *on_one);
  EXPECT_EQ(refused.code(), Code::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.message().find("device 1 runs the copy"), std::string::npos) << refused.ToString();
  EXPECT_TRUE(b().Copy(device, &byte, 1, CopyKind::kHostToDevice).ok()) << "Copy runs it on device 0";
  int both[] = {0, 1};
  ASSERT_TRUE(b().SetAccess(*base, kGran, both).ok());
  EXPECT_TRUE(b().CopyAsync(&byte, device, 1, CopyKind::kDeviceToHost, *on_one).ok());
  EXPECT_TRUE(b().DestroyStream(*on_one).ok());
  EXPECT_TRUE(b().Unmap(*base, kGran).ok());
  EXPECT_TRUE(b().FreeRange(*base, kGran).ok());
  EXPECT_TRUE(b().ReleasePage(*page).ok());
}

TEST(HostBackendOpen, ByNameAndEnvironment) {
  auto host = OpenBackend("host");
  ASSERT_TRUE(host.ok());
  EXPECT_EQ((*host)->name(), "host");
  EXPECT_EQ(OpenBackend("tpu").status().code(), Code::kInvalidArgument);
  setenv("NANOKV_BACKEND", "host", 1);
  setenv("NANOKV_HOST_DEVICES", "3", 1);
  auto from_env = OpenBackend();
  unsetenv("NANOKV_BACKEND");
  unsetenv("NANOKV_HOST_DEVICES");
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ((*from_env)->name(), "host");
  EXPECT_EQ((*from_env)->device_count(), 3);
}

}  // namespace
}  // namespace nanokv::gpu
