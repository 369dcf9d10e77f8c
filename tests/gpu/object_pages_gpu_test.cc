// The object store's kernels on the GPU: kv_store_pages / kv_load_pages
// round trips over non-contiguous segments (odd sizes, odd alignments, more
// segments than one launch carries), kv_commit_ready's transitions, and a
// stress where a reader kernel spins on READY while another stream stores
// and commits objects: once READY is seen, every byte must be there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kv_kernels.h"
#include "nanokv/object_header.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/ready_reader.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kernels {
namespace {

using testing::DeviceBuffer;

class ObjectPagesGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { NANOKV_SKIP_WITHOUT_GPU(); }
};

// n segments carved from `arena` at random offsets with gaps, sizes in
// [0, max_bytes] (some zero), in a shuffled order so pieces are not ascending.
std::vector<Segment> CarveSegments(DeviceBuffer& arena, int n, std::uint64_t max_bytes,
                                   std::mt19937_64& rng, std::vector<std::pair<size_t, size_t>>* spans) {
  std::vector<Segment> segs;
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    at += rng() % 61;  // an odd gap, so alignments vary
    std::uint64_t bytes = (rng() % 10 == 0) ? 0 : 1 + rng() % max_bytes;
    if (at + bytes > arena.size()) break;
    segs.push_back({arena.bytes_at(at), bytes});
    spans->push_back({at, static_cast<size_t>(bytes)});
    at += bytes;
  }
  std::vector<size_t> order(segs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Segment> shuffled;
  std::vector<std::pair<size_t, size_t>> shuffled_spans;
  for (size_t i : order) {
    shuffled.push_back(segs[i]);
    shuffled_spans.push_back((*spans)[i]);
  }
  *spans = shuffled_spans;
  return shuffled;
}

