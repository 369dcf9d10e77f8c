// v2 slabs on a GPU (issue 34): a kernel's threads allocate objects in a
// slab with device-scope atomics on a cursor in device memory and announce
// them into kvd's ring in host memory (a sealed memfd, registered with the
// driver), stamping each record with a release at system scope, while the
// host reads the ring as kvd does (ipc/ring/announce_ring.h). Every object
// is read once, in no overlap, and the ring (smaller than the batch) wraps.
// Then whole puts by blocks (PutInSlabBlock), read back READY and exact;
// and on two GPUs, puts from GPU 0 into GPU 1's memory raced by a reader there.
#include <xxhash.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ipc/ring/announce_ring.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/ready_reader.h"
#include "tests/gpu/slab_producer.h"

namespace nanokv::testing {
namespace {

// An announce ring as a test kernel and kvd share it: kvd's end and the
// producer's mapping, registered with the GPU (header and records are the
// device's addresses of it), unregistered on destruction.
class GpuRing {
 public:
  static Result<std::unique_ptr<GpuRing>> Make(uint32_t records, ipc::SlabBounds bounds) {
    int fd = -1;
    NANOKV_ASSIGN_OR_RETURN(ipc::AnnounceRing kvd, ipc::AnnounceRing::Create(records, bounds, &fd));
    Result<ipc::AnnounceRing> mapped = ipc::AnnounceRing::Attach(fd);  // the producer's mapping
    close(fd);
    NANOKV_RETURN_IF_ERROR(mapped.status());
    auto ring = std::unique_ptr<GpuRing>(new GpuRing(std::move(kvd), std::move(*mapped)));
    if (cudaHostRegister(ring->mapped_.header(), ipc::AnnounceRing::FileBytes(records), cudaHostRegisterMapped) !=
        cudaSuccess) {
      return Status::Internal("cudaHostRegister of the ring");
    }
    ring->registered_ = true;
    void* on_device = nullptr;
    if (cudaHostGetDevicePointer(&on_device, ring->mapped_.header(), 0) != cudaSuccess) {
      return Status::Internal("cudaHostGetDevicePointer of the ring");
    }
    ring->header = static_cast<device::AnnounceRingHeader*>(on_device);
    ring->records = reinterpret_cast<device::AnnounceRecord*>(ring->header + 1);
    return ring;
  }
  ~GpuRing() {
    if (registered_) (void)cudaHostUnregister(mapped_.header());
  }

  // kvd's side: reads the ring while the kernel on `stream` runs, until it
  // has finished and nothing is left; each key must come once.
  Result<std::map<std::string, ipc::AnnouncedObject>> ReadWhileRunning(cudaStream_t stream) {
    std::map<std::string, ipc::AnnouncedObject> read;
    for (;;) {
      const bool finished = cudaStreamQuery(stream) == cudaSuccess;
      NANOKV_ASSIGN_OR_RETURN(std::vector<ipc::AnnouncedObject> got, kvd.Poll(64));
      for (auto& o : got) {
        if (!read.emplace(o.key, o).second) return Status::Internal(o.key + " read twice");
      }
      if (finished && got.empty()) return read;
    }
  }

  ipc::AnnounceRing kvd;
  device::AnnounceRingHeader* header = nullptr;
  device::AnnounceRecord* records = nullptr;

