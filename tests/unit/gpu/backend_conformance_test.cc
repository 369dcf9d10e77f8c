// The backend conformance suite: the same tests on every backend present.
// host always runs (CI); cuda and hip run where a device is found and skip
// cleanly, with the reason, where none is. A host/GPU disagreement is a bug.
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"
#include "ipc/uds/fd_passing.h"
#include "gpu/backend.h"
#include "tests/unit/gpu/backend_test_util.h"

extern char** environ;

namespace nanokv::gpu {
namespace {

using testing::CheckPattern;
using testing::WritePattern;

// The peer binary: the build's, or $NANOKV_BACKEND_PEER where the tests run
// from a bundle (the GPU machine).
std::string PeerPath() {
  const char* env = std::getenv("NANOKV_BACKEND_PEER");
  return env != nullptr && *env != '\0' ? env : NANOKV_BACKEND_PEER;
}

class BackendConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto opened = OpenBackend(GetParam());
    if (!opened.ok()) {
      ASSERT_NE(GetParam(), "host") << opened.status().ToString();
      GTEST_SKIP() << GetParam() << " backend not available here: " << opened.status().ToString();
    }
    backend_ = std::move(opened).value();
    ASSERT_GT(backend_->device_count(), 0);
    auto info = backend_->GetDeviceInfo(0);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    gran_ = info->granularity;
  }

  Backend& b() { return *backend_; }

  // A reserved range of `pages` granules, freed at the end of the test.
  uintptr_t Reserve(size_t pages) {
    auto base = b().ReserveRange(pages * gran_, 0);
    EXPECT_TRUE(base.ok()) << base.status().ToString();
    if (!base.ok()) return 0;
    ranges_.push_back({*base, pages * gran_});
    return *base;
  }

  PageHandle Create(size_t bytes) {
    auto page = b().CreatePage(0, bytes);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    return page.ok() ? *page : PageHandle{};
  }

  void MapWithAccess(uintptr_t address, size_t bytes, PageHandle page) {
    ASSERT_OK(b().Map(address, bytes, page));
    int devices[] = {0};
    ASSERT_OK(b().SetAccess(address, bytes, devices));
  }

  void TearDown() override {
    if (!backend_) return;
    // Best effort: unmap whatever a failed test left, then free the ranges.
    for (auto [base, size] : ranges_) {
      for (uintptr_t a = base; a < base + size; a += gran_) (void)b().Unmap(a, gran_);
      EXPECT_OK(b().FreeRange(base, size));
    }
  }

  std::unique_ptr<Backend> backend_;
  size_t gran_ = 0;
  std::vector<std::pair<uintptr_t, size_t>> ranges_;
};

TEST_P(BackendConformance, DescribesDevices) {
  auto info = b().GetDeviceInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->ordinal, 0);
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_EQ(gran_ & (gran_ - 1), 0u) << "granularity must be a power of two";
  auto free_bytes = b().GetFreeMemory(0);
  ASSERT_TRUE(free_bytes.ok()) << free_bytes.status().ToString();
  EXPECT_LE(*free_bytes, info->total_bytes);
  EXPECT_EQ(b().GetDeviceInfo(b().device_count()).status().code(), Code::kNotFound);
  EXPECT_EQ(b().GetDeviceInfo(-1).status().code(), Code::kNotFound);
}

