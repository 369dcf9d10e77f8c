// The READY stress across two GPUs (issue 18). Objects are owned by GPU 1 and
// laid out as kvd's object store lays them out in a device's store range: the
// first 2 MiB page is the header arena (one 64-byte ObjectHeader per slot),
// payload follows from the second page at 256-byte aligned offsets, and an
// object that crosses a page boundary is given as one segment per page (a
// plan's spans). Producers on GPU 0 write the payload peer-to-peer into GPU
// 1's memory with kv_store_pages and publish READY with kv_commit_ready on the
// same GPU 0 stream (or all of it in kv_put_object's one launch, whose READY
// rests on its blocks' count and one release CAS, no system fence), while
// reader kernels on GPU 1 spin on each object's
// state (acquire, system scope) and then check every byte behind it. Round
// after round, with fresh bytes in the same places, so a byte of the round
// before counts as wrong too. Two kinds of GPU 1 memory: the object store's
// own (VMM pages of GPU 1 through the cuda backend, mapped back to back with
// access for both GPUs) and a plain cudaMalloc buffer under peer access.
//
// Skips, saying why, without two GPUs or where they cannot reach each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "kernels/kv_kernels.h"
#include "nanokv/object_header.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/ready_reader.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kernels {
namespace {

using testing::DeviceBuffer;

constexpr int kProducerGpu = 0;
constexpr int kOwnerGpu = 1;
constexpr std::uint64_t kPage = 2u << 20;   // kvd's page, Hopper's granularity
constexpr std::uint64_t kPayloadAlign = 256;  // the offset allocator's alignment
constexpr int kObjects = 512;
constexpr int kRounds = 12;
constexpr int kProducerStreams = 4;
constexpr int kReaderBlocks = 16;
static_assert(kObjects * sizeof(ObjectHeader) <= kPage, "the header arena is one page");

std::uint64_t AlignUp(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

// Where each object's bytes go in the store range (offsets from its base).
struct StoreLayout {
  std::vector<std::uint64_t> bytes;       // per object
  std::vector<std::uint64_t> payload_at;  // per object
  std::vector<int> first_segment = {0};   // object o: [first_segment[o], first_segment[o + 1])
  std::vector<std::uint64_t> segment_at, segment_bytes;
  std::uint64_t range_bytes = 0;          // whole pages
};

// Mostly small objects, every 8th up to 1 MiB, every 61st over a page (it
// spans two or three), a few of a handful of bytes.
StoreLayout PlanStore(std::mt19937_64& rng) {
  StoreLayout l;
  std::uint64_t at = kPage;  // payload starts after the header arena
  for (int o = 0; o < kObjects; ++o) {
    std::uint64_t bytes = o % 61 == 0   ? kPage + 1 + rng() % (kPage / 2)
                          : o % 8 == 0  ? 1 + rng() % (1u << 20)
                          : o % 5 == 0  ? 1 + rng() % 64
                                        : 1 + rng() % (64u << 10);
    at = AlignUp(at, kPayloadAlign);
    l.bytes.push_back(bytes);
    l.payload_at.push_back(at);
    for (std::uint64_t left = bytes; left > 0;) {
      const std::uint64_t piece = std::min(left, kPage - at % kPage);
      l.segment_at.push_back(at);
      l.segment_bytes.push_back(piece);
      at += piece;
      left -= piece;
    }
    l.first_segment.push_back(static_cast<int>(l.segment_at.size()));
  }
  l.range_bytes = AlignUp(at, kPage);
  return l;
}

// GPU 1's pages as the object store holds them: created on the owner device,
// mapped back to back in one reserved range, access for `access` devices.
class VmmStoreRange {
 public:
  static Result<std::unique_ptr<VmmStoreRange>> Create(gpu::Backend& backend, int device, std::uint64_t bytes,
                                                      std::span<const int> access) {
    NANOKV_ASSIGN_OR_RETURN(gpu::DeviceInfo info, backend.GetDeviceInfo(device));
    if (info.granularity == 0 || kPage % info.granularity != 0) {
      return Status::Unsupported("device granularity " + std::to_string(info.granularity) +
                                 " does not divide 2 MiB");
    }
    auto range = std::unique_ptr<VmmStoreRange>(new VmmStoreRange(backend, bytes));
    NANOKV_ASSIGN_OR_RETURN(range->base_, backend.ReserveRange(bytes, 0));
    for (std::uint64_t at = 0; at < bytes; at += kPage) {
      NANOKV_ASSIGN_OR_RETURN(gpu::PageHandle page, backend.CreatePage(device, kPage));
      Status mapped = backend.Map(range->base_ + at, kPage, page);
      Status released = backend.ReleasePage(page);  // the mapping keeps it
      NANOKV_RETURN_IF_ERROR(mapped);
      range->mapped_bytes_ = at + kPage;
      NANOKV_RETURN_IF_ERROR(released);
    }
    NANOKV_RETURN_IF_ERROR(backend.SetAccess(range->base_, bytes, access));
    return range;
  }
  ~VmmStoreRange() {
    if (mapped_bytes_ > 0) (void)backend_.Unmap(base_, mapped_bytes_);
    if (base_ != 0) (void)backend_.FreeRange(base_, bytes_);
  }
  VmmStoreRange(const VmmStoreRange&) = delete;
  VmmStoreRange& operator=(const VmmStoreRange&) = delete;
  char* base() const { return reinterpret_cast<char*>(base_); }

 private:
  VmmStoreRange(gpu::Backend& backend, std::uint64_t bytes) : backend_(backend), bytes_(bytes) {}
  gpu::Backend& backend_;
  std::uint64_t bytes_;
  uintptr_t base_ = 0;
  std::uint64_t mapped_bytes_ = 0;
};

// What the rounds saw, summed.
struct Totals {
  unsigned long long seen = 0, violations = 0, timeouts = 0;
  unsigned long long not_committed = 0, not_ready = 0, wrong_after = 0;
};

class CrossGpuReadyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NANOKV_SKIP_WITHOUT_GPU();
    int gpus = 0;
    CUDA_ASSERT(cudaGetDeviceCount(&gpus));
    if (gpus < 2) GTEST_SKIP() << "needs two GPUs; cudaGetDeviceCount sees " << gpus;
    int there = 0, back = 0;
    CUDA_ASSERT(cudaDeviceCanAccessPeer(&there, kProducerGpu, kOwnerGpu));
    CUDA_ASSERT(cudaDeviceCanAccessPeer(&back, kOwnerGpu, kProducerGpu));
    if (!there || !back) {
      GTEST_SKIP() << "GPU 0 and GPU 1 cannot reach each other's memory (cudaDeviceCanAccessPeer 0->1: "
                   << there << ", 1->0: " << back << ")";
    }
    EnablePeer(kProducerGpu, kOwnerGpu);
    EnablePeer(kOwnerGpu, kProducerGpu);
    int atomics = -1, rank = -1;
    CUDA_ASSERT(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, kProducerGpu, kOwnerGpu));
    CUDA_ASSERT(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, kProducerGpu, kOwnerGpu));
    // kv_commit_ready's CAS runs on GPU 0 against GPU 1's memory: say whether
    // the link does it natively (NVLink does; PCIe may not).
    RecordProperty("p2p_native_atomics", atomics);
    RecordProperty("p2p_performance_rank", rank);
    std::printf("GPU 0 -> GPU 1: peer access both ways, native atomics %d, performance rank %d\n", atomics, rank);
  }

  void TearDown() override { (void)cudaSetDevice(kProducerGpu); }

  static void EnablePeer(int device, int peer) {
    CUDA_ASSERT(cudaSetDevice(device));
    cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();  // another test of this process enabled it
      return;
    }
    CUDA_ASSERT(e);
  }

  // The stress over a store range of layout.range_bytes at `store` (GPU 1's
  // memory). `put_object`: each object by kv_put_object on a zeroed slot
  // (the slot's previous object gone), else by kv_store_pages and
  // kv_commit_ready after a header kvd's open would have left WRITING.
  void RunRounds(char* store, const StoreLayout& layout, bool put_object, Totals* t);
  // RunRounds in the object store's memory: VMM pages of GPU 1 through the
  // cuda backend, access for both GPUs; the layout from `seed`.
  void RunInStorePages(std::uint64_t seed, bool put_object);
};

