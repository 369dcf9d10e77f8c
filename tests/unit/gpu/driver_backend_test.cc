// The driver backends' behaviour that must hold on every machine: where no
// driver is found, the factories fail with a clear kUnavailable (never a
// crash); where the runtime is too old, kUnsupported says so; where a GPU is
// found, the basics and the argument checks of backend.h hold. Each test first
// finds out for itself what this machine has (dlopen, the runtime's version),
// so it asserts the one outcome that machine must give.
//
// The full contract (pages, mappings, access, cross-process sharing) is the
// conformance suite's job; here only what is particular to the drivers, and
// (at the end) their shared DriverBackend over a fake driver.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "gpu/driver_backend.h"
#include "tests/unit/gpu/fake_driver_backend.h"

namespace nanokv::gpu {
namespace {

// Whether the dynamic loader can find `name` here, independently of the backends.
bool CanLoad(const char* name) {
  void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return false;
  dlclose(library);
  return true;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The stand-ins built when a backend's headers were missing at build time
// (cuda_backend_absent.cc, hip_backend_absent.cc) say so; there is nothing of
// the driver to test then.
bool NotBuilt(const Status& status) { return Contains(status.message(), "not built"); }

bool FdIsOpen(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

// A file descriptor that is certainly not a GPU page.
int NotAPageFd() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  close(fds[1]);
  return fds[0];
}

// ----------------------------------------------------------------------------
// CUDA

TEST(CudaBackendTest, WithoutLibcudaIsUnavailableNamingIt) {
  if (CanLoad("libcuda.so.1")) GTEST_SKIP() << "libcuda.so.1 is present on this machine";
  auto backend = MakeCudaBackend();
  ASSERT_FALSE(backend.ok());
  if (NotBuilt(backend.status())) GTEST_SKIP() << backend.status().ToString();
  EXPECT_EQ(backend.status().code(), Code::kUnavailable) << backend.status().ToString();
  EXPECT_TRUE(Contains(backend.status().message(), "libcuda.so.1"))
      << backend.status().ToString();
}

TEST(CudaBackendTest, FailsTheSameWayEveryTimeAndFromManyThreads) {
  // Loading, failing and unloading repeatedly must neither leak a broken
  // state into the next try nor race.
  auto first = MakeCudaBackend();
  std::vector<std::thread> threads;
  std::vector<Code> codes(8, Code::kOk);
  for (size_t i = 0; i < codes.size(); ++i) {
    threads.emplace_back([&codes, i] {
      auto again = MakeCudaBackend();
      codes[i] = again.ok() ? Code::kOk : again.status().code();
    });
  }
  for (auto& thread : threads) thread.join();
  for (Code code : codes) EXPECT_EQ(code, first.ok() ? Code::kOk : first.status().code());
}

TEST(CudaBackendTest, OpenBackendCudaFailsCleanlyWithoutADriver) {
  if (CanLoad("libcuda.so.1")) GTEST_SKIP() << "libcuda.so.1 is present on this machine";
  auto backend = OpenBackend("cuda");
  ASSERT_FALSE(backend.ok()) << "got a backend named " << (*backend)->name();
  EXPECT_EQ(backend.status().code(), Code::kUnavailable);
  if (NotBuilt(backend.status())) GTEST_SKIP() << backend.status().ToString();
  EXPECT_TRUE(Contains(backend.status().ToString(), "libcuda")) << backend.status().ToString();
}

// On a machine with a usable NVIDIA GPU; skipped elsewhere with the reason.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = MakeCudaBackend();
    if (!made.ok()) GTEST_SKIP() << "no CUDA backend here: " << made.status().ToString();
    backend_ = std::move(made).value();
    auto info = backend_->GetDeviceInfo(0);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    granularity_ = info->granularity;
  }

  std::unique_ptr<Backend> backend_;
  size_t granularity_ = 0;
};

TEST_F(CudaDeviceTest, DescribesItsDevices) {
  EXPECT_EQ(backend_->name(), "cuda");
  ASSERT_GT(backend_->device_count(), 0);
  for (int device = 0; device < backend_->device_count(); ++device) {
    auto info = backend_->GetDeviceInfo(device);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->ordinal, device);
    EXPECT_FALSE(info->name.empty());
    EXPECT_GT(info->granularity, 0u);
    EXPECT_EQ(info->granularity & (info->granularity - 1), 0u) << "not a power of two";
    EXPECT_GT(info->total_bytes, 0u);
    auto free_bytes = backend_->GetFreeMemory(device);
    ASSERT_TRUE(free_bytes.ok()) << free_bytes.status().ToString();
    EXPECT_GT(*free_bytes, 0u);
    EXPECT_LE(*free_bytes, info->total_bytes);
  }
}