void RoundTrip(int n_segments, std::uint64_t max_bytes, std::uint64_t seed, size_t src_offset,
               size_t dst_offset) {
  std::mt19937_64 rng(seed);
  DeviceBuffer arena(static_cast<size_t>(n_segments) * (max_bytes + 64) + 4096);
  ASSERT_TRUE(arena.ok());
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<Segment> segs = CarveSegments(arena, n_segments, max_bytes, rng, &spans);
  std::uint64_t total = 0;
  for (const Segment& s : segs) total += s.bytes;
  ASSERT_GT(total, 0u);

  CUDA_ASSERT(cudaMemset(arena.get(), 0xEE, arena.size()));  // guard fill
  DeviceBuffer src(total + src_offset), dst(total + dst_offset);
  ASSERT_TRUE(src.ok() && dst.ok());
  const std::vector<std::uint8_t> data = testing::Pattern(seed, total);
  CUDA_ASSERT(cudaMemcpy(src.bytes_at(src_offset), data.data(), total, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemset(dst.get(), 0, dst.size()));

  ASSERT_OK(StorePages(src.bytes_at(src_offset), segs.data(), segs.size(), nullptr));
  ASSERT_OK(LoadPages(dst.bytes_at(dst_offset), segs.data(), segs.size(), nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());

  std::vector<std::uint8_t> back(total), pages(arena.size());
  CUDA_ASSERT(cudaMemcpy(back.data(), dst.bytes_at(dst_offset), total, cudaMemcpyDeviceToHost));
  CUDA_ASSERT(cudaMemcpy(pages.data(), arena.get(), arena.size(), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(back == data) << "load(store(x)) != x over " << segs.size() << " segments";

  // Each segment holds its piece of the object, in list order; the gaps keep the guard.
  std::vector<bool> covered(arena.size(), false);
  size_t logical = 0, wrong = 0, guard_hit = 0;
  for (const auto& [at, bytes] : spans) {
    for (size_t i = 0; i < bytes; ++i) {
      wrong += pages[at + i] != data[logical + i];
      covered[at + i] = true;
    }
    logical += bytes;
  }
  for (size_t i = 0; i < pages.size(); ++i) guard_hit += !covered[i] && pages[i] != 0xEE;
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(guard_hit, 0u) << "bytes outside the segments were written";
}

TEST_F(ObjectPagesGpuTest, RoundTripOddSegmentsAndAlignments) {
  RoundTrip(40, 70001, 1, /*src_offset=*/5, /*dst_offset=*/11);
  RoundTrip(40, 70001, 2, 0, 0);
  RoundTrip(7, 3, 3, 1, 2);  // tiny pieces: byte heads and tails only
}

TEST_F(ObjectPagesGpuTest, RoundTripMoreSegmentsThanOneLaunch) {
  RoundTrip(300, 5000, 4, 16, 0);  // 128 per launch: three launches
}

TEST_F(ObjectPagesGpuTest, RoundTripAlignedPages) {
  // The object store's case: whole 2 MiB pages and a partial last one.
  constexpr size_t kPage = 2 << 20;
  DeviceBuffer pages(4 * kPage), src(3 * kPage + 12345), dst(3 * kPage + 12345);
  ASSERT_TRUE(pages.ok() && src.ok() && dst.ok());
  const std::vector<std::uint8_t> data = testing::Pattern(9, src.size());
  CUDA_ASSERT(cudaMemcpy(src.get(), data.data(), data.size(), cudaMemcpyHostToDevice));
  // Pages out of order: 2, 0, 3, 1 (partial).
  std::vector<Segment> segs = {{pages.bytes_at(2 * kPage), kPage},
                               {pages.bytes_at(0), kPage},
                               {pages.bytes_at(3 * kPage), kPage},
                               {pages.bytes_at(1 * kPage), 12345}};
  ASSERT_OK(StorePages(src.get(), segs.data(), segs.size(), nullptr));
  ASSERT_OK(LoadPages(dst.get(), segs.data(), segs.size(), nullptr));
  std::vector<std::uint8_t> back(data.size());
  CUDA_ASSERT(cudaMemcpy(back.data(), dst.get(), back.size(), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(back == data);
}

ObjectHeader WritingHeader(std::uint32_t epoch) {
  ObjectHeader h{};
  h.key_hash = 0x1234;
  h.state = static_cast<std::uint32_t>(ObjectState::kWriting);
  h.epoch = epoch;
  return h;
}

TEST_F(ObjectPagesGpuTest, CommitReadyTransitions) {
  DeviceBuffer hdr(sizeof(ObjectHeader)), result(2 * sizeof(std::uint32_t)), state(sizeof(std::uint32_t));
  ASSERT_TRUE(hdr.ok() && result.ok() && state.ok());
  auto* h = hdr.as<ObjectHeader>();
  auto commit = [&](std::uint32_t epoch, std::uint32_t* code, std::uint32_t* seen) {
    ASSERT_OK(CommitReady(h, epoch, result.as<std::uint32_t>(), nullptr));
    std::uint32_t r[2];
    CUDA_ASSERT(cudaMemcpy(r, result.get(), sizeof r, cudaMemcpyDeviceToHost));
    *code = r[0];
    *seen = r[1];
  };
  auto read_state = [&]() {
    std::uint32_t s = 99;
    EXPECT_OK(ReadState(h, state.as<std::uint32_t>(), nullptr));
    EXPECT_EQ(cudaMemcpy(&s, state.get(), sizeof s, cudaMemcpyDeviceToHost), cudaSuccess);
    return s;
  };
  const ObjectHeader init = WritingHeader(7);
  CUDA_ASSERT(cudaMemcpy(h, &init, sizeof init, cudaMemcpyHostToDevice));
  std::uint32_t code = 99, seen = 99;

  commit(8, &code, &seen);  // a stale plan's epoch: refused, nothing stored
  EXPECT_EQ(code, static_cast<std::uint32_t>(CommitCode::kWrongEpoch));
  EXPECT_EQ(seen, static_cast<std::uint32_t>(ObjectState::kWriting));
  EXPECT_EQ(read_state(), static_cast<std::uint32_t>(ObjectState::kWriting));

  commit(7, &code, &seen);
  EXPECT_EQ(code, static_cast<std::uint32_t>(CommitCode::kCommitted));
  EXPECT_EQ(read_state(), static_cast<std::uint32_t>(ObjectState::kReady));

  commit(7, &code, &seen);  // twice
  EXPECT_EQ(code, static_cast<std::uint32_t>(CommitCode::kWrongState));
  EXPECT_EQ(seen, static_cast<std::uint32_t>(ObjectState::kReady));

  ObjectHeader dead = init;  // reclaimed after a timeout: a late commit must not revive it
  dead.state = static_cast<std::uint32_t>(ObjectState::kDead);
  CUDA_ASSERT(cudaMemcpy(h, &dead, sizeof dead, cudaMemcpyHostToDevice));
  commit(7, &code, &seen);
  EXPECT_EQ(code, static_cast<std::uint32_t>(CommitCode::kWrongState));
  EXPECT_EQ(seen, static_cast<std::uint32_t>(ObjectState::kDead));
  EXPECT_EQ(read_state(), static_cast<std::uint32_t>(ObjectState::kDead));

  ObjectHeader back{};  // the other fields are untouched
  CUDA_ASSERT(cudaMemcpy(&back, h, sizeof back, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back.key_hash, 0x1234u);
  EXPECT_EQ(back.epoch, 7u);
  ASSERT_OK(CommitReady(h, 7, nullptr, nullptr));  // result is optional
  CUDA_ASSERT(cudaDeviceSynchronize());
}

// kv_begin_write (issue 15: the producer writes the header, kvd none):
// {any state, an older epoch} -> {WRITING, epoch} and the fields; a newer
// epoch in the slot (a writer stalled past write_timeout) is refused and
// nothing is written; serial order holds across the 32-bit wrap.
TEST_F(ObjectPagesGpuTest, BeginWriteTransitions) {
  DeviceBuffer hdr(sizeof(ObjectHeader)), result(2 * sizeof(std::uint32_t));
  ASSERT_TRUE(hdr.ok() && result.ok());
  auto* h = hdr.as<ObjectHeader>();
  CUDA_ASSERT(cudaMemset(h, 0, sizeof(ObjectHeader)));  // a fresh arena slot
  auto begin = [&](std::uint32_t epoch, std::uint64_t key_hash) {
    ObjectHeader writing = WritingHeader(epoch);
    writing.key_hash = key_hash;
    writing.bytes_total = 1000 + epoch;
    EXPECT_OK(BeginWrite(h, writing, result.as<std::uint32_t>(), nullptr));
    std::uint32_t r[2] = {99, 99};
    EXPECT_EQ(cudaMemcpy(r, result.get(), sizeof r, cudaMemcpyDeviceToHost), cudaSuccess);
    return std::make_pair(r[0], r[1]);
  };
  auto header = [&] {
    ObjectHeader back{};
    EXPECT_EQ(cudaMemcpy(&back, h, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    return back;
  };
  const auto kOk = static_cast<std::uint32_t>(CommitCode::kCommitted);
  const auto kStale = static_cast<std::uint32_t>(CommitCode::kWrongEpoch);
  EXPECT_EQ(begin(5, 0xA).first, kOk);
  EXPECT_EQ(header().state, static_cast<std::uint32_t>(ObjectState::kWriting));
  EXPECT_EQ(header().epoch, 5u);
  EXPECT_EQ(header().key_hash, 0xAu);
  EXPECT_EQ(header().bytes_total, 1005u);
  EXPECT_EQ(begin(5, 0xA).first, kOk);  // begun already (libkv's copy, then the kernel)
  ASSERT_OK(CommitReady(h, 5, nullptr, nullptr));
  EXPECT_EQ(begin(5, 0xA).first, kStale) << "READY at its own epoch is not begun again";
  EXPECT_EQ(header().state, static_cast<std::uint32_t>(ObjectState::kReady));

  EXPECT_EQ(begin(9, 0xB).first, kOk);  // the slot's next object replaces the READY one
  auto stalled = begin(5, 0xA);          // the old writer, late: refused, nothing written
  EXPECT_EQ(stalled.first, kStale);
  EXPECT_EQ(stalled.second, 9u);
  EXPECT_EQ(header().key_hash, 0xBu);
  EXPECT_EQ(header().epoch, 9u);
  std::uint32_t r[2];
  ASSERT_OK(CommitReady(h, 5, result.as<std::uint32_t>(), nullptr));
  CUDA_ASSERT(cudaMemcpy(r, result.get(), sizeof r, cudaMemcpyDeviceToHost));
  EXPECT_EQ(r[0], kStale) << "its commit cannot publish the next object";
  EXPECT_EQ(header().state, static_cast<std::uint32_t>(ObjectState::kWriting));

  ObjectHeader old = WritingHeader(0xFFFFFFF0u);  // across the wrap
  old.state = static_cast<std::uint32_t>(ObjectState::kReady);
  CUDA_ASSERT(cudaMemcpy(h, &old, sizeof old, cudaMemcpyHostToDevice));
  EXPECT_EQ(begin(0x10, 0xC).first, kOk);
  EXPECT_EQ(header().epoch, 0x10u);
}

// kv_put_object, the one-launch put: a fresh slot begins, the bytes land and
// READY is published at the epoch; a slot a newer epoch holds (a writer
// stalled past write_timeout) gets no byte and no READY; an empty object
// still publishes; over 128 segments it takes three launches, same result;
// a count left by the slot's previous object does not publish early.
TEST_F(ObjectPagesGpuTest, PutObjectBeginsStoresAndPublishes) {
  constexpr size_t kPage = 2 << 20;
  DeviceBuffer pages(3 * kPage), src(2 * kPage + 777), hdr(sizeof(ObjectHeader)), result(8);
  ASSERT_TRUE(pages.ok() && src.ok() && hdr.ok() && result.ok());
  auto* h = hdr.as<ObjectHeader>();
  const std::vector<std::uint8_t> data = testing::Pattern(21, src.size());
  CUDA_ASSERT(cudaMemcpy(src.get(), data.data(), data.size(), cudaMemcpyHostToDevice));
  std::vector<Segment> segs = {{pages.bytes_at(2 * kPage), kPage}, {pages.bytes_at(0), kPage},
                               {pages.bytes_at(kPage), 777}};
  auto put = [&](std::uint32_t epoch, const std::vector<Segment>& pieces) -> std::pair<std::uint32_t, std::uint32_t> {
    ObjectHeader writing = WritingHeader(epoch);
    writing.bytes_total = src.size();
    EXPECT_EQ(cudaMemset(result.get(), 0xFF, result.size()), cudaSuccess);
    EXPECT_OK(PutObject(src.get(), pieces.data(), pieces.size(), h, writing, result.as<std::uint32_t>(), nullptr));
    std::uint32_t r[2] = {99, 99};
    EXPECT_EQ(cudaMemcpy(r, result.get(), sizeof r, cudaMemcpyDeviceToHost), cudaSuccess);
    return std::make_pair(r[0], r[1]);
  };
  auto header = [&] {
    ObjectHeader back{};
    EXPECT_EQ(cudaMemcpy(&back, h, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    return back;
  };
  auto stored = [&] {
    std::vector<std::uint8_t> back(src.size());
    size_t at = 0;
    for (const Segment& s : segs) {
      EXPECT_EQ(cudaMemcpy(back.data() + at, s.ptr, s.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      at += s.bytes;
    }
    return back == data;
  };
  const auto kOk = static_cast<std::uint32_t>(CommitCode::kCommitted);
  const auto kStale = static_cast<std::uint32_t>(CommitCode::kWrongEpoch);
  const auto kReady = static_cast<std::uint32_t>(ObjectState::kReady);

  CUDA_ASSERT(cudaMemset(h, 0, sizeof(ObjectHeader)));
  CUDA_ASSERT(cudaMemset(pages.get(), 0, pages.size()));
  EXPECT_EQ(put(7, segs), std::make_pair(kOk, kReady));
  EXPECT_EQ(header().state, kReady);
  EXPECT_EQ(header().epoch, 7u);
  EXPECT_EQ(header().bytes_total, src.size());
  EXPECT_TRUE(stored());

  // The slot's next object (epoch 9) began; the epoch-7 writer, late, stores nothing.
  ObjectHeader next = WritingHeader(9);
  CUDA_ASSERT(cudaMemcpy(h, &next, sizeof next, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemset(pages.get(), 0, pages.size()));
  auto stalled = put(7, segs);
  EXPECT_EQ(stalled.first, kStale);
  EXPECT_EQ(header().state, static_cast<std::uint32_t>(ObjectState::kWriting));
  EXPECT_EQ(header().epoch, 9u);
  std::vector<std::uint8_t> first(kPage);
  CUDA_ASSERT(cudaMemcpy(first.data(), pages.bytes_at(2 * kPage), kPage, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(first.begin(), first.end(), [](std::uint8_t b) { return b == 0; }))
      << "a refused put wrote payload";

  // A count the slot's previous write (epoch 11) left half done restarts at
  // the begin of epoch 12: the put publishes only when all of its own blocks are done.
  ObjectHeader counted = WritingHeader(11);
  counted.store_blocks = (std::uint64_t{11} << 32) | 5;
  CUDA_ASSERT(cudaMemcpy(h, &counted, sizeof counted, cudaMemcpyHostToDevice));
  EXPECT_EQ(put(12, segs), std::make_pair(kOk, kReady));
  EXPECT_TRUE(stored());

  EXPECT_EQ(put(13, {}), std::make_pair(kOk, kReady)) << "an empty object";

  // 300 small pieces: over one launch's parameters, three launches.
  std::vector<Segment> many;
  for (size_t i = 0; i < 300; ++i) many.push_back({pages.bytes_at(i * 100), 100});
  EXPECT_EQ(put(14, many), std::make_pair(kOk, kReady));
  std::vector<std::uint8_t> back(30000);
  CUDA_ASSERT(cudaMemcpy(back.data(), pages.get(), back.size(), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin()));
}

// One stream stores + commits many objects while a reader kernel on another
// stream spins on each READY with acquire and checks all bytes behind it;
// StorePagesAndCommit (after a WRITING header) and PutObject (on fresh slots) alike.
class ReaderStress : public ObjectPagesGpuTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ReaderStress, ReaderNeverSeesReadyBeforeTheBytes) {
  const bool put_object = GetParam();
  constexpr int kObjects = 512;
  constexpr std::uint64_t kSeedBase = 77;
  std::mt19937_64 rng(11);
  // Objects of 1 B .. 1 MiB in 1-4 segments each, carved from one arena.
  std::vector<std::uint64_t> sizes(kObjects);
  std::vector<int> first_seg = {0};
  std::vector<std::uint64_t> seg_off, seg_bytes;
  std::uint64_t arena_bytes = 0, max_object = 0;
  for (int o = 0; o < kObjects; ++o) {
    sizes[o] = 1 + rng() % (o % 8 == 0 ? (1 << 20) : (64 << 10));
    max_object = std::max(max_object, sizes[o]);
    const int pieces = 1 + static_cast<int>(rng() % 4);
    std::uint64_t left = sizes[o];
    for (int p = 0; p < pieces && left > 0; ++p) {
      const std::uint64_t b = p + 1 == pieces ? left : 1 + rng() % left;
      arena_bytes += rng() % 32;  // misalign the next piece
      seg_off.push_back(arena_bytes);
      seg_bytes.push_back(b);
      arena_bytes += b;
      left -= b;
    }
    first_seg.push_back(static_cast<int>(seg_off.size()));
  }
  DeviceBuffer arena(arena_bytes), headers(kObjects * sizeof(ObjectHeader)), src(max_object),
      d_seg_ptr(seg_off.size() * sizeof(char*)), d_seg_bytes(seg_off.size() * 8),
      d_first(first_seg.size() * sizeof(int)), counts(sizeof(testing::ReaderCounts)),
      results(kObjects * 2 * sizeof(std::uint32_t));
  ASSERT_TRUE(arena.ok() && headers.ok() && src.ok() && d_seg_ptr.ok() && d_seg_bytes.ok() &&
              d_first.ok() && counts.ok() && results.ok());
  std::vector<char*> seg_ptr(seg_off.size());
  for (size_t g = 0; g < seg_off.size(); ++g) seg_ptr[g] = arena.bytes_at(seg_off[g]);
  std::vector<ObjectHeader> hdrs(kObjects);
  // kv_put_object begins fresh slots itself; the other is given WRITING ones.
  for (int o = 0; o < kObjects; ++o) hdrs[o] = put_object ? ObjectHeader{} : WritingHeader(1000 + o);
  CUDA_ASSERT(cudaMemset(arena.get(), 0, arena.size()));
  CUDA_ASSERT(cudaMemset(counts.get(), 0, counts.size()));
  CUDA_ASSERT(cudaMemset(results.get(), 0xFF, results.size()));
  CUDA_ASSERT(cudaMemcpy(headers.get(), hdrs.data(), headers.size(), cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_seg_ptr.get(), seg_ptr.data(), d_seg_ptr.size(), cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_seg_bytes.get(), seg_bytes.data(), d_seg_bytes.size(), cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(d_first.get(), first_seg.data(), d_first.size(), cudaMemcpyHostToDevice));
  // Every object's bytes, staged on the device before the race starts.
  std::vector<std::vector<std::uint8_t>> data(kObjects);
  for (int o = 0; o < kObjects; ++o) data[o] = testing::Pattern(kSeedBase + o, sizes[o]);
  std::vector<std::unique_ptr<DeviceBuffer>> staged;
  for (int o = 0; o < kObjects; ++o) {
    staged.push_back(std::make_unique<DeviceBuffer>(sizes[o]));
    ASSERT_TRUE(staged.back()->ok());
    CUDA_ASSERT(cudaMemcpy(staged.back()->get(), data[o].data(), sizes[o], cudaMemcpyHostToDevice));
  }
  CUDA_ASSERT(cudaDeviceSynchronize());

  cudaStream_t writer, reader;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking));
  CUDA_ASSERT(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking));
  // Few reader blocks, so the writer's kernels find free SMs beside them.
  ASSERT_EQ(testing::LaunchReadyReader(headers.as<ObjectHeader>(), d_seg_ptr.as<const char* const>(),
                                       d_seg_bytes.as<std::uint64_t>(), d_first.as<int>(), kObjects,
                                       kSeedBase, counts.as<testing::ReaderCounts>(), 16, reader),
            0);
  for (int o = 0; o < kObjects; ++o) {
    std::vector<Segment> segs;
    for (int g = first_seg[o]; g < first_seg[o + 1]; ++g) segs.push_back({seg_ptr[g], seg_bytes[g]});
    if (put_object) {
      ASSERT_OK(PutObject(staged[o]->get(), segs.data(), segs.size(), headers.as<ObjectHeader>() + o,
                          WritingHeader(1000 + o), results.as<std::uint32_t>() + 2 * o, writer));
    } else {
      ASSERT_OK(StorePagesAndCommit(staged[o]->get(), segs.data(), segs.size(), headers.as<ObjectHeader>() + o,
                                    1000 + o, results.as<std::uint32_t>() + 2 * o, writer));
    }
  }
  CUDA_ASSERT(cudaStreamSynchronize(writer));
  CUDA_ASSERT(cudaStreamSynchronize(reader));

  testing::ReaderCounts c{};
  CUDA_ASSERT(cudaMemcpy(&c, counts.get(), sizeof c, cudaMemcpyDeviceToHost));
  std::vector<std::uint32_t> res(kObjects * 2);
  CUDA_ASSERT(cudaMemcpy(res.data(), results.get(), results.size(), cudaMemcpyDeviceToHost));
  for (int o = 0; o < kObjects; ++o) {
    EXPECT_EQ(res[2 * o], static_cast<std::uint32_t>(CommitCode::kCommitted)) << "object " << o;
  }
  EXPECT_EQ(c.violations, 0u);
  EXPECT_EQ(c.timeouts, 0u);
  EXPECT_EQ(c.objects_seen, static_cast<unsigned long long>(kObjects));
  cudaStreamDestroy(writer);
  cudaStreamDestroy(reader);
}

INSTANTIATE_TEST_SUITE_P(BothPuts, ReaderStress, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "PutObject" : "StorePagesAndCommit");
                         });

}  // namespace
}  // namespace nanokv::kernels
