// The data path between nodes at its largest tested size (issue 17): one
// 256 MiB object put into another node's store and read back byte-exact,
// in 4 MiB chunks through both agents' staging. Labelled slow: it moves
// half a GiB over loopback TCP and holds 3 copies of it.
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

class ClusterTransferBigTest : public ClusterFixture {};

TEST_F(ClusterTransferBigTest, A256MiBObjectCrossesNodesByteExact) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(132));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const auto data = Bytes(256u << 20, 17);
  ASSERT_OK(client->Put("big:256", data, {.preferred_segment = "n1"}));
  auto got = client->Get("big:256");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), data.size());
  EXPECT_TRUE(*got == data);
}

}  // namespace
}  // namespace nanokv::testing