TEST_F(CudaDeviceTest, BadOrdinalsAreNotFound) {
  const int count = backend_->device_count();
  EXPECT_EQ(backend_->GetDeviceInfo(count).status().code(), Code::kNotFound);
  EXPECT_EQ(backend_->GetDeviceInfo(-1).status().code(), Code::kNotFound);
  EXPECT_EQ(backend_->GetFreeMemory(count).status().code(), Code::kNotFound);
  EXPECT_EQ(backend_->CreatePage(count, granularity_).status().code(), Code::kNotFound);
}

TEST_F(CudaDeviceTest, BadSizesAreInvalidArgumentsBeforeTheDriver) {
  for (size_t size : {size_t{0}, granularity_ / 2, granularity_ + 4096}) {
    auto page = backend_->CreatePage(0, size);
    ASSERT_FALSE(page.ok()) << size;
    EXPECT_EQ(page.status().code(), Code::kInvalidArgument) << page.status().ToString();
    EXPECT_TRUE(page.status().error_name().empty()) << "reached the driver: "
                                                    << page.status().ToString();
  }
  EXPECT_EQ(backend_->ReserveRange(granularity_ / 2, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backend_->ReserveRange(granularity_, 3 * granularity_).status().code(),
            Code::kInvalidArgument);
}

TEST_F(CudaDeviceTest, UnknownHandlesAreNotFound) {
  const PageHandle bogus{0x5eed};
  EXPECT_EQ(backend_->ExportPage(bogus).status().code(), Code::kNotFound);
  EXPECT_EQ(backend_->ReleasePage(bogus).code(), Code::kNotFound);
  EXPECT_EQ(backend_->ReleasePage(PageHandle{}).code(), Code::kNotFound);
  auto range = backend_->ReserveRange(granularity_, 0);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(backend_->Map(*range, granularity_, bogus).code(), Code::kNotFound);
  EXPECT_TRUE(backend_->FreeRange(*range, granularity_).ok());
}

TEST_F(CudaDeviceTest, ImportTakesTheFdEvenWhenItFails) {
  int fd = NotAPageFd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(backend_->ImportPage(fd, backend_->device_count(), granularity_).status().code(),
            Code::kNotFound);
  EXPECT_FALSE(FdIsOpen(fd));

  fd = NotAPageFd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(backend_->ImportPage(fd, 0, granularity_ / 2).status().code(),
            Code::kInvalidArgument);
  EXPECT_FALSE(FdIsOpen(fd));

  // The driver itself refuses a pipe (CUDA_ERROR_UNKNOWN); it is bad input
  // as on the host backend, the error names the call, and the fd is gone.
  fd = NotAPageFd();
  ASSERT_GE(fd, 0);
  auto page = backend_->ImportPage(fd, 0, granularity_);
  EXPECT_EQ(page.status().code(), Code::kInvalidArgument) << page.status().ToString();
  EXPECT_EQ(page.status().call(), "cuMemImportFromShareableHandle") << page.status().ToString();
  EXPECT_TRUE(Contains(page.status().error_name(), "CUDA_ERROR_")) << page.status().ToString();
  EXPECT_FALSE(FdIsOpen(fd));
}

// The backend keeps its own account of ranges and mappings, so misuse gets
// the host backend's codes without reaching the driver (which answers
// CUDA_ERROR_INVALID_VALUE to all of these, and faults on the copy).
TEST_F(CudaDeviceTest, MisuseOfMappingsIsCaughtBeforeTheDriver) {
  auto page = backend_->CreatePage(0, 2 * granularity_);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  auto range = backend_->ReserveRange(4 * granularity_, 0);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  const uintptr_t base = *range;
  const int device = 0;
  auto caught = [](const Status& status, Code code) {
    return status.code() == code && status.error_name().empty();
  };
  EXPECT_TRUE(caught(backend_->Map(base, granularity_, *page), Code::kInvalidArgument))
      << "a page is mapped whole";
  EXPECT_TRUE(caught(backend_->Map(base + 3 * granularity_, 2 * granularity_, *page),
                     Code::kInvalidArgument))
      << "a mapping must lie inside its range";
  ASSERT_TRUE(backend_->Map(base, 2 * granularity_, *page).ok());
  EXPECT_TRUE(caught(backend_->Map(base, 2 * granularity_, *page), Code::kFailedPrecondition));
  uint8_t byte = 1;
  EXPECT_TRUE(caught(backend_->Copy(reinterpret_cast<void*>(base), &byte, 1,
                                    CopyKind::kHostToDevice),
                     Code::kPermissionDenied))
      << "no access before SetAccess";
  EXPECT_TRUE(caught(backend_->SetAccess(base, granularity_, {&device, 1}),
                     Code::kInvalidArgument))
      << "access is set on whole mappings";
  EXPECT_TRUE(caught(backend_->SetAccess(base, 3 * granularity_, {&device, 1}),
                     Code::kInvalidArgument))
      << "past the mapping is a hole";
  EXPECT_TRUE(caught(backend_->Unmap(base, granularity_), Code::kInvalidArgument));
  EXPECT_TRUE(caught(backend_->FreeRange(base, 4 * granularity_), Code::kFailedPrecondition));
  EXPECT_TRUE(caught(backend_->FreeRange(base, 2 * granularity_), Code::kInvalidArgument))
      << "only whole reservations are freed";

  // Access is exactly what SetAccess was last given: an empty list revokes.
  ASSERT_TRUE(backend_->SetAccess(base, 2 * granularity_, {&device, 1}).ok());
  EXPECT_TRUE(*backend_->HasAccess(base, 0));
  ASSERT_TRUE(backend_->SetAccess(base, 2 * granularity_, {}).ok());
  auto has = backend_->HasAccess(base + granularity_, 0);
  ASSERT_TRUE(has.ok()) << has.status().ToString();
  EXPECT_FALSE(*has);

  EXPECT_TRUE(backend_->Unmap(base, 2 * granularity_).ok());
  EXPECT_TRUE(backend_->ReleasePage(*page).ok());
  EXPECT_EQ(backend_->ReleasePage(*page).code(), Code::kNotFound);
  EXPECT_TRUE(backend_->FreeRange(base, 4 * granularity_).ok());
}

TEST_F(CudaDeviceTest, PageRoundTripWithinOneProcess) {
  auto page = backend_->CreatePage(0, granularity_);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  auto fd = backend_->ExportPage(*page);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(fcntl(*fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  auto imported = backend_->ImportPage(*fd, 0, granularity_);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();

  auto range = backend_->ReserveRange(2 * granularity_, 0);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  const uintptr_t first = *range;
  const uintptr_t second = *range + granularity_;
  ASSERT_TRUE(backend_->Map(first, granularity_, *page).ok());
  ASSERT_TRUE(backend_->Map(second, granularity_, *imported).ok());
  const int device = 0;
  ASSERT_TRUE(backend_->SetAccess(first, 2 * granularity_, {&device, 1}).ok());
  auto has = backend_->HasAccess(second, 0);
  ASSERT_TRUE(has.ok()) << has.status().ToString();
  EXPECT_TRUE(*has);

  // Both mappings show the same memory: write through one, read the other.
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE(backend_->Copy(reinterpret_cast<void*>(first), bytes.data(), bytes.size(),
                             CopyKind::kHostToDevice)
                  .ok());
  std::vector<uint8_t> back(bytes.size());
  ASSERT_TRUE(backend_->Copy(back.data(), reinterpret_cast<void*>(second), back.size(),
                             CopyKind::kDeviceToHost)
                  .ok());
  EXPECT_EQ(back, bytes);
  ASSERT_TRUE(backend_->Fill(reinterpret_cast<void*>(second), 0xab, 64).ok());
  ASSERT_TRUE(backend_->Copy(back.data(), reinterpret_cast<void*>(first), 64,
                             CopyKind::kDeviceToHost)
                  .ok());
  EXPECT_EQ(back[0], 0xab);
  EXPECT_EQ(back[63], 0xab);

  EXPECT_TRUE(backend_->Unmap(first, 2 * granularity_).ok());
  EXPECT_TRUE(backend_->ReleasePage(*imported).ok());
  EXPECT_TRUE(backend_->ReleasePage(*page).ok());
  EXPECT_TRUE(backend_->FreeRange(*range, 2 * granularity_).ok());
}

// ----------------------------------------------------------------------------
// HIP

// libamdhip64 as MakeHipBackend would find it, and the HIP_VERSION it reports
// (major * 10000000 + minor * 100000 + patch); -1 when it cannot be asked.
struct HipRuntime {
  bool loaded = false;
  int version = -1;
};

HipRuntime FindHipRuntime() {
  HipRuntime runtime;
  for (const char* name : {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                           "libamdhip64.so.5"}) {
    void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) continue;
    runtime.loaded = true;
    using GetVersion = int (*)(int*);
    auto get = reinterpret_cast<GetVersion>(dlsym(library, "hipRuntimeGetVersion"));
    int version = 0;
    if (get != nullptr && get(&version) == 0) runtime.version = version;
    dlclose(library);
    break;
  }
  return runtime;
}

std::string HipVersionText(int version) {
  return std::to_string(version / 10000000) + "." + std::to_string(version / 100000 % 100) + "." +
         std::to_string(version % 100000);
}

TEST(HipBackendTest, AnOldRuntimeIsUnsupportedAndSaysWhichItFound) {
  HipRuntime runtime = FindHipRuntime();
  auto backend = MakeHipBackend();
  if (!backend.ok() && NotBuilt(backend.status())) {
    GTEST_SKIP() << backend.status().ToString();
  }
  if (!runtime.loaded) {
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), Code::kUnavailable) << backend.status().ToString();
    GTEST_SKIP() << "libamdhip64 cannot be loaded here: " << backend.status().ToString();
  }
  if (runtime.version < 0 || runtime.version >= 60200000) {
    GTEST_SKIP() << "the HIP runtime here is not older than 6.2";
  }
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kUnsupported) << backend.status().ToString();
  EXPECT_TRUE(Contains(backend.status().message(), "ROCm >= 6.2 required"))
      << backend.status().ToString();
  EXPECT_TRUE(Contains(backend.status().message(), "found " + HipVersionText(runtime.version)))
      << backend.status().ToString();
}

