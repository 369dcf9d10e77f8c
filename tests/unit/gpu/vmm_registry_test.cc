// VmmRegistry on its own: the coverage questions every backend asks (whole
// mappings, holes, parts of a mapping) with made-up addresses, since the
// registry only records and never touches memory. CheckInvariants() runs
// after every change.
#include "gpu/vmm_registry.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace nanokv::gpu {
namespace {

// A Status as gtest sees it: on failure, what went wrong.
::testing::AssertionResult IsOk(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.ToString();
}

constexpr size_t kGran = size_t{2} << 20;
constexpr uintptr_t kBase = uintptr_t{0x7f0000000000};  // a range of 8 granules
constexpr uint64_t kPage = 0x51;

class VmmRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { registry_.AddRange(kBase, {8 * kGran, kGran}); }
  void TearDown() override { EXPECT_TRUE(IsOk(registry_.CheckInvariants())); }

  // Maps granules [first, first+granules) of the range as one mapping.
  Status Map(size_t first, size_t granules, int device = 0) {
    return registry_.ClaimMapping({.address = At(first),
                                   .size = granules * kGran,
                                   .page = kPage + first,
                                   .device = device,
                                   .page_bytes = granules * kGran,
                                   .granularity = kGran});
  }
  static uintptr_t At(size_t granule) { return kBase + granule * kGran; }
  Code WholeCode(size_t first, size_t granules) {
    return registry_.WholeMappings("Unmap", At(first), granules * kGran).status().code();
  }

  VmmRegistry registry_;
};