TEST_P(BackendConformance, RefusesBadPageSizes) {
  EXPECT_EQ(b().CreatePage(0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b().CreatePage(0, gran_ + 4096).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b().CreatePage(b().device_count(), gran_).status().code(), Code::kNotFound);
}

TEST_P(BackendConformance, MapsWritesAndReadsAPage) {
  uintptr_t base = Reserve(4);
  PageHandle page = Create(gran_);
  MapWithAccess(base + gran_, gran_, page);
  ASSERT_OK(b().Fill(reinterpret_cast<void*>(base + gran_), 0xAB, gran_));
  std::vector<uint8_t> got(gran_);
  ASSERT_OK(b().Copy(got.data(), reinterpret_cast<void*>(base + gran_), gran_,
                     CopyKind::kDeviceToHost));
  EXPECT_EQ(got.front(), 0xAB);
  EXPECT_EQ(got.back(), 0xAB);
  ASSERT_OK(WritePattern(b(), base + gran_, gran_, 7));
  ASSERT_OK(CheckPattern(b(), base + gran_, gran_, 7));
  EXPECT_OK(b().Unmap(base + gran_, gran_));
  EXPECT_OK(b().ReleasePage(page));
}

// Issue 19 item 12: a reader's mapping is read-only (cuda's PROT_READ,
// hip's ProtRead, host's PROT_READ): the backend's own writes are refused
// before the driver sees them, reads go, and read-write comes back.
TEST_P(BackendConformance, AReadOnlyMappingTakesReadsNotWrites) {
  uintptr_t base = Reserve(1);
  PageHandle page = Create(gran_);
  MapWithAccess(base, gran_, page);
  ASSERT_OK(WritePattern(b(), base, gran_, 3));
  int devices[] = {0};
  ASSERT_OK(b().SetAccess(base, gran_, devices, Access::kReadOnly));
  EXPECT_TRUE(*b().HasAccess(base, 0));
  ASSERT_OK(CheckPattern(b(), base, gran_, 3));
  void* device = reinterpret_cast<void*>(base);
  uint8_t byte = 9;
  EXPECT_EQ(b().Copy(device, &byte, 1, CopyKind::kHostToDevice).code(), Code::kPermissionDenied);
  EXPECT_EQ(b().Fill(device, 0, gran_).code(), Code::kPermissionDenied);
  ASSERT_TRUE(CheckPattern(b(), base, gran_, 3).ok()) << "a refused write changed the bytes";
  ASSERT_OK(b().SetAccess(base, gran_, devices));
  ASSERT_OK(b().Fill(device, 0x5A, gran_));
  EXPECT_OK(b().Unmap(base, gran_));
  EXPECT_OK(b().ReleasePage(page));
}

TEST_P(BackendConformance, CopiesDeviceToDevice) {
  uintptr_t base = Reserve(2);
  PageHandle a = Create(gran_), c = Create(gran_);
  MapWithAccess(base, gran_, a);
  MapWithAccess(base + gran_, gran_, c);
  ASSERT_OK(WritePattern(b(), base, gran_, 11));
  ASSERT_OK(b().Copy(reinterpret_cast<void*>(base + gran_), reinterpret_cast<void*>(base), gran_,
                     CopyKind::kDeviceToDevice));
  ASSERT_OK(CheckPattern(b(), base + gran_, gran_, 11));
  EXPECT_OK(b().Unmap(base, 2 * gran_));  // two whole mappings in one call
  EXPECT_OK(b().ReleasePage(a));
  EXPECT_OK(b().ReleasePage(c));
}

// Rule 1: a new mapping has no access, and remapping forgets the old access.
TEST_P(BackendConformance, AccessMustBeSetAfterEveryMap) {
  uintptr_t base = Reserve(1);
  PageHandle page = Create(gran_);
  ASSERT_OK(b().Map(base, gran_, page));
  auto access = b().HasAccess(base, 0);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_FALSE(*access);
  int devices[] = {0};
  ASSERT_OK(b().SetAccess(base, gran_, devices));
  EXPECT_TRUE(*b().HasAccess(base + gran_ - 1, 0));
  ASSERT_OK(b().Unmap(base, gran_));
  ASSERT_OK(b().Map(base, gran_, page));
  access = b().HasAccess(base, 0);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_FALSE(*access) << "access survived an unmap and a new map";
  EXPECT_OK(b().Unmap(base, gran_));
  EXPECT_OK(b().ReleasePage(page));
}

// Rule 2: a mapping is unmapped whole, never in part.
TEST_P(BackendConformance, RefusesPartialUnmap) {
  uintptr_t base = Reserve(2);
  PageHandle page = Create(2 * gran_);
  MapWithAccess(base, 2 * gran_, page);
  EXPECT_EQ(b().Unmap(base, gran_).code(), Code::kInvalidArgument);
  EXPECT_EQ(b().Unmap(base + gran_, gran_).code(), Code::kInvalidArgument);
  ASSERT_OK(WritePattern(b(), base, 2 * gran_, 3));  // still mapped, still whole
  ASSERT_OK(CheckPattern(b(), base, 2 * gran_, 3));
  EXPECT_OK(b().Unmap(base, 2 * gran_));
  EXPECT_OK(b().ReleasePage(page));
}

// Access is set on whole mappings too: cuMemSetAccess answers
// CUDA_ERROR_INVALID_VALUE for part of one (seen on an H200).
TEST_P(BackendConformance, RefusesAccessOverPartOfAMapping) {
  uintptr_t base = Reserve(2);
  PageHandle page = Create(2 * gran_);
  ASSERT_OK(b().Map(base, 2 * gran_, page));
  int devices[] = {0};
  EXPECT_EQ(b().SetAccess(base, gran_, devices).code(), Code::kInvalidArgument);
  auto access = b().HasAccess(base, 0);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_FALSE(*access) << "a refused SetAccess gave access";
  EXPECT_OK(b().Unmap(base, 2 * gran_));
  EXPECT_OK(b().ReleasePage(page));
}

TEST_P(BackendConformance, RefusesMapsOutsideRangesOrOverMappings) {
  uintptr_t base = Reserve(2);
  PageHandle page = Create(gran_), other = Create(gran_);
  EXPECT_FALSE(b().Map(base, 2 * gran_, page).ok()) << "mapped past the page's size";
  ASSERT_OK(b().Map(base, gran_, page));
  EXPECT_FALSE(b().Map(base, gran_, other).ok()) << "mapped over a mapping";
  // A range freed is no longer a place to map.
  auto gone = b().ReserveRange(gran_, 0);
  ASSERT_TRUE(gone.ok());
  ASSERT_OK(b().FreeRange(*gone, gran_));
  EXPECT_FALSE(b().Map(*gone, gran_, other).ok()) << "mapped into a freed range";
  // Access over a run with a hole in it is refused.
  int devices[] = {0};
  EXPECT_FALSE(b().SetAccess(base, 2 * gran_, devices).ok()) << "set access over a hole";
  EXPECT_OK(b().Unmap(base, gran_));
  EXPECT_OK(b().ReleasePage(page));
  EXPECT_OK(b().ReleasePage(other));
}

// Rule 3: releasing the handle does not take memory a mapping still uses.
TEST_P(BackendConformance, ReleaseKeepsMappedMemoryUntilUnmap) {
  uintptr_t base = Reserve(1);
  PageHandle page = Create(gran_);
  MapWithAccess(base, gran_, page);
  ASSERT_OK(WritePattern(b(), base, gran_, 5));
  ASSERT_OK(b().ReleasePage(page));
  ASSERT_OK(CheckPattern(b(), base, gran_, 5));
  EXPECT_OK(b().Unmap(base, gran_));
}

TEST_P(BackendConformance, ExportedPageImportsAsTheSameMemory) {
  uintptr_t base = Reserve(2);
  PageHandle page = Create(gran_);
  auto fd = b().ExportPage(page);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  auto imported = b().ImportPage(*fd, 0, gran_);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_NE(imported->value, page.value);
  MapWithAccess(base, gran_, page);
  MapWithAccess(base + gran_, gran_, *imported);
  ASSERT_OK(WritePattern(b(), base, gran_, 9));
  ASSERT_OK(CheckPattern(b(), base + gran_, gran_, 9));
  // Rule 3 across handles: the exporter's release leaves the importer's page.
  ASSERT_OK(b().Unmap(base, gran_));
  ASSERT_OK(b().ReleasePage(page));
  ASSERT_OK(CheckPattern(b(), base + gran_, gran_, 9));
  EXPECT_OK(b().Unmap(base + gran_, gran_));
  EXPECT_OK(b().ReleasePage(*imported));
}

// CUDA refuses to export an imported handle; every backend does the same, so a
// layer that needs it (libkv handing pages back to a restarted kvd) is caught
// on the host backend too. The fd the page came from still imports.
TEST_P(BackendConformance, AnImportedPageCannotBeExportedAgain) {
  PageHandle page = Create(gran_);
  auto fd = b().ExportPage(page);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  int kept = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
  ASSERT_GE(kept, 0);
  auto imported = b().ImportPage(*fd, 0, gran_);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(b().ExportPage(*imported).status().code(), Code::kInvalidArgument);
  auto again = b().ImportPage(kept, 0, gran_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_OK(b().ReleasePage(*again));
  EXPECT_OK(b().ReleasePage(*imported));
  EXPECT_OK(b().ReleasePage(page));
}

TEST_P(BackendConformance, ManyThreadsMapAndUnmapAtOnce) {
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto fail = [&](const Status& s) { errors[t] = s.ToString(); };
      for (int round = 0; round < kRounds && errors[t].empty(); ++round) {
        auto base = b().ReserveRange(gran_, 0);
        if (!base.ok()) return fail(base.status());
        auto page = b().CreatePage(0, gran_);
        if (!page.ok()) return fail(page.status());
        int devices[] = {0};
        Status s = b().Map(*base, gran_, *page);
        if (s.ok()) s = b().SetAccess(*base, gran_, devices);
        uint32_t seed = static_cast<uint32_t>(t * 1000 + round);
        if (s.ok()) s = b().Fill(reinterpret_cast<void*>(*base), 0, 4096);
        if (s.ok()) s = WritePattern(b(), *base, 4096, seed);
        if (s.ok()) s = CheckPattern(b(), *base, 4096, seed);
        if (s.ok()) s = b().Unmap(*base, gran_);
        if (s.ok()) s = b().ReleasePage(*page);
        if (s.ok()) s = b().FreeRange(*base, gran_);
        if (!s.ok()) return fail(s);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
}

// The cross-process case: a page's fd crosses a socketpair by SCM_RIGHTS to a
// freshly exec'd peer, which maps it and sees the parent's bytes; the parent
// then sees the peer's bytes through its own mapping of the same page.
TEST_P(BackendConformance, PageSharedWithAnotherProcess) {
  uintptr_t base = Reserve(1);
  PageHandle page = Create(gran_);
  MapWithAccess(base, gran_, page);
  ASSERT_OK(WritePattern(b(), base, gran_, 21));

  int sockets[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The child's end must survive exec: dup2 onto itself clears CLOEXEC.
  posix_spawn_file_actions_adddup2(&actions, sockets[1], sockets[1]);
  std::string fd_arg = std::to_string(sockets[1]);
  std::string bytes_arg = std::to_string(gran_);
  std::string backend_name(b().name());
  std::string peer = PeerPath();
  const char* argv[] = {peer.c_str(), backend_name.c_str(), fd_arg.c_str(), "0",
                        bytes_arg.c_str(), "21", "22", nullptr};
  pid_t child;
  int spawned = posix_spawn(&child, peer.c_str(), &actions, nullptr,
                            const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(sockets[1]);
  ASSERT_EQ(spawned, 0) << "posix_spawn " << peer;

  auto fd = b().ExportPage(page);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  std::byte tag{0};
  Status sent = ipc::SendWithFds(sockets[0], {&tag, 1}, {&*fd, 1});
  close(*fd);  // the kernel passed its own duplicate
  EXPECT_OK(sent);

  std::vector<int> none;
  auto ack = ipc::ReceiveWithFds(sockets[0], {&tag, 1}, &none);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(*ack, 1u) << "peer closed the socket before writing (see its stderr)";
  if (*ack == 1) EXPECT_OK(CheckPattern(b(), base, gran_, 22));
  std::byte bye{2};
  (void)ipc::SendWithFds(sockets[0], {&bye, 1}, {});
  close(sockets[0]);

  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "peer status " << wstatus;
  EXPECT_OK(b().Unmap(base, gran_));
  EXPECT_OK(b().ReleasePage(page));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendConformance,
                         ::testing::Values("host", "cuda", "hip"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace nanokv::gpu