TEST(HipBackendTest, OpenBackendHipMatchesTheFactory) {
  auto direct = MakeHipBackend();
  auto opened = OpenBackend("hip");
  ASSERT_EQ(opened.ok(), direct.ok());
  if (!direct.ok()) {
    EXPECT_EQ(opened.status().code(), direct.status().code());
    EXPECT_EQ(opened.status().message(), direct.status().message());
  } else {
    EXPECT_EQ((*opened)->name(), "hip");
  }
}

TEST(HipBackendTest, WithAGpuAndANewRuntimeDescribesItsDevices) {
  auto made = MakeHipBackend();
  if (!made.ok()) GTEST_SKIP() << "no HIP backend here: " << made.status().ToString();
  Backend& backend = **made;
  EXPECT_EQ(backend.name(), "hip");
  ASSERT_GT(backend.device_count(), 0);
  auto info = backend.GetDeviceInfo(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->granularity, 0u);
  EXPECT_EQ(backend.GetDeviceInfo(backend.device_count()).status().code(), Code::kNotFound);
  EXPECT_EQ(backend.CreatePage(0, info->granularity / 2).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backend.ExportPage(PageHandle{0x5eed}).status().code(), Code::kNotFound);
}

// ----------------------------------------------------------------------------
// DriverBackend over a fake driver (fake_driver_backend.h): the logic cuda and
// hip share, run here on every machine since CI has no GPU.

