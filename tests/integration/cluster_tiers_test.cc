// The cluster master's index knows each copy's tier (issue 32): a node
// tells the master when it moves a copy between its GPU store and the host
// tier under it (a READY event of the copy with its new tier and epoch), so
// the master's locate answers carry the tier and list GPU-store copies
// before host-tier ones, its listing and its cluster view show them, and a
// promotion's new epoch reaches the index (a later removal finds the copy).
#include <signal.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class ClusterTiersTest : public ClusterFixture {
 protected:
  // A put on the node's own store, as an engine retries it while its kvd's
  // tier worker makes room.
  static Status PutRetried(ObjectStore& store, const std::string& key, const std::vector<std::byte>& bytes) {
    for (int attempt = 0;; ++attempt) {
      Status put = store.Put(key, bytes);
      if (put.ok() || put.code() != Code::kUnavailable || attempt == 2000) return put;
      std::this_thread::sleep_for(5ms);
    }
  }
  // The copy of `key` on `node` as the master says ({} if none).
  std::optional<Replica> CopyOn(ClusterClient& client, const std::string& key, const std::string& node) {
    auto location = client.GetLocation(key);
    if (!location.ok()) return std::nullopt;
    for (const Replica& r : location->replicas) {
      if (r.node_id == node) return r;
    }
    return std::nullopt;
  }
};

TEST_F(ClusterTiersTest, TheIndexKnowsEachCopysTierAndLocatePrefersTheGpuCopy) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  // n0: a 16 MiB store over a 32 MiB host tier, FIFO (the oldest goes down
  // first); n1: a store alone.
  object_store_extra_ = "  policy: fifo\n  host_tier: 32MiB\n";
  devices_yaml_ = "devices: [0]\n";  // one store: its sizes are what makes copies go down
  ASSERT_NO_FATAL_FAILURE(StartNode(8));
  object_store_extra_ = "";
  ASSERT_NO_FATAL_FAILURE(StartNode(8));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const auto bytes = Bytes(1 << 20, 5);
  auto plan = client->OpenForWrite("x", bytes.size(), {.preferred_segment = "n0", .replica_num = 2});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->replicas.size(), 2u);
  for (const ReplicaPlan& r : plan->replicas) ASSERT_OK(Store(r.node_id == "n0" ? 0 : 1)->CopyIn(r.plan, bytes));
  ASSERT_OK(client->Commit(*plan));
  auto location = client->GetLocation("x");
  ASSERT_TRUE(location.ok());
  EXPECT_EQ(location->replicas[0].node_id, "n0") << "both in a GPU store: nearest first";
  EXPECT_FALSE(location->replicas[0].host_tier);

  // n0's store fills: "x", its oldest, moves down, and the master hears it.
  auto n0 = Store(0);
  ASSERT_NE(n0, nullptr);
  for (int i = 0; i < 14; ++i) ASSERT_OK(PutRetried(*n0, "fill" + std::to_string(i), Bytes(1 << 20, i)));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto copy = CopyOn(*client, "x", "n0");
        return copy && copy->host_tier;
      },
      20s))
      << "the master never saw n0's copy go down to its host tier";
  location = client->GetLocation("x");
  ASSERT_TRUE(location.ok());
  ASSERT_EQ(location->replicas.size(), 2u);
  EXPECT_EQ(location->replicas[0].node_id, "n1") << "the GPU copy first, though n0 is the client's node";
  EXPECT_FALSE(location->replicas[0].host_tier);
  EXPECT_TRUE(location->replicas[1].host_tier);

  // The listing and the cluster view say so too.
  auto listed = client->ListObjects();
  ASSERT_TRUE(listed.ok());
  bool listed_down = false;
  for (const ObjectLocation& o : *listed) {
    for (const Replica& r : o.replicas) listed_down |= o.key == "x" && r.node_id == "n0" && r.host_tier;
  }
  EXPECT_TRUE(listed_down);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto cluster = client->Cluster();
        if (!cluster.ok()) return false;
        for (const ClusterNodeStatus& n : cluster->nodes) {
          if (n.node_id == "n0" && !n.devices.empty() && n.devices[0].host_objects > 0 &&
              n.devices[0].host_objects < n.devices[0].objects && n.devices[0].host_capacity_bytes == 32u << 20) {
            return true;
          }
        }
        return false;
      },
      10s))
      << "n0's host-tier copies counted per device";

  // A get on n0 reads the host tier's copy at once and brings it back up
  // at a new epoch, which the index follows: n0's copy is a GPU copy again,
  // the nearest, and a removal finds it.
  auto got = n0->Get("x");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, bytes);
  Result<ObjectPlan> here = Status::Internal("not located");
  ASSERT_TRUE(WaitFor(
      [&] {
        here = n0->GetLocation("x");
        return here.ok() && here->tier == ObjectTier::kGpu;
      },
      20s))
      << "n0's copy never came back up: " << here.status().ToString();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto copy = CopyOn(*client, "x", "n0");
        return copy && !copy->host_tier && copy->epoch == here->epoch;
      },
      20s))
      << "the master never saw n0's copy come back up at epoch " << here->epoch;
  EXPECT_EQ(client->GetLocation("x")->replicas[0].node_id, "n0");
  ASSERT_OK(client->Remove("x"));
  EXPECT_EQ(client->GetLocation("x").status().code(), Code::kNotFound);
  EXPECT_EQ(n0->GetLocation("x").status().code(), Code::kNotFound);
}