 private:
  GpuRing(ipc::AnnounceRing kvd_end, ipc::AnnounceRing mapped) : kvd(std::move(kvd_end)), mapped_(std::move(mapped)) {}
  ipc::AnnounceRing mapped_;
  bool registered_ = false;
};

// The tables a producer kernel reads, item by item: keys (32 bytes apart),
// their lengths and hashes, sizes and source offsets (sources end to end,
// `skew(i)` bytes apart), built here and uploaded to the current device.
struct ProducerItems {
  template <typename SizeOf, typename Skew>
  ProducerItems(const std::string& prefix, int n, SizeOf size_of, Skew skew)
      : keys(size_t{static_cast<size_t>(n)} * 32), key_bytes(n), hashes(n), sizes(n), offsets(n) {
    for (int i = 0; i < n; ++i) {
      const std::string key = prefix + std::to_string(i);
      std::memcpy(&keys[size_t{static_cast<size_t>(i)} * 32], key.data(), key.size());
      key_bytes[i] = static_cast<uint32_t>(key.size());
      hashes[i] = XXH64(key.data(), key.size(), 0);
      sizes[i] = size_of(i);
      offsets[i] = src_bytes + skew(i);
      src_bytes = offsets[i] + sizes[i];
    }
  }
  void Upload() {
    const size_t n = sizes.size();
    CUDA_ASSERT(cudaMemcpy(d_keys.get(), keys.data(), keys.size(), cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(d_key_bytes.get(), key_bytes.data(), n * 4, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(d_hashes.get(), hashes.data(), n * 8, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(d_sizes.get(), sizes.data(), n * 8, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(d_offsets.get(), offsets.data(), n * 8, cudaMemcpyHostToDevice));
  }

  std::vector<char> keys;
  std::vector<uint32_t> key_bytes;
  std::vector<uint64_t> hashes, sizes, offsets;
  uint64_t src_bytes = 0;
  DeviceBuffer d_keys{keys.size()}, d_key_bytes{key_bytes.size() * 4}, d_hashes{hashes.size() * 8},
      d_sizes{sizes.size() * 8}, d_offsets{offsets.size() * 8};
};

TEST(SlabGpuTest, KernelThreadsAllocateAndAnnounceWhileTheHostReads) {
  NANOKV_SKIP_WITHOUT_GPU();
  constexpr int kBlocks = 32, kThreads = 64, kPerThread = 4;
  constexpr int kItems = kBlocks * kThreads * kPerThread;  // 8192 through a ring of 256
  constexpr uint64_t kPayload = uint64_t{64} << 20;
  auto ring = GpuRing::Make(256, {kPayload, kItems});
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();

  ProducerItems items(
      "v2:item:", kItems, [](int i) { return 512 + static_cast<uint64_t>(i % 7) * 1000; }, [](int) { return 0; });
  ASSERT_NO_FATAL_FAILURE(items.Upload());
  DeviceBuffer d_cursor(sizeof(device::SlabCursor)), d_counts(sizeof(SlabProducerCounts));
  const device::SlabCursor cursor{0, kPayload, 0, kItems, 0, 256, 256, 0};
  CUDA_ASSERT(cudaMemcpy(d_cursor.get(), &cursor, sizeof(cursor), cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemset(d_counts.get(), 0, sizeof(SlabProducerCounts)));
  cudaStream_t stream = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_EQ(
      LaunchSlabProducer(d_cursor.as<device::SlabCursor>(), (*ring)->header, (*ring)->records, items.d_keys.as<char>(),
                         items.d_key_bytes.as<uint32_t>(), items.d_hashes.as<uint64_t>(), items.d_sizes.as<uint64_t>(),
                         kPerThread, kBlocks, kThreads, d_counts.as<SlabProducerCounts>(), stream),
      0);
  // kvd's side: read while the kernel runs (the ring holds 256 of 8192).
  auto read_or = (*ring)->ReadWhileRunning(stream);
  ASSERT_TRUE(read_or.ok()) << read_or.status().ToString();
  const std::map<std::string, ipc::AnnouncedObject>& read = *read_or;
  CUDA_ASSERT(cudaStreamSynchronize(stream));
  SlabProducerCounts counts{};
  CUDA_ASSERT(cudaMemcpy(&counts, d_counts.get(), sizeof(counts), cudaMemcpyDeviceToHost));
  EXPECT_EQ(counts.stalled, 0u);
  EXPECT_EQ(counts.spent, 0u);
  EXPECT_EQ(counts.announced, static_cast<unsigned long long>(kItems));
  ASSERT_EQ(read.size(), static_cast<size_t>(kItems));
  for (int i = 0; i < kItems; ++i) {
    auto it = read.find("v2:item:" + std::to_string(i));
    ASSERT_NE(it, read.end()) << i;
    EXPECT_EQ(it->second.bytes, items.sizes[i]);
  }
  EXPECT_EQ((*ring)->kvd.consumed(), static_cast<uint64_t>(kItems));
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

// Whole puts by blocks (PutInSlabBlock): each object's header begun, its
// bytes copied by the block, READY released, the record stamped, while the
// host reads the ring as kvd does. Every object announced reads back READY
// at its slot's epoch with its bytes exact, misaligned sources included.
TEST(SlabGpuTest, BlocksPutWholeObjectsThatReadBackReadyAndByteExact) {
  NANOKV_SKIP_WITHOUT_GPU();
  constexpr int kItems = 600, kBlocks = 48;
  constexpr uint32_t kRecords = 64;  // the ring wraps nine times
  constexpr uint64_t kPayload = uint64_t{64} << 20, kStoreOffset = uint64_t{2} << 20;
  constexpr uint32_t kFirstEpoch = 1000;
  auto ring = GpuRing::Make(kRecords, {kPayload, kItems});
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();

  // Every third source misaligned.
  ProducerItems items(
      "v2:block:", kItems, [](int i) { return 1 + static_cast<uint64_t>(i) * 7919 % (64 << 10); },
      [](int i) { return i % 3 == 0 ? 5 : 0; });
  ASSERT_NO_FATAL_FAILURE(items.Upload());
  const uint64_t src_bytes = items.src_bytes;
  std::vector<char> source(src_bytes);
  for (uint64_t b = 0; b < src_bytes; ++b) source[b] = static_cast<char>(b * 131 + (b >> 11));
  DeviceBuffer d_cursor(sizeof(device::SlabCursor)), d_counts(sizeof(SlabProducerCounts)), d_src(src_bytes),
      d_payload(kPayload), d_headers(sizeof(ObjectHeader) * kItems);
  const device::SlabCursor cursor{0, kPayload, 0, kItems, 0, kRecords, 256, 0};
  CUDA_ASSERT(cudaMemcpy(d_cursor.get(), &cursor, sizeof(cursor), cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_src.get(), source.data(), src_bytes, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemset(d_headers.get(), 0, sizeof(ObjectHeader) * kItems));
  CUDA_ASSERT(cudaMemset(d_counts.get(), 0, sizeof(SlabProducerCounts)));
  const device::SlabGeometry slab{d_payload.as<char>(), d_headers.as<ObjectHeader>(), kStoreOffset, 2u << 20,
                                  kFirstEpoch};
  cudaStream_t stream = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_EQ(
      LaunchSlabBlockPuts(d_cursor.as<device::SlabCursor>(), (*ring)->header, (*ring)->records, slab, d_src.as<char>(),
                          items.d_offsets.as<uint64_t>(), items.d_keys.as<char>(), items.d_key_bytes.as<uint32_t>(),
                          items.d_hashes.as<uint64_t>(), items.d_sizes.as<uint64_t>(), kItems, kBlocks,
                          d_counts.as<SlabProducerCounts>(), stream),
      0);
  auto read_or = (*ring)->ReadWhileRunning(stream);
  ASSERT_TRUE(read_or.ok()) << read_or.status().ToString();
  const std::map<std::string, ipc::AnnouncedObject>& read = *read_or;
  CUDA_ASSERT(cudaStreamSynchronize(stream));
  SlabProducerCounts counts{};
  CUDA_ASSERT(cudaMemcpy(&counts, d_counts.get(), sizeof(counts), cudaMemcpyDeviceToHost));
  EXPECT_EQ(counts.stalled, 0u);
  EXPECT_EQ(counts.spent, 0u);
  ASSERT_EQ(read.size(), static_cast<size_t>(kItems));
  std::vector<ObjectHeader> headers(kItems);
  CUDA_ASSERT(cudaMemcpy(headers.data(), d_headers.get(), sizeof(ObjectHeader) * kItems, cudaMemcpyDeviceToHost));
  std::vector<char> payload(kPayload);
  CUDA_ASSERT(cudaMemcpy(payload.data(), d_payload.get(), kPayload, cudaMemcpyDeviceToHost));
  for (int i = 0; i < kItems; ++i) {
    auto it = read.find("v2:block:" + std::to_string(i));
    ASSERT_NE(it, read.end()) << i;
    const ipc::AnnouncedObject& o = it->second;
    ASSERT_EQ(o.bytes, items.sizes[i]);
    const ObjectHeader& h = headers[o.header_slot];
    EXPECT_EQ(h.state, static_cast<uint32_t>(ObjectState::kReady)) << i;
    EXPECT_EQ(h.epoch, kFirstEpoch + o.header_slot) << i;
    EXPECT_EQ(o.epoch, h.epoch) << i;
    EXPECT_EQ(h.bytes_total, items.sizes[i]) << i;
    EXPECT_EQ(h.key_hash, items.hashes[i]) << i;
    EXPECT_EQ(h.payload_base, kStoreOffset + o.payload_offset) << i;
    ASSERT_EQ(std::memcmp(&payload[o.payload_offset], &source[items.offsets[i]], items.sizes[i]), 0) << i << " differs";
  }
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

// The READY stress across two GPUs for v2 (issue 34): blocks on GPU 0 put
// whole objects (PutInSlabBlock) into a slab in GPU 1's memory while a
// reader kernel on GPU 1 awaits each slot's READY at its epoch and checks
// every byte behind it, and the host reads the ring as kvd does. Round
// after round into the same memory with new bytes and epochs, so a byte of
// the round before counts as wrong too.
TEST(SlabGpuTest, APutFromAnotherGpuIsNeverSeenReadyBeforeItsBytes) {
  NANOKV_SKIP_WITHOUT_GPU();
  int gpus = 0, there = 0;
  CUDA_ASSERT(cudaGetDeviceCount(&gpus));
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs; cudaGetDeviceCount sees " << gpus;
  CUDA_ASSERT(cudaDeviceCanAccessPeer(&there, 0, 1));
  if (!there) GTEST_SKIP() << "GPU 0 cannot reach GPU 1's memory";
  constexpr int kItems = 400, kBlocks = 64, kRounds = 8;
  constexpr uint32_t kRecords = 128;
  constexpr uint64_t kPayload = uint64_t{96} << 20, kStoreOffset = uint64_t{2} << 20;
  // GPU 0: the producer's tables (ProducerItems allocates on the current device).
  CUDA_ASSERT(cudaSetDevice(0));
  ProducerItems items(
      "v2:peer:", kItems,
      [](int i) { return i % 50 == 0 ? (uint64_t{1} << 20) + 3 : 1 + static_cast<uint64_t>(i) * 7919 % (128 << 10); },
      [](int) { return 0; });
  ASSERT_NO_FATAL_FAILURE(items.Upload());
  const std::vector<uint64_t>& sizes = items.sizes;
  const std::vector<uint64_t>& offsets = items.offsets;
  const uint64_t src_bytes = items.src_bytes;
  // GPU 1: the slab's payload and header slots, the reader's tables.
  CUDA_ASSERT(cudaSetDevice(1));
  DeviceBuffer d_payload(kPayload), d_headers(sizeof(ObjectHeader) * kItems), d_read_hashes(kItems * 8),
      d_read_sizes(kItems * 8), d_reader_counts(sizeof(ReaderCounts));
  CUDA_ASSERT(cudaMemset(d_headers.get(), 0, sizeof(ObjectHeader) * kItems));
  CUDA_ASSERT(cudaMemcpy(d_read_hashes.get(), items.hashes.data(), kItems * 8, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_read_sizes.get(), sizes.data(), kItems * 8, cudaMemcpyHostToDevice));
  cudaStream_t reader_stream = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&reader_stream, cudaStreamNonBlocking));
  // GPU 0: the producer's cursor and sources; access to GPU 1.
  CUDA_ASSERT(cudaSetDevice(0));
  const cudaError_t peer = cudaDeviceEnablePeerAccess(1, 0);
  if (peer == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError();
  else
    CUDA_ASSERT(peer);
  DeviceBuffer d_cursor(sizeof(device::SlabCursor)), d_counts(sizeof(SlabProducerCounts)), d_src(src_bytes);
  cudaStream_t stream = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<char> source(src_bytes);
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t seed = 7000 + static_cast<uint64_t>(round) * kItems;
    const uint32_t first_epoch = 1000 + static_cast<uint32_t>(round) * 1000;
    for (int i = 0; i < kItems; ++i) {
      for (uint64_t b = 0; b < sizes[i]; ++b) source[offsets[i] + b] = static_cast<char>(PatternByte(seed + i, b));
    }
    CUDA_ASSERT(cudaMemcpy(d_src.get(), source.data(), src_bytes, cudaMemcpyHostToDevice));
    const device::SlabCursor cursor{0, kPayload, 0, kItems, 0, kRecords, 256, 0};
    CUDA_ASSERT(cudaMemcpy(d_cursor.get(), &cursor, sizeof(cursor), cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemset(d_counts.get(), 0, sizeof(SlabProducerCounts)));
    auto ring = GpuRing::Make(kRecords, {kPayload, kItems});
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    // The reader first, spinning on GPU 1; then the producer on GPU 0.
    CUDA_ASSERT(cudaSetDevice(1));
    CUDA_ASSERT(cudaMemset(d_reader_counts.get(), 0, sizeof(ReaderCounts)));
    ASSERT_EQ(LaunchSlabReader(d_headers.as<ObjectHeader>(), d_payload.as<char>(), kStoreOffset, first_epoch, kItems,
                               d_read_hashes.as<uint64_t>(), d_read_sizes.as<uint64_t>(), kItems, seed,
                               d_reader_counts.as<ReaderCounts>(), 32, reader_stream),
              0);
    CUDA_ASSERT(cudaSetDevice(0));
    const device::SlabGeometry slab{d_payload.as<char>(), d_headers.as<ObjectHeader>(), kStoreOffset, 2u << 20,
                                    first_epoch};
    ASSERT_EQ(
        LaunchSlabBlockPuts(d_cursor.as<device::SlabCursor>(), (*ring)->header, (*ring)->records, slab,
                            d_src.as<char>(), items.d_offsets.as<uint64_t>(), items.d_keys.as<char>(),
                            items.d_key_bytes.as<uint32_t>(), items.d_hashes.as<uint64_t>(),
                            items.d_sizes.as<uint64_t>(), kItems, kBlocks, d_counts.as<SlabProducerCounts>(), stream),
        0);
    auto read = (*ring)->ReadWhileRunning(stream);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    CUDA_ASSERT(cudaStreamSynchronize(stream));
    CUDA_ASSERT(cudaStreamSynchronize(reader_stream));
    SlabProducerCounts made{};
    ReaderCounts seen{};
    CUDA_ASSERT(cudaMemcpy(&made, d_counts.get(), sizeof(made), cudaMemcpyDeviceToHost));
    CUDA_ASSERT(cudaMemcpy(&seen, d_reader_counts.get(), sizeof(seen), cudaMemcpyDeviceToHost));
    EXPECT_EQ(made.announced, static_cast<unsigned long long>(kItems)) << "round " << round;
    EXPECT_EQ(read->size(), static_cast<size_t>(kItems)) << "round " << round;
    EXPECT_EQ(seen.objects_seen, static_cast<unsigned long long>(kItems)) << "round " << round;
    EXPECT_EQ(seen.timeouts, 0u) << "round " << round;
    ASSERT_EQ(seen.violations, 0u) << "round " << round << ": a reader on GPU 1 saw READY before the bytes";
  }
  CUDA_ASSERT(cudaStreamDestroy(stream));
  CUDA_ASSERT(cudaSetDevice(1));
  CUDA_ASSERT(cudaStreamDestroy(reader_stream));
  CUDA_ASSERT(cudaSetDevice(0));
}

}  // namespace
}  // namespace nanokv::testing
