// kvctl cluster, kvctl objects --cluster and kvctl evict --cluster against a
// real master and kvds: tables, --json (parsed), exit codes.
#include <thread>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/kvctl_fixture.h"

namespace nanokv::testing {
namespace {

class ClusterKvctlTest : public ClusterFixture {
 protected:
  Ran Kvctl(std::vector<std::string> args) {
    static int counter = 0;
    const std::string base = dir_.path() + "/kvctl" + std::to_string(counter++);
    std::string command = "exec " + Quote(NANOKV_KVCTL_BINARY);
    for (const std::string& arg : args) command += " " + Quote(arg);
    Process p = Process::Start({"/bin/sh", "-c", command + " >" + Quote(base + ".out") + " 2>" + Quote(base + ".err")},
                               {{"NO_COLOR", "1"}, {"NANOKV_MASTERS", ""}}, base + ".log");
    Ran run;
    run.code = p.Wait(std::chrono::seconds(60)).value_or(-1);
    run.out = ReadFile(base + ".out");
    run.err = ReadFile(base + ".err");
    return run;
  }
};

TEST_F(ClusterKvctlTest, ClusterObjectsAndEvict) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "", 2));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("k:here", Bytes(3 * kPage, 1), {.preferred_segment = "n0"}));
  auto plan = client->OpenForWrite("k:both", 1000, {.preferred_segment = "n1/1", .replica_num = 2});
  ASSERT_TRUE(plan.ok());
  ASSERT_OK(client->Commit(*plan));

  Ran table = Kvctl({"--master", address_, "cluster"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("leads, term 1"), std::string::npos) << table.out;
  std::string n0 = TableRow(table.out, "n0");
  EXPECT_NE(n0.find("alive"), std::string::npos) << table.out;
  EXPECT_NE(n0.find("127.0.0.1:"), std::string::npos) << table.out;  // its transfer agent's address
  EXPECT_NE(n0.find("(staging)"), std::string::npos) << table.out;   // and the agent's mode
  EXPECT_NE(TableRow(table.out, "n1").find("0=host-0,1=host-1"), std::string::npos) << table.out;

  Ran json = Kvctl({"--master", address_, "--json", "cluster"});
  ASSERT_EQ(json.code, 0) << json.err;
  auto doc = JsonParser::Parse(json.out);
  ASSERT_TRUE(doc.has_value()) << json.out;
  EXPECT_EQ((*doc)["term"].u64(), 1u);
  EXPECT_EQ((*doc)["objects"].u64(), 2u);
  const Json* node1 = FindByKey((*doc)["nodes"], "node_id", "n1");
  ASSERT_NE(node1, nullptr);
  EXPECT_EQ((*node1)["state"].str(), "alive");
  EXPECT_EQ((*node1)["devices"].items.size(), 2u);
  EXPECT_EQ((*node1)["devices"][1]["objects"].u64(), 1u);
  const Json* node0 = FindByKey((*doc)["nodes"], "node_id", "n0");
  ASSERT_NE(node0, nullptr);
  EXPECT_GE((*node0)["devices"][0]["used_bytes"].u64(), 3 * kPage);

  Ran objects = Kvctl({"--master", address_, "objects", "--cluster"});
  ASSERT_EQ(objects.code, 0) << objects.err;
  EXPECT_NE(TableRow(objects.out, "k:here").find("n0:0"), std::string::npos) << objects.out;
  EXPECT_NE(TableRow(objects.out, "k:both").find("2"), std::string::npos) << objects.out;
  Ran objects_json = Kvctl({"--master", address_, "--json", "objects", "--cluster"});
  auto listed = JsonParser::Parse(objects_json.out);
  ASSERT_TRUE(listed.has_value()) << objects_json.out;
  const Json* both = FindByKey((*listed)["objects"], "key", "k:both");
  ASSERT_NE(both, nullptr);
  EXPECT_EQ((*both)["replicas"].items.size(), 2u);

  Ran evict = Kvctl({"--master", address_, "evict", "--cluster", "k:both", "k:none"});
  EXPECT_EQ(evict.code, 3) << "the first failure: k:none is not found\n" << evict.out << evict.err;
  EXPECT_NE(evict.out.find("evicted 'k:both' from every node"), std::string::npos) << evict.out;
  EXPECT_EQ(client->GetLocation("k:both").status().code(), Code::kNotFound);
  EXPECT_EQ(Store(1)->GetLocation("k:both").status().code(), Code::kNotFound);
  EXPECT_EQ(Store(0)->GetLocation("k:both").status().code(), Code::kNotFound);

  // No master answering: exit 4, saying so.
  Ran none = Kvctl({"--master", "127.0.0.1:1", "cluster"});
  EXPECT_EQ(none.code, 4) << none.out << none.err;
  EXPECT_NE(none.err.find("127.0.0.1:1"), std::string::npos) << none.err;
  Ran usage = Kvctl({"--master", address_, "evict", "--cluster"});
  EXPECT_EQ(usage.code, 2);
}

