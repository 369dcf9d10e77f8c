// Paged K/V append on the GPU against a host reference of the same layout
// math: fp16/bf16 byte-exact in both layouts (16-byte and 2-byte paths), FP8
// E4M3 within the documented bound (and equal to the host's quantization).
// Random slot mappings with skipped (-1) and out-of-range slots; the whole
// cache is compared, so a write to a wrong place fails too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/fp8_e4m3.h"
#include "kernels/kv_kernels.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kernels {
namespace {

using testing::DeviceBuffer;

struct Shape {
  std::int64_t blocks, heads, block_size, head_dim, tokens, stride_pad;
};

// A slot per token: distinct valid slots, about 1 in 8 skipped (-1) and, when
// `with_bad`, a few past the last block (counted, never written).
std::vector<std::int64_t> RandomSlots(const Shape& s, std::mt19937_64& rng, bool with_bad,
                                      int* bad_count) {
  std::vector<std::int64_t> all(static_cast<size_t>(s.blocks * s.block_size));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::int64_t> slots(static_cast<size_t>(s.tokens));
  *bad_count = 0;
  for (size_t t = 0; t < slots.size(); ++t) {
    const unsigned r = static_cast<unsigned>(rng() % 16);
    if (r < 2) {
      slots[t] = -1;
    } else if (with_bad && r == 2) {
      slots[t] = s.blocks * s.block_size + static_cast<std::int64_t>(rng() % 100);
      ++*bad_count;
    } else {
      slots[t] = all[t];
    }
  }
  return slots;
}

PagedLayout MakeLayout(const Shape& s, bool head_major) {
  return head_major ? PagedLayout::HeadMajor(s.blocks, s.heads, s.block_size, s.head_dim)
                    : PagedLayout::BlockMajor(s.blocks, s.heads, s.block_size, s.head_dim);
}

std::int64_t CacheIndex(const PagedLayout& l, std::int64_t slot, std::int64_t h, std::int64_t d) {
  return (slot / l.block_size) * l.block_stride + h * l.head_stride +
         (slot % l.block_size) * l.head_dim + d;
}

// A random finite fp16 or bf16 value as bits, magnitudes over many binades.
std::uint16_t RandomFinite16(std::mt19937_64& rng, KvDType dtype) {
  for (;;) {
    auto bits = static_cast<std::uint16_t>(rng());
    if (dtype == KvDType::kFloat16) {
      if (((bits >> 10) & 0x1F) != 0x1F) return bits;
    } else {
      // bf16: keep exponents near 1 so the entry's range stays inside float
      const int e = (bits >> 7) & 0xFF;
      if (e >= 100 && e <= 150) return bits;
    }
  }
}

float ToFloat(std::uint16_t x, KvDType dtype) {
  return dtype == KvDType::kBFloat16 ? fp8::Bf16ToFloat(x) : fp8::HalfToFloat(x);
}

class PagedAppendGpuTest : public ::testing::TestWithParam<std::tuple<KvDType, bool, int>> {
 protected:
  void SetUp() override { NANOKV_SKIP_WITHOUT_GPU(); }

