// Engines under a device mask (issue 15 item 6, issue 18 item 2): kvd serves
// two simulated devices; the engine sees only kvd's device 1, as its own
// ordinal 0 (NANOKV_HOST_VISIBLE_DEVICES=1, the host backend's
// CUDA_VISIBLE_DEVICES). It must get and use kvd's device 1, matched by
// uuid, and be told plainly that kvd's device 0 is not visible to it, never
// be handed another device's pages under its own numbering.
#include <stdlib.h>

#include <string>

#include "gpu/backend.h"
#include "nanokv/kv_tensor.h"
#include "nanokv/object_store.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdMaskedEngineTest : public KvdFixture {
 protected:
  void SetUp() override {
    KvdFixture::SetUp();
    if (Backend() != "host") GTEST_SKIP() << "the mask here is the host backend's";
    setenv("NANOKV_HOST_DEVICES", "2", 1);
  }
  void TearDown() override {
    KvdFixture::TearDown();
    unsetenv("NANOKV_HOST_DEVICES");
    unsetenv("NANOKV_HOST_VISIBLE_DEVICES");
  }

  void Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--host-devices", "2"});
    StartKvd(16, extra);  // kvd itself unmasked: it sees both
    ASSERT_EQ(Read().segment.header.device_count, 2u);
  }

  // `name`'s pages on kvd's `device`, as kvd publishes them.
  uint64_t UsedPages(const std::string& name, int device) {
    ipc::Snapshot s = Read();
    for (uint32_t i = 0; i < s.segment.header.tenant_count; ++i) {
      if (ipc::ReadString(s.segment.tenants[i].name) == name) {
        return s.segment.tenants[i].used_pages[device];
      }
    }
    return 0;
  }
};

TEST_F(KvdMaskedEngineTest, TheHostMaskRenumbersDevicesAndUuidsFollowThePhysicalOne) {
  setenv("NANOKV_HOST_VISIBLE_DEVICES", "1", 1);
  auto masked = gpu::OpenBackend("host");
  ASSERT_TRUE(masked.ok());
  EXPECT_EQ((*masked)->device_count(), 1);
  auto info = (*masked)->GetDeviceInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->uuid, "host-1");
  EXPECT_EQ(gpu::FindDeviceByUuid(**masked, "host-1").value(), 0);
  EXPECT_EQ(gpu::FindDeviceByUuid(**masked, "host-0").status().code(), Code::kNotFound);
  // As CUDA_VISIBLE_DEVICES: an entry that is no device ends the list.
  setenv("NANOKV_HOST_VISIBLE_DEVICES", "1,7,0", 1);
  auto cut = gpu::OpenBackend("host");
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ((*cut)->device_count(), 1);
  unsetenv("NANOKV_HOST_VISIBLE_DEVICES");
  auto all = gpu::OpenBackend("host");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ((*all)->device_count(), 2);
  EXPECT_EQ((*all)->GetDeviceInfo(1)->uuid, "host-1");
}

// In this process: the mask is read when the client opens its backend.
TEST_F(KvdMaskedEngineTest, AMaskedClientWritesAndReadsKvdsDevice1) {
  Start();
  setenv("NANOKV_HOST_VISIBLE_DEVICES", "1", 1);
  auto client = AttachClient("masked");
  unsetenv("NANOKV_HOST_VISIBLE_DEVICES");
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->devices().size(), 2u);
  EXPECT_EQ(client->devices()[0].uuid, "host-0");
  EXPECT_EQ(client->devices()[0].local_device, -1);
  EXPECT_EQ(client->devices()[1].uuid, "host-1");
  EXPECT_EQ(client->devices()[1].local_device, 0);

  auto tensor = KVTensor::Create(*client, 1, 4 * kPage);
  ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
  ASSERT_OK((*tensor)->Map(0, 4));
  const auto pattern = ObjectPattern(4 * kPage, 11);
  ASSERT_OK(client->CopyToDevice((*tensor)->data(), pattern.data(), pattern.size()));
  std::vector<std::byte> back(pattern.size());
  ASSERT_OK(client->CopyToHost(back.data(), (*tensor)->data(), back.size()));
  EXPECT_EQ(back, pattern);
  PageLedger ledger;  // the tensor's four pages, on kvd's device 1 only
  ledger.Attach("masked", "");
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < 4; ++i) ids.push_back(*(*tensor)->page_id(i));
  ledger.Hold("masked", 1, ids);
  ExpectLedger(ledger);

  // kvd's device 0 is not this process's: a clear refusal, nothing sent.
  auto granted = client->Grant(0, 1);
  ASSERT_EQ(granted.status().code(), Code::kNotFound) << granted.status().ToString();
  EXPECT_NE(granted.status().message().find("kvd's device 0 (host-0) is not visible to this process"),
            std::string::npos)
      << granted.status().ToString();
  EXPECT_EQ(KVTensor::Create(*client, 0, kPage).status().code(), Code::kNotFound);
  ExpectLedger(ledger);
}