TEST_F(VmmRegistryTest, RangesAnswerInsideAndAreTakenWhole) {
  EXPECT_TRUE(registry_.InsideRange(kBase, 8 * kGran));
  EXPECT_TRUE(registry_.InsideRange(At(7), kGran));
  EXPECT_FALSE(registry_.InsideRange(At(7), 2 * kGran)) << "runs past the end";
  EXPECT_FALSE(registry_.InsideRange(kBase - kGran, kGran));
  EXPECT_FALSE(registry_.InsideRange(At(8), 1));

  EXPECT_EQ(registry_.TakeRange(kBase, 4 * kGran).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(registry_.TakeRange(At(1), 7 * kGran).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(IsOk(Map(3, 1)));
  EXPECT_EQ(registry_.TakeRange(kBase, 8 * kGran).status().code(), Code::kFailedPrecondition);
  registry_.DropMapping(At(3));
  ASSERT_TRUE(IsOk(registry_.CheckInvariants()));
  auto range = registry_.TakeRange(kBase, 8 * kGran);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(range->granularity, kGran);
  EXPECT_FALSE(registry_.InsideRange(kBase, 1));
  registry_.AddRange(kBase, *range);  // as a backend does when the driver refuses
  EXPECT_TRUE(registry_.InsideRange(kBase, 8 * kGran));
}

TEST_F(VmmRegistryTest, ClaimRefusesWhatTheDriverWould) {
  VmmRegistry::MapRequest request{.address = At(0),
                                  .size = kGran,
                                  .page = kPage,
                                  .device = 0,
                                  .page_bytes = 2 * kGran,
                                  .granularity = kGran};
  EXPECT_EQ(registry_.ClaimMapping(request).code(), Code::kInvalidArgument) << "part of a page";
  request.page_bytes = kGran;
  request.address = At(0) + 4096;
  EXPECT_EQ(registry_.ClaimMapping(request).code(), Code::kInvalidArgument) << "unaligned";
  request.address = kBase - kGran;
  EXPECT_EQ(registry_.ClaimMapping(request).code(), Code::kInvalidArgument) << "outside";
  EXPECT_EQ(Map(7, 2).code(), Code::kInvalidArgument) << "runs past the range";
  EXPECT_TRUE(registry_.mappings().empty());

  ASSERT_TRUE(IsOk(Map(2, 2)));
  EXPECT_EQ(Map(2, 2).code(), Code::kFailedPrecondition) << "same place";
  EXPECT_EQ(Map(3, 1).code(), Code::kFailedPrecondition) << "inside it";
  EXPECT_EQ(Map(1, 2).code(), Code::kFailedPrecondition) << "over its start";
  EXPECT_TRUE(IsOk(Map(1, 1)));
  EXPECT_TRUE(IsOk(Map(4, 1)));
  ASSERT_TRUE(IsOk(registry_.CheckInvariants()));
  EXPECT_EQ(registry_.mappings().size(), 3u);
  EXPECT_EQ(registry_.mappings().at(At(2)).access, 0u) << "a new mapping has no access";
}

TEST_F(VmmRegistryTest, FindsTheMappingContainingAnAddress) {
  ASSERT_TRUE(IsOk(Map(2, 2, /*device=*/3)));
  EXPECT_EQ(registry_.FindMapping(At(1) + kGran - 1), nullptr);
  const VmmRegistry::Mapping* mapping = registry_.FindMapping(At(3) + 17);
  ASSERT_NE(mapping, nullptr);
  EXPECT_EQ(mapping->device, 3);
  EXPECT_EQ(mapping->page, kPage + 2);
  EXPECT_EQ(registry_.FindMapping(At(4) - 1), mapping);
  EXPECT_EQ(registry_.FindMapping(At(4)), nullptr);
}

TEST_F(VmmRegistryTest, WholeMappingsIsARunWithNoHole) {
  ASSERT_TRUE(IsOk(Map(0, 1)));
  ASSERT_TRUE(IsOk(Map(1, 2)));
  ASSERT_TRUE(IsOk(Map(4, 1)));  // granule 3 is a hole
  auto run = registry_.WholeMappings("SetAccess", At(0), 3 * kGran);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->size(), 2u);
  EXPECT_EQ((*run)[0]->page, kPage + 0);
  EXPECT_EQ((*run)[1]->page, kPage + 1);

  EXPECT_EQ(WholeCode(0, 5), Code::kInvalidArgument) << "over the hole";
  EXPECT_EQ(WholeCode(3, 1), Code::kInvalidArgument) << "the hole itself";
  EXPECT_EQ(WholeCode(5, 1), Code::kInvalidArgument) << "past the last mapping";
  EXPECT_EQ(registry_.WholeMappings("Unmap", kBase - kGran, kGran).status().code(),
            Code::kInvalidArgument)
      << "outside every range";
  EXPECT_EQ(registry_.WholeMappings("Unmap", At(0), kGran + 4096).status().code(),
            Code::kInvalidArgument)
      << "not a multiple of the range's granularity";
}

// The case CUDA refuses with CUDA_ERROR_INVALID_VALUE: part of one mapping.
TEST_F(VmmRegistryTest, PartOfAMappingIsRefused) {
  ASSERT_TRUE(IsOk(Map(2, 2)));
  EXPECT_EQ(WholeCode(2, 1), Code::kInvalidArgument) << "its first granule";
  EXPECT_EQ(WholeCode(3, 1), Code::kInvalidArgument) << "its second granule";
  EXPECT_EQ(WholeCode(1, 2), Code::kInvalidArgument) << "a hole, then its first granule";
  EXPECT_EQ(WholeCode(3, 2), Code::kInvalidArgument) << "its second granule, then a hole";
  auto refused = registry_.WholeMappings("SetAccess", At(2), kGran);
  EXPECT_NE(refused.status().message().find("SetAccess: "), std::string_view::npos)
      << "the message names the call: " << refused.status().ToString();
  auto whole = registry_.WholeMappings("SetAccess", At(2), 2 * kGran);
  EXPECT_TRUE(whole.ok()) << whole.status().ToString();
}

TEST_F(VmmRegistryTest, SetAccessReachesEveryMappingOfTheRun) {
  ASSERT_TRUE(IsOk(Map(0, 1)));
  ASSERT_TRUE(IsOk(Map(1, 1)));
  ASSERT_TRUE(IsOk(Map(2, 1)));
  registry_.SetAccess(At(0), 2 * kGran, 0b101);
  EXPECT_EQ(registry_.FindMapping(At(0))->access, 0b101u);
  EXPECT_EQ(registry_.FindMapping(At(1))->access, 0b101u);
  EXPECT_EQ(registry_.FindMapping(At(2))->access, 0u) << "outside the span";
}

TEST_F(VmmRegistryTest, TakenMappingsComeBackUnchanged) {
  ASSERT_TRUE(IsOk(Map(0, 1)));
  ASSERT_TRUE(IsOk(Map(1, 2)));
  registry_.SetAccess(At(0), 3 * kGran, 1);
  EXPECT_EQ(registry_.TakeMappings("Unmap", At(0), 2 * kGran).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(registry_.mappings().size(), 2u) << "a refused take takes nothing";
  auto taken = registry_.TakeMappings("Unmap", At(0), 3 * kGran);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  ASSERT_EQ(taken->size(), 2u);
  EXPECT_TRUE(registry_.mappings().empty());
  ASSERT_TRUE(IsOk(registry_.CheckInvariants()));
  registry_.RestoreMappings(*taken);  // the driver refused the unmap
  ASSERT_EQ(registry_.mappings().size(), 2u);
  EXPECT_EQ(registry_.FindMapping(At(2))->access, 1u);
}

TEST_F(VmmRegistryTest, CopySpansMustBeMappedWithAccess) {
  int host_byte = 0;
  auto outside = registry_.CheckSpan("Copy", &host_byte, sizeof(host_byte));
  ASSERT_TRUE(outside.ok());
  EXPECT_FALSE(outside->ours) << "memory outside our ranges is the caller's";

  auto span = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  ASSERT_TRUE(IsOk(Map(0, 1, /*device=*/1)));
  ASSERT_TRUE(IsOk(Map(1, 1, /*device=*/2)));
  EXPECT_EQ(registry_.CheckSpan("Copy", span(At(0)), 1).status().code(), Code::kPermissionDenied)
      << "mapped without access";
  registry_.SetAccess(At(0), kGran, 0b0110);
  registry_.SetAccess(At(1), kGran, 0b1100);
  auto both = registry_.CheckSpan("Copy", span(At(0) + 8), 2 * kGran - 16);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_TRUE(both->ours);
  EXPECT_EQ(both->device, 1) << "the first mapping's device";
  EXPECT_EQ(both->access, 0b0100u) << "devices with access to every byte";
  EXPECT_EQ(registry_.CheckSpan("Copy", span(At(1)), 2 * kGran).status().code(),
            Code::kInvalidArgument)
      << "into a hole";
  EXPECT_EQ(registry_.CheckSpan("Copy", span(At(7)), 2 * kGran).status().code(),
            Code::kInvalidArgument)
      << "past the range";
}

// Issue 19 item 11: address + bytes wrapped past zero and passed every
// check, so copy_to_host(mapped, SIZE_MAX) reached memmove.
TEST_F(VmmRegistryTest, SpansThatWrapTheAddressSpaceAreRefused) {
  auto span = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  ASSERT_TRUE(IsOk(Map(0, 1, /*device=*/1)));
  registry_.SetAccess(At(0), kGran, 0b10);
  for (uintptr_t start : {At(0), At(0) + kGran - 1}) {
    auto wrapped = registry_.CheckSpan("Copy", span(start), SIZE_MAX);
    EXPECT_EQ(wrapped.status().code(), Code::kInvalidArgument);
    EXPECT_NE(wrapped.status().message().find("end of the address space"), std::string::npos)
        << wrapped.status().ToString();
  }
  EXPECT_EQ(registry_.CheckSpan("Copy", span(At(0)), SIZE_MAX - At(0)).status().code(),
            Code::kInvalidArgument)
      << "no wrap, but past the range";
  int host_byte = 0;
  EXPECT_EQ(registry_.CheckSpan("Copy", &host_byte, SIZE_MAX).status().code(),
            Code::kInvalidArgument)
      << "host memory that wraps is refused too";
  auto into = registry_.CheckSpan("Copy", span(At(0) - 8), 16);
  EXPECT_EQ(into.status().code(), Code::kInvalidArgument) << "starts outside, runs into a range";
  EXPECT_FALSE(registry_.InsideRange(At(1), SIZE_MAX));
  EXPECT_EQ(registry_.WholeMappings("Unmap", At(0), SIZE_MAX - kGran + 1).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(registry_.TakeMappings("Unmap", At(0), SIZE_MAX - kGran + 1).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(registry_.mappings().size(), 1u) << "nothing taken";
  ASSERT_TRUE(IsOk(registry_.CheckInvariants()));
}

TEST_F(VmmRegistryTest, CopyRunsOnADeviceWithAccessToBothEnds) {
  auto at = [](size_t granule) { return reinterpret_cast<void*>(At(granule)); };
  int host_byte = 0;
  EXPECT_EQ(*registry_.CopyDevice("Copy", &host_byte, &host_byte, 1,
                                  CopyKind::kDeviceToDevice, 4),
            -1)
      << "neither end is ours: the caller's device";
  ASSERT_TRUE(IsOk(Map(0, 1, /*device=*/1)));
  ASSERT_TRUE(IsOk(Map(1, 1, /*device=*/2)));
  ASSERT_TRUE(IsOk(Map(2, 1, /*device=*/0)));
  registry_.SetAccess(At(0), kGran, 0b0010);
  registry_.SetAccess(At(1), kGran, 0b0110);
  registry_.SetAccess(At(2), kGran, 0b1000);
  EXPECT_EQ(*registry_.CopyDevice("Copy", at(1), at(0), kGran, CopyKind::kDeviceToDevice, 4), 1)
      << "the source's own device, the only one with access to both";
  EXPECT_EQ(*registry_.CopyDevice("Copy", at(1), &host_byte, 1, CopyKind::kHostToDevice, 4), 2)
      << "the destination's own device";
  EXPECT_EQ(*registry_.CopyDevice("Fill", at(2), nullptr, 1, CopyKind::kHostToDevice, 4), 3)
      << "its device lacks access: the first that has it";
  EXPECT_EQ(registry_.CopyDevice("Fill", at(2), nullptr, 1, CopyKind::kHostToDevice, 3)
                .status()
                .code(),
            Code::kPermissionDenied)
      << "no visible device has access";
  EXPECT_EQ(registry_.CopyDevice("Copy", at(2), at(0), 1, CopyKind::kDeviceToDevice, 4)
                .status()
                .code(),
            Code::kPermissionDenied)
      << "no device has access to both ends";
}

TEST_F(VmmRegistryTest, PagesCountReferencesAndKnowTheirSize) {
  const PageHandle page{kPage};
  EXPECT_EQ(registry_.FindPage(page, "Map").status().code(), Code::kNotFound);
  EXPECT_TRUE(registry_.AddPageReference(kPage, 1, kGran));
  EXPECT_TRUE(registry_.AddPageReference(kPage, 1, kGran)) << "an import of a page we hold";
  EXPECT_FALSE(registry_.AddPageReference(kPage, 1, 2 * kGran)) << "the same page, another size";
  ASSERT_TRUE(IsOk(registry_.CheckInvariants()));
  auto found = registry_.FindPage(page, "Map");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->references, 2);
  EXPECT_EQ(*registry_.DropPageReference(page, "ReleasePage"), 1);
  EXPECT_EQ(*registry_.DropPageReference(page, "ReleasePage"), 1);
  EXPECT_EQ(registry_.DropPageReference(page, "ReleasePage").status().code(), Code::kNotFound);
  EXPECT_TRUE(registry_.pages().empty());
}

TEST(VmmRegistryChecks, ArgumentsAreMultiplesOfTheGranularity) {
  EXPECT_TRUE(IsOk(CheckMultipleOfGranularity("CreatePage", 2 * kGran, kGran)));
  EXPECT_EQ(CheckMultipleOfGranularity("CreatePage", 0, kGran).code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckMultipleOfGranularity("CreatePage", kGran + 1, kGran).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(IsOk(CheckAlignedToGranularity("Map", kBase, kGran, kGran)));
  EXPECT_EQ(CheckAlignedToGranularity("Map", 0, kGran, kGran).code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckAlignedToGranularity("Map", kBase + 4096, kGran, kGran).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(IsOk(CheckReserveAlignment(0)));
  EXPECT_TRUE(IsOk(CheckReserveAlignment(kGran)));
  EXPECT_EQ(CheckReserveAlignment(3 * 4096).code(), Code::kInvalidArgument);
  EXPECT_EQ(Hex(kBase), "0x7f0000000000");
}

}  // namespace
}  // namespace nanokv::gpu