void CrossGpuReadyTest::RunRounds(char* store, const StoreLayout& layout, bool put_object, Totals* t) {
  const size_t n_segments = layout.segment_at.size();
  auto* headers = reinterpret_cast<ObjectHeader*>(store);
  std::vector<char*> segment_ptr(n_segments);
  std::vector<Segment> segments(n_segments);
  for (size_t g = 0; g < n_segments; ++g) {
    segment_ptr[g] = store + layout.segment_at[g];
    segments[g] = {segment_ptr[g], layout.segment_bytes[g]};
  }
  // The producers' side, on GPU 0: every object's bytes staged in one arena
  // (some at odd offsets, so store and source disagree in alignment), the
  // commit results, the streams.
  std::vector<std::uint64_t> src_at(kObjects);
  std::uint64_t src_bytes = 0;
  for (int o = 0; o < kObjects; ++o) {
    src_bytes = AlignUp(src_bytes, kPayloadAlign) + (o % 3 == 0 ? o % 16 : 0);
    src_at[o] = src_bytes;
    src_bytes += layout.bytes[o];
  }
  CUDA_ASSERT(cudaSetDevice(kProducerGpu));
  DeviceBuffer src(src_bytes), results(kObjects * 2 * sizeof(std::uint32_t));
  ASSERT_TRUE(src.ok() && results.ok());
  cudaStream_t producers[kProducerStreams];
  for (cudaStream_t& s : producers) CUDA_ASSERT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The readers' side, on GPU 1.
  CUDA_ASSERT(cudaSetDevice(kOwnerGpu));
  DeviceBuffer d_segment_ptr(n_segments * sizeof(char*)), d_segment_bytes(n_segments * sizeof(std::uint64_t)),
      d_first(layout.first_segment.size() * sizeof(int)), counts(sizeof(testing::ReaderCounts));
  ASSERT_TRUE(d_segment_ptr.ok() && d_segment_bytes.ok() && d_first.ok() && counts.ok());
  CUDA_ASSERT(cudaMemcpy(d_segment_ptr.get(), segment_ptr.data(), d_segment_ptr.size(), cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_segment_bytes.get(), layout.segment_bytes.data(), d_segment_bytes.size(),
                         cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_first.get(), layout.first_segment.data(), d_first.size(), cudaMemcpyHostToDevice));
  cudaStream_t reader;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking));

  std::mt19937_64 rng(2026);
  std::vector<std::uint8_t> staged(src_bytes), back(layout.range_bytes);
  std::vector<ObjectHeader> hdrs(kObjects), hdrs_after(kObjects);
  std::vector<std::uint32_t> res(kObjects * 2);
  std::vector<int> order(kObjects);
  std::iota(order.begin(), order.end(), 0);
  for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
    const std::uint64_t seed_base = 77 + static_cast<std::uint64_t>(round) * 100'003;
    for (int o = 0; o < kObjects; ++o) {
      for (std::uint64_t i = 0; i < layout.bytes[o]; ++i) {
        staged[src_at[o] + i] = testing::PatternByte(seed_base + o, i);
      }
      ObjectHeader& h = hdrs[o];
      h = ObjectHeader{};
      h.key_hash = seed_base + o;
      h.n_pages = static_cast<std::uint32_t>(layout.first_segment[o + 1] - layout.first_segment[o]);
      h.page_bytes = static_cast<std::uint32_t>(kPage);
      h.payload_base = layout.payload_at[o];
      h.bytes_total = layout.bytes[o];
      h.state = static_cast<std::uint32_t>(ObjectState::kWriting);  // as kvd writes it at open
      h.epoch = static_cast<std::uint32_t>(round * kObjects + o + 1);
    }
    CUDA_ASSERT(cudaSetDevice(kProducerGpu));
    CUDA_ASSERT(cudaMemcpy(src.get(), staged.data(), src_bytes, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemset(results.get(), 0xFF, results.size()));
    CUDA_ASSERT(cudaDeviceSynchronize());
    CUDA_ASSERT(cudaSetDevice(kOwnerGpu));
    if (put_object) {
      CUDA_ASSERT(cudaMemset(headers, 0, kObjects * sizeof(ObjectHeader)));
    } else {
      CUDA_ASSERT(cudaMemcpy(headers, hdrs.data(), kObjects * sizeof(ObjectHeader), cudaMemcpyHostToDevice));
    }
    CUDA_ASSERT(cudaMemset(counts.get(), 0, counts.size()));
    CUDA_ASSERT(cudaDeviceSynchronize());

    // GPU 1's readers spin first; then GPU 0's producers store and commit,
    // in a fresh order each round, over several streams.
    ASSERT_EQ(testing::LaunchReadyReader(headers, d_segment_ptr.as<const char* const>(),
                                         d_segment_bytes.as<std::uint64_t>(), d_first.as<int>(), kObjects,
                                         seed_base, counts.as<testing::ReaderCounts>(), kReaderBlocks, reader),
              0);
    std::shuffle(order.begin(), order.end(), rng);
    CUDA_ASSERT(cudaSetDevice(kProducerGpu));
    for (int k = 0; k < kObjects; ++k) {
      const int o = order[k];
      const int first = layout.first_segment[o];
      const auto n = static_cast<size_t>(layout.first_segment[o + 1] - first);
      if (put_object) {
        ASSERT_OK(PutObject(src.bytes_at(src_at[o]), segments.data() + first, n, headers + o, hdrs[o],
                            results.as<std::uint32_t>() + 2 * o, producers[k % kProducerStreams]));
      } else {
        ASSERT_OK(StorePagesAndCommit(src.bytes_at(src_at[o]), segments.data() + first, n, headers + o,
                                      hdrs[o].epoch, results.as<std::uint32_t>() + 2 * o,
                                      producers[k % kProducerStreams]));
      }
    }
    for (cudaStream_t s : producers) CUDA_ASSERT(cudaStreamSynchronize(s));
    CUDA_ASSERT(cudaMemcpy(res.data(), results.get(), results.size(), cudaMemcpyDeviceToHost));
    CUDA_ASSERT(cudaSetDevice(kOwnerGpu));
    CUDA_ASSERT(cudaStreamSynchronize(reader));

    testing::ReaderCounts c{};
    CUDA_ASSERT(cudaMemcpy(&c, counts.get(), sizeof c, cudaMemcpyDeviceToHost));
    t->seen += c.objects_seen;
    t->violations += c.violations;
    t->timeouts += c.timeouts;
    // Afterwards, from the host: every commit took, every state is READY,
    // every byte is this round's.
    CUDA_ASSERT(cudaMemcpy(back.data(), store, layout.range_bytes, cudaMemcpyDeviceToHost));
    std::memcpy(hdrs_after.data(), back.data(), kObjects * sizeof(ObjectHeader));
    for (int o = 0; o < kObjects; ++o) {
      t->not_committed += res[2 * o] != static_cast<std::uint32_t>(CommitCode::kCommitted);
      t->not_ready += hdrs_after[o].state != static_cast<std::uint32_t>(ObjectState::kReady);
      const std::uint8_t* got = back.data() + layout.payload_at[o];
      const std::uint8_t* want = staged.data() + src_at[o];
      for (std::uint64_t i = 0; i < layout.bytes[o]; ++i) t->wrong_after += got[i] != want[i];
    }
  }
  for (cudaStream_t s : producers) cudaStreamDestroy(s);
  cudaStreamDestroy(reader);
}