using testing::DriverBackendFakeTest;

TEST_F(DriverBackendFakeTest, ARefusedDriverCallLeavesTheRecordAsItWas) {
  auto base = b().ReserveRange(2 * kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  b().refuse = "MemMap";
  Status refused = b().Map(*base, kGran, *page);
  EXPECT_EQ(refused.error_name(), "FAKE_ERROR") << "the driver's error, untouched";
  b().refuse.clear();
  EXPECT_TRUE(b().Map(*base, kGran, *page).ok()) << "the refused map still holds the address";

  b().refuse = "MemUnmap";
  EXPECT_FALSE(b().Unmap(*base, kGran).ok());
  b().refuse.clear();
  EXPECT_TRUE(b().Unmap(*base, kGran).ok()) << "the refused unmap lost the mapping's record";

  b().refuse = "AddressFree";
  EXPECT_FALSE(b().FreeRange(*base, 2 * kGran).ok());
  b().refuse.clear();
  EXPECT_TRUE(b().FreeRange(*base, 2 * kGran).ok()) << "the refused free lost the range";
  EXPECT_TRUE(b().ReleasePage(*page).ok());
}

TEST_F(DriverBackendFakeTest, SetAccessNamesTheDevicesThatLoseAccess) {
  auto base = b().ReserveRange(2 * kGran, 0);
  auto page = b().CreatePage(1, 2 * kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, 2 * kGran, *page).ok());
  const int both[] = {0, 1};
  const int one[] = {1};
  ASSERT_TRUE(b().SetAccess(*base, 2 * kGran, both).ok());
  EXPECT_EQ(b().access_devices, 0b11u);
  EXPECT_EQ(b().access_grant, 0b11u);
  ASSERT_TRUE(b().SetAccess(*base, 2 * kGran, one).ok());
  EXPECT_EQ(b().access_devices, 0b11u) << "device 0 must be named, to lose its access";
  EXPECT_EQ(b().access_grant, 0b10u);

  log_->clear();
  EXPECT_EQ(b().SetAccess(*base, kGran, one).code(), Code::kInvalidArgument);
  ASSERT_TRUE(b().SetAccess(*base, 2 * kGran, {}).ok());
  EXPECT_EQ(b().access_devices, 0b10u);
  EXPECT_EQ(b().access_grant, 0u);
  ASSERT_TRUE(b().SetAccess(*base, 2 * kGran, {}).ok());
  EXPECT_EQ(*log_, std::vector<std::string>{"MemSetAccess"})
      << "part of a mapping, and no change at all, never reach the driver";

  ASSERT_TRUE(b().SetAccess(*base, 2 * kGran, one).ok());
  uint8_t byte = 0;
  ASSERT_TRUE(b().Copy(reinterpret_cast<void*>(*base), &byte, 1, CopyKind::kHostToDevice).ok());
  EXPECT_EQ(b().copy_device, 1) << "the page's device, which has access";
}

