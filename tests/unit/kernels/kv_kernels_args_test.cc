// The launchers of kernels/kv_kernels.h refuse malformed arguments with
// kInvalidArgument before touching the GPU, so these run on any machine (CI
// has nvcc but no GPU). The kernels themselves are tested in tests/gpu/.
#include "kernels/kv_kernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/util/status_matchers.h"

namespace nanokv::kernels {
namespace {

// Never dereferenced: every call below fails its checks first.
void* Fake(std::uintptr_t v) { return reinterpret_cast<void*>(v); }

AppendInput ValidInput() {
  AppendInput in;
  in.key = Fake(0x1000);
  in.value = Fake(0x2000);
  in.key_token_stride = 8 * 128;
  in.value_token_stride = 8 * 128;
  in.slot_mapping = static_cast<const std::int64_t*>(Fake(0x3000));
  in.num_tokens = 4;
  return in;
}

TEST(KvKernelsArgs, LayoutsHaveTheDocumentedStrides) {
  PagedLayout b = PagedLayout::BlockMajor(10, 8, 16, 128);
  EXPECT_EQ(b.block_stride, 8 * 16 * 128);
  EXPECT_EQ(b.head_stride, 16 * 128);
  PagedLayout h = PagedLayout::HeadMajor(10, 8, 16, 128);
  EXPECT_EQ(h.block_stride, 16 * 128);
  EXPECT_EQ(h.head_stride, 10 * 16 * 128);
}

TEST(KvKernelsArgs, PagedAppendRefusesBadShapes) {
  const PagedLayout l = PagedLayout::BlockMajor(10, 8, 16, 128);
  AppendInput in = ValidInput();
  in.key_token_stride = 8 * 128 - 1;  // rows overlap
  EXPECT_EQ(PagedAppend(in, l, Fake(0x4000), Fake(0x5000), nullptr).code(), Code::kInvalidArgument);
  in = ValidInput();
  in.num_tokens = -1;
  EXPECT_EQ(PagedAppend(in, l, Fake(0x4000), Fake(0x5000), nullptr).code(), Code::kInvalidArgument);
  in = ValidInput();
  in.slot_mapping = nullptr;
  EXPECT_EQ(PagedAppend(in, l, Fake(0x4000), Fake(0x5000), nullptr).code(), Code::kInvalidArgument);
  in = ValidInput();
  EXPECT_EQ(PagedAppend(in, l, nullptr, Fake(0x5000), nullptr).code(), Code::kInvalidArgument);
  in.dtype = static_cast<KvDType>(7);
  EXPECT_EQ(PagedAppend(in, l, Fake(0x4000), Fake(0x5000), nullptr).code(), Code::kInvalidArgument);
  PagedLayout bad = l;
  bad.block_size = 0;
  EXPECT_EQ(PagedAppend(ValidInput(), bad, Fake(0x4000), Fake(0x5000), nullptr).code(),
            Code::kInvalidArgument);
  bad = l;
  bad.head_stride = -1;
  EXPECT_EQ(PagedAppend(ValidInput(), bad, Fake(0x4000), Fake(0x5000), nullptr).code(),
            Code::kInvalidArgument);
}

TEST(KvKernelsArgs, ZeroTokensIsANoOp) {
  AppendInput in;  // every pointer null: nothing to do, nothing checked against them
  in.key_token_stride = in.value_token_stride = 8 * 128;
  EXPECT_OK(PagedAppend(in, PagedLayout::HeadMajor(4, 8, 16, 128), nullptr, nullptr, nullptr));
}

TEST(KvKernelsArgs, Fp8NeedsScalesAndStridesInWholeHeads) {
  const PagedLayout l = PagedLayout::BlockMajor(10, 8, 16, 128);
  auto* kc = static_cast<std::uint8_t*>(Fake(0x4000));
  auto* vc = static_cast<std::uint8_t*>(Fake(0x5000));
  auto* s = static_cast<float*>(Fake(0x6000));
  EXPECT_EQ(PagedAppendFp8(ValidInput(), l, kc, vc, nullptr, s, nullptr).code(),
            Code::kInvalidArgument);
  PagedLayout odd = l;
  odd.head_stride += 1;  // the scale array's stride would not be whole
  EXPECT_EQ(PagedAppendFp8(ValidInput(), odd, kc, vc, s, s, nullptr).code(), Code::kInvalidArgument);
}

TEST(KvKernelsArgs, SegmentsNeedPointersForTheirBytes) {
  std::vector<Segment> segs = {{Fake(0x1000), 100}, {nullptr, 5}};
  Status st = StorePages(Fake(0x9000), segs.data(), segs.size(), nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.ToString().find("segment 1"), std::string::npos) << st.ToString();
  segs[1] = {nullptr, 0};  // an empty segment may have no pointer
  segs[0].bytes = 64;
  EXPECT_EQ(LoadPages(nullptr, segs.data(), segs.size(), nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(StorePages(Fake(0x9000), nullptr, 3, nullptr).code(), Code::kInvalidArgument);
  segs = {{Fake(0x1000), UINT64_MAX}, {Fake(0x2000), 2}};
  EXPECT_EQ(StorePages(Fake(0x9000), segs.data(), segs.size(), nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_OK(StorePages(nullptr, nullptr, 0, nullptr));  // nothing to copy
}

TEST(KvKernelsArgs, HeaderCallsNeedAHeader) {
  std::uint32_t* out = static_cast<std::uint32_t*>(Fake(0x7000));
  EXPECT_EQ(CommitReady(nullptr, 1, out, nullptr).code(), Code::kInvalidArgument);
  ObjectHeader writing{};
  writing.epoch = 3;
  EXPECT_EQ(BeginWrite(nullptr, writing, out, nullptr).code(), Code::kInvalidArgument);
  writing.epoch = 0;  // names no object
  EXPECT_EQ(BeginWrite(static_cast<ObjectHeader*>(Fake(0x8000)), writing, out, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ReadState(nullptr, out, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(ReadState(static_cast<const ObjectHeader*>(Fake(0x8000)), nullptr, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(StorePagesAndCommit(nullptr, nullptr, 0, nullptr, 1, out, nullptr).code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace nanokv::kernels