TEST_F(ClusterKvctlTest, ClusterShowsEachNodesHostTier) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  object_store_extra_ = "  host_tier: 16MiB\n";
  ASSERT_NO_FATAL_FAILURE(StartNode());
  Ran json = Kvctl({"--master", address_, "--json", "cluster"});
  ASSERT_EQ(json.code, 0) << json.err;
  auto doc = JsonParser::Parse(json.out);
  ASSERT_TRUE(doc.has_value()) << json.out;
  const Json* plain = FindByKey((*doc)["nodes"], "node_id", "n0");
  const Json* tiered = FindByKey((*doc)["nodes"], "node_id", "n1");
  ASSERT_TRUE(plain != nullptr && tiered != nullptr) << json.out;
  EXPECT_EQ((*plain)["devices"][0]["host_capacity_bytes"].u64(), 0u);
  EXPECT_EQ((*tiered)["devices"][0]["host_capacity_bytes"].u64(), 16u << 20);
  EXPECT_EQ((*tiered)["devices"][0]["host_used_bytes"].u64(), 0u);
  Ran table = Kvctl({"--master", address_, "cluster"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("HOST"), std::string::npos) << table.out;
  EXPECT_NE(TableRow(table.out, "n1").find("of 16.0 MiB"), std::string::npos) << table.out;

  // n1's store fills: objects move down, and kvctl shows where each copy is.
  auto store = Store(1);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 14; ++i) {
    Status put = store->Put("t" + std::to_string(i), Bytes(1 << 20, i));
    for (int attempt = 0; put.code() == Code::kUnavailable && attempt < 2000; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      put = store->Put("t" + std::to_string(i), Bytes(1 << 20, i));
    }
    ASSERT_OK(put);
  }
  uint64_t down = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto parsed = JsonParser::Parse(Kvctl({"--master", address_, "--json", "cluster"}).out);
        const Json* node = parsed ? FindByKey((*parsed)["nodes"], "node_id", "n1") : nullptr;
        down = node != nullptr ? (*node)["devices"][0]["host_objects"].u64() : 0;
        return down > 0;
      },
      std::chrono::seconds(20)))
      << "the master never counted n1's host-tier copies";
  table = Kvctl({"--master", address_, "cluster"});
  EXPECT_NE(TableRow(table.out, "n1").find("(" + std::to_string(down) + " host)"), std::string::npos) << table.out;
  Ran objects = Kvctl({"--master", address_, "objects", "--cluster"});
  ASSERT_EQ(objects.code, 0) << objects.err;
  EXPECT_NE(objects.out.find("n1:0(host)"), std::string::npos) << objects.out;
  EXPECT_NE(objects.out.find("n1:0\n"), std::string::npos) << "and the store's copies\n" << objects.out;
  Ran listed = Kvctl({"--master", address_, "--json", "objects", "--cluster"});
  EXPECT_NE(listed.out.find("\"tier\":\"host\""), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("\"tier\":\"gpu\""), std::string::npos) << listed.out;
}

}  // namespace
}  // namespace nanokv::testing