// A node killed and started again brings both tiers back (its journal and
// page keeper) and registers them with the master, each copy in its tier.
TEST_F(ClusterTiersTest, ANodeRestartedAfterAKillReportsEachCopyInItsTier) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  object_store_extra_ = "  policy: fifo\n  host_tier: 32MiB\n";
  devices_yaml_ = "devices: [0]\n";  // one store: its sizes are what makes copies go down
  ASSERT_NO_FATAL_FAILURE(StartNode(8));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  {
    auto n0 = Store(0);
    ASSERT_NE(n0, nullptr);
    for (int i = 0; i < 20; ++i) ASSERT_OK(PutRetried(*n0, "k" + std::to_string(i), Bytes(1 << 20, i)));
  }
  // The master's view of each key's tier, once it holds every key.
  auto tiers = [&] {
    std::map<std::string, bool> out;
    auto listed = client->ListObjects();
    if (!listed.ok()) return out;
    for (const ObjectLocation& o : *listed) {
      if (o.replicas.size() == 1) out[o.key] = o.replicas[0].host_tier;
    }
    return out;
  };
  // The node's own word: its listing.
  auto node_tiers = [&] {
    std::map<std::string, bool> out;
    auto listed = Store(0)->List();
    if (!listed.ok()) return out;
    for (const ObjectEntry& e : *listed) out[e.key] = e.host_tier;
    return out;
  };
  std::map<std::string, bool> before;
  ASSERT_TRUE(WaitFor(
      [&] {
        before = node_tiers();
        return before.size() == 20 && tiers() == before;
      },
      20s))
      << "the master's tiers never matched the node's";
  size_t down = 0;
  for (const auto& [key, host] : before) down += host ? 1 : 0;
  ASSERT_GT(down, 0u);
  nodes_[0].process.Signal(SIGKILL);
  nodes_[0].process.Wait(20s);
  WaitNodeState("n0", "dead");
  nodes_[0].process = Process::Start({KvdBinary(), "--config", nodes_[0].config}, {{"NANOKV_RUN_DIR", dir_.path()}},
                                     dir_.path() + "/n0-again.log");
  ASSERT_TRUE(nodes_[0].process.started());
  WaitNodeState("n0", "alive");
  EXPECT_EQ(node_tiers(), before) << "both tiers back on the node\n" << nodes_[0].process.Log();
  EXPECT_TRUE(WaitFor([&] { return tiers() == before; }, 20s)) << "and in the master's index, each in its tier";
}

}  // namespace
}  // namespace nanokv::testing