TEST_F(DriverBackendFakeTest, AReadOnlyMappingIsReadOnlyForTheDriverAndRefusesWritesFirst) {
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  const int zero[] = {0};
  ASSERT_TRUE(b().SetAccess(*base, kGran, zero, Access::kReadOnly).ok());
  EXPECT_TRUE(b().access_read_only) << "the driver must be asked for read-only access";
  log_->clear();
  uint8_t byte = 7;
  void* device = reinterpret_cast<void*>(*base);
  EXPECT_EQ(b().Copy(device, &byte, 1, CopyKind::kHostToDevice).code(), Code::kPermissionDenied);
  EXPECT_EQ(b().Fill(device, 0, 1).code(), Code::kPermissionDenied);
  EXPECT_TRUE(log_->empty()) << "a write into a read-only mapping never reaches the driver";
  EXPECT_TRUE(b().Copy(&byte, device, 1, CopyKind::kDeviceToHost).ok()) << "reads still go";
  ASSERT_TRUE(b().SetAccess(*base, kGran, zero).ok());
  EXPECT_FALSE(b().access_read_only);
  EXPECT_TRUE(b().Copy(device, &byte, 1, CopyKind::kHostToDevice).ok());
  ASSERT_TRUE(b().Unmap(*base, kGran).ok());
  ASSERT_TRUE(b().FreeRange(*base, kGran).ok());
  ASSERT_TRUE(b().ReleasePage(*page).ok());
}

TEST_F(DriverBackendFakeTest, AnImportOfAHeldPageIsCountedOrUndone) {
  auto page = b().CreatePage(0, 2 * kGran);
  ASSERT_TRUE(page.ok());
  b().import_handle = page->value;  // the driver hands back the handle we hold
  int fd = NotAPageFd();
  EXPECT_EQ(b().ImportPage(fd, 0, kGran).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(FdIsOpen(fd)) << "ImportPage takes the fd even when it fails";
  EXPECT_EQ(log_->back(), "MemRelease") << "the driver's extra reference is given back";
  auto again = b().ImportPage(NotAPageFd(), 0, 2 * kGran);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *page);
  EXPECT_TRUE(b().ReleasePage(*page).ok());
  EXPECT_TRUE(b().ReleasePage(*page).ok()) << "two references: created and imported";
  EXPECT_EQ(b().ReleasePage(*page).code(), Code::kNotFound);
}

TEST_F(DriverBackendFakeTest, TeardownGivesBackWhatCallersLeft) {
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(0, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  log_->clear();
  fake_.reset();
  EXPECT_EQ(*log_, (std::vector<std::string>{"MemUnmap", "MemRelease", "AddressFree"}));
}

}  // namespace
}  // namespace nanokv::gpu