void ExpectClean(const Totals& t, const StoreLayout& layout) {
  std::printf("%d rounds x %d objects (%zu segments, %llu MiB of store): seen %llu, bytes wrong after READY %llu, "
              "timeouts %llu, commits refused %llu, not READY after %llu, bytes wrong after all %llu\n",
              kRounds, kObjects, layout.segment_at.size(),
              static_cast<unsigned long long>(layout.range_bytes >> 20), t.seen, t.violations, t.timeouts,
              t.not_committed, t.not_ready, t.wrong_after);
  EXPECT_EQ(t.violations, 0u) << "a reader on GPU 1 saw READY before the last byte from GPU 0";
  EXPECT_EQ(t.timeouts, 0u);
  EXPECT_EQ(t.seen, static_cast<unsigned long long>(kRounds) * kObjects);
  EXPECT_EQ(t.not_committed, 0u);
  EXPECT_EQ(t.not_ready, 0u);
  EXPECT_EQ(t.wrong_after, 0u);
}

void CrossGpuReadyTest::RunInStorePages(std::uint64_t seed, bool put_object) {
  auto backend = gpu::MakeCudaBackend();
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  std::mt19937_64 rng(seed);
  const StoreLayout layout = PlanStore(rng);
  const int access[] = {kProducerGpu, kOwnerGpu};
  auto range = VmmStoreRange::Create(**backend, kOwnerGpu, layout.range_bytes, access);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  Totals t;
  RunRounds((*range)->base(), layout, put_object, &t);
  if (HasFatalFailure()) return;
  ExpectClean(t, layout);
}

// kv_store_pages + kv_commit_ready after a WRITING header.
TEST_F(CrossGpuReadyTest, StorePagesReaderNeverSeesReadyBeforeTheBytes) { RunInStorePages(18, /*put_object=*/false); }

// The same store, each object by kv_put_object in one launch.
TEST_F(CrossGpuReadyTest, PutObjectReaderNeverSeesReadyBeforeTheBytes) { RunInStorePages(20, /*put_object=*/true); }

// A plain cudaMalloc buffer of GPU 1 under peer access.
TEST_F(CrossGpuReadyTest, PeerBufferReaderNeverSeesReadyBeforeTheBytes) {
  std::mt19937_64 rng(19);
  const StoreLayout layout = PlanStore(rng);
  CUDA_ASSERT(cudaSetDevice(kOwnerGpu));
  DeviceBuffer store(layout.range_bytes);
  ASSERT_TRUE(store.ok());
  Totals t;
  RunRounds(store.as<char>(), layout, /*put_object=*/false, &t);
  if (HasFatalFailure()) return;
  ExpectClean(t, layout);
}

}  // namespace
}  // namespace nanokv::kernels