  // head_dim 128 and a token stride multiple of 8: the 16-byte path; head_dim
  // 36 or a padded stride of 3: the 2-byte path.
  Shape ShapeFor(int variant) const {
    switch (variant) {
      case 0: return {64, 8, 16, 128, 700, 0};
      case 1: return {37, 4, 16, 36, 400, 0};
      default: return {50, 6, 8, 64, 300, 3};
    }
  }
};

TEST_P(PagedAppendGpuTest, ByteExact16Bit) {
  const auto [dtype, head_major, variant] = GetParam();
  const Shape s = ShapeFor(variant);
  const PagedLayout l = MakeLayout(s, head_major);
  std::mt19937_64 rng(1000 + variant * 10 + (head_major ? 1 : 0));
  int bad = 0;
  const std::vector<std::int64_t> slots = RandomSlots(s, rng, /*with_bad=*/true, &bad);
  const std::int64_t row = s.heads * s.head_dim + s.stride_pad;
  std::vector<std::uint16_t> key(static_cast<size_t>(s.tokens * row)), value(key.size());
  for (auto& x : key) x = static_cast<std::uint16_t>(rng());
  for (auto& x : value) x = static_cast<std::uint16_t>(rng());
  const size_t cache_elems = static_cast<size_t>(s.blocks * s.heads * s.block_size * s.head_dim);
  std::vector<std::uint16_t> kref(cache_elems), vref(cache_elems);
  for (auto& x : kref) x = static_cast<std::uint16_t>(rng());  // old contents must survive
  for (auto& x : vref) x = static_cast<std::uint16_t>(rng());

  DeviceBuffer dk(key.size() * 2), dv(value.size() * 2), ds(slots.size() * 8),
      dkc(cache_elems * 2), dvc(cache_elems * 2), dbad(sizeof(int));
  ASSERT_TRUE(dk.ok() && dv.ok() && ds.ok() && dkc.ok() && dvc.ok() && dbad.ok());
  CUDA_ASSERT(cudaMemcpy(dk.get(), key.data(), key.size() * 2, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(dv.get(), value.data(), value.size() * 2, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(ds.get(), slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(dkc.get(), kref.data(), cache_elems * 2, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(dvc.get(), vref.data(), cache_elems * 2, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemset(dbad.get(), 0, sizeof(int)));

  AppendInput in;
  in.key = dk.get();
  in.value = dv.get();
  in.key_token_stride = in.value_token_stride = row;
  in.slot_mapping = ds.as<std::int64_t>();
  in.num_tokens = s.tokens;
  in.dtype = dtype;
  ASSERT_OK(PagedAppend(in, l, dkc.get(), dvc.get(), nullptr, {dbad.as<int>()}));
  CUDA_ASSERT(cudaDeviceSynchronize());

  for (std::int64_t t = 0; t < s.tokens; ++t) {
    const std::int64_t slot = slots[static_cast<size_t>(t)];
    if (slot < 0 || slot >= s.blocks * s.block_size) continue;
    for (std::int64_t h = 0; h < s.heads; ++h) {
      for (std::int64_t d = 0; d < s.head_dim; ++d) {
        const auto at = static_cast<size_t>(CacheIndex(l, slot, h, d));
        const auto from = static_cast<size_t>(t * row + h * s.head_dim + d);
        kref[at] = key[from];
        vref[at] = value[from];
      }
    }
  }
  std::vector<std::uint16_t> kc(cache_elems), vc(cache_elems);
  CUDA_ASSERT(cudaMemcpy(kc.data(), dkc.get(), cache_elems * 2, cudaMemcpyDeviceToHost));
  CUDA_ASSERT(cudaMemcpy(vc.data(), dvc.get(), cache_elems * 2, cudaMemcpyDeviceToHost));
  int bad_seen = -1;
  CUDA_ASSERT(cudaMemcpy(&bad_seen, dbad.get(), sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad_seen, bad);
  size_t k_diff = 0, v_diff = 0;
  for (size_t i = 0; i < cache_elems; ++i) {
    k_diff += kc[i] != kref[i];
    v_diff += vc[i] != vref[i];
  }
  EXPECT_EQ(k_diff, 0u);
  EXPECT_EQ(v_diff, 0u);
}

TEST_P(PagedAppendGpuTest, Fp8WithinTheDocumentedBound) {
  const auto [dtype, head_major, variant] = GetParam();
  const Shape s = ShapeFor(variant);
  const PagedLayout l = MakeLayout(s, head_major);
  std::mt19937_64 rng(2000 + variant * 10 + (head_major ? 1 : 0));
  int bad = 0;
  const std::vector<std::int64_t> slots = RandomSlots(s, rng, /*with_bad=*/true, &bad);
  const std::int64_t row = s.heads * s.head_dim + s.stride_pad;
  std::vector<std::uint16_t> key(static_cast<size_t>(s.tokens * row)), value(key.size());
  for (auto& x : key) x = RandomFinite16(rng, dtype);
  for (auto& x : value) x = RandomFinite16(rng, dtype);
  // Token 1's entries are all zero: scale 1, codes 0.
  std::fill(key.begin() + row, key.begin() + 2 * row, 0);
  const size_t cache_elems = static_cast<size_t>(s.blocks * s.heads * s.block_size * s.head_dim);
  const size_t scale_elems = static_cast<size_t>(s.blocks * s.heads * s.block_size);

  DeviceBuffer dk(key.size() * 2), dv(value.size() * 2), ds(slots.size() * 8), dkc(cache_elems),
      dvc(cache_elems), dks(scale_elems * 4), dvs(scale_elems * 4);
  ASSERT_TRUE(dk.ok() && dv.ok() && ds.ok() && dkc.ok() && dvc.ok() && dks.ok() && dvs.ok());
  CUDA_ASSERT(cudaMemcpy(dk.get(), key.data(), key.size() * 2, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(dv.get(), value.data(), value.size() * 2, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemcpy(ds.get(), slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  CUDA_ASSERT(cudaMemset(dkc.get(), 0x5A, cache_elems));
  CUDA_ASSERT(cudaMemset(dvc.get(), 0x5A, cache_elems));
  CUDA_ASSERT(cudaMemset(dks.get(), 0, scale_elems * 4));
  CUDA_ASSERT(cudaMemset(dvs.get(), 0, scale_elems * 4));

  AppendInput in;
  in.key = dk.get();
  in.value = dv.get();
  in.key_token_stride = in.value_token_stride = row;
  in.slot_mapping = ds.as<std::int64_t>();
  in.num_tokens = s.tokens;
  in.dtype = dtype;
  ASSERT_OK(PagedAppendFp8(in, l, dkc.as<std::uint8_t>(), dvc.as<std::uint8_t>(), dks.as<float>(),
                           dvs.as<float>(), nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());

  std::vector<std::uint8_t> kc(cache_elems), vc(cache_elems);
  std::vector<float> ks(scale_elems), vs(scale_elems);
  CUDA_ASSERT(cudaMemcpy(kc.data(), dkc.get(), cache_elems, cudaMemcpyDeviceToHost));
  CUDA_ASSERT(cudaMemcpy(vc.data(), dvc.get(), cache_elems, cudaMemcpyDeviceToHost));
  CUDA_ASSERT(cudaMemcpy(ks.data(), dks.get(), scale_elems * 4, cudaMemcpyDeviceToHost));
  CUDA_ASSERT(cudaMemcpy(vs.data(), dvs.get(), scale_elems * 4, cudaMemcpyDeviceToHost));

  std::vector<bool> written(cache_elems, false);
  size_t over_bound = 0, code_mismatch = 0, checked = 0;
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    const std::int64_t slot = slots[static_cast<size_t>(t)];
    if (slot < 0 || slot >= s.blocks * s.block_size) continue;
    for (int kv = 0; kv < 2; ++kv) {
      const auto& src = kv == 0 ? key : value;
      const auto& cache = kv == 0 ? kc : vc;
      const auto& scales = kv == 0 ? ks : vs;
      for (std::int64_t h = 0; h < s.heads; ++h) {
        const std::uint16_t* x = &src[static_cast<size_t>(t * row + h * s.head_dim)];
        float amax = 0;
        for (std::int64_t d = 0; d < s.head_dim; ++d) amax = std::fmax(amax, std::fabs(ToFloat(x[d], dtype)));
        const float want_scale = amax > 0 ? amax / fp8::kE4M3Max : 1.0f;
        const auto si = static_cast<size_t>(CacheIndex(l, slot, h, 0) / s.head_dim);
        ASSERT_EQ(scales[si], want_scale) << "token " << t << " head " << h;
        for (std::int64_t d = 0; d < s.head_dim; ++d) {
          const auto at = static_cast<size_t>(CacheIndex(l, slot, h, d));
          written[at] = true;
          const float xf = ToFloat(x[d], dtype);
          const float deq = fp8::DecodeE4M3(cache[at]) * scales[si];
          const double bound = std::fmax(std::fabs(xf) / 16.0, amax / 458752.0) * (1 + 1e-5);
          over_bound += std::fabs(static_cast<double>(xf) - deq) > bound;
          code_mismatch += cache[at] != fp8::EncodeE4M3(xf / want_scale);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 0u);
  EXPECT_EQ(over_bound, 0u) << "of " << checked;
  EXPECT_EQ(code_mismatch, 0u) << "device and host quantization differ";
  size_t stray = 0;  // bytes no token owns must keep the fill
  for (size_t i = 0; i < cache_elems; ++i) {
    if (!written[i]) stray += (kc[i] != 0x5A) + (vc[i] != 0x5A);
  }
  EXPECT_EQ(stray, 0u);
}

std::string Name(const ::testing::TestParamInfo<std::tuple<KvDType, bool, int>>& info) {
  return std::string(std::get<0>(info.param) == KvDType::kFloat16 ? "fp16" : "bf16") +
         (std::get<1>(info.param) ? "_head_major" : "_block_major") +
         (std::get<2>(info.param) == 0 ? "_vec16" : std::get<2>(info.param) == 1 ? "_dim36" : "_padded");
}

INSTANTIATE_TEST_SUITE_P(All, PagedAppendGpuTest,
                         ::testing::Combine(::testing::Values(KvDType::kFloat16, KvDType::kBFloat16),
                                            ::testing::Bool(), ::testing::Values(0, 1, 2)),
                         Name);

}  // namespace
}  // namespace nanokv::kernels