// An engine process started under the mask, as kvd's instances or a
// launcher start them: asked for kvd's device 1 it holds and verifies pages
// there; asked for kvd's device 0 it fails, saying why.
TEST_F(KvdMaskedEngineTest, AnEngineUnderAMaskAttachesToTheRightDevice) {
  Start();
  std::map<std::string, std::string> env = {{"NANOKV_HOST_DEVICES", "2"},
                                            {"NANOKV_HOST_VISIBLE_DEVICES", "1"},
                                            {"NANOKV_DEVICE", "1"}};
  Process right = StartEngine("right", {"--pages", "8", "--step", "4", "--rounds", "1",
                                        "--hold-ms", "60000"}, env);
  ASSERT_TRUE(WaitFor([&] { return UsedPages("right", 1) == 8; }, 20s)) << right.Log();
  ExpectLedger(PageLedger{}, {"right"}, {{1, 8}});  // kvd's device 1 only, nobody else's
  EXPECT_TRUE(WaitFor([&] { return right.Log().find("mapped and verified") != std::string::npos; }, 20s))
      << right.Log();
  right.Signal(SIGKILL);
  ASSERT_EQ(right.Wait(5s), 128 + SIGKILL);
  ExpectLedger(PageLedger{});  // every page of the killed engine came back

  env["NANOKV_DEVICE"] = "0";
  Process wrong = StartEngine("wrong", {"--pages", "8", "--step", "4", "--rounds", "1"}, env);
  auto code = wrong.Wait(20s);
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(wrong.Log().find("not visible to this process"), std::string::npos) << wrong.Log();
  ExpectLedger(PageLedger{});  // the refused engine holds nothing
}

// The object store's own connection maps kvd's device by the plan's uuid.
TEST_F(KvdMaskedEngineTest, AMaskedObjectStorePutsAndGetsOnKvdsDevice1) {
  Start({"--config", WriteConfig("object_store:\n  size: 8MiB\n")});
  ObjectStoreOptions options;
  options.ipc_name = ipc_;
  options.backend = "host";
  setenv("NANOKV_HOST_VISIBLE_DEVICES", "1", 1);
  auto store = ObjectStore::Open(options);
  unsetenv("NANOKV_HOST_VISIBLE_DEVICES");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const auto pattern = ObjectPattern(kPage + 33, 4);
  ASSERT_OK((*store)->Put("masked:1", pattern, 1));
  auto plan = (*store)->GetLocation("masked:1");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->device, 1);
  auto got = (*store)->Get("masked:1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, pattern);
  // An object on kvd's device 0 cannot be mapped here: refused, named.
  auto other = ObjectStore::Open(options);  // unmasked: both devices
  ASSERT_TRUE(other.ok());
  ASSERT_OK((*other)->Put("unmasked:0", ObjectPattern(4096, 2), 0));
  auto refused = (*store)->Get("unmasked:0");
  ASSERT_EQ(refused.status().code(), Code::kNotFound) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("not visible to this process"), std::string::npos);
}

}  // namespace
}  // namespace nanokv::testing
