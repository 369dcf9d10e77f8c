// What crosses the master's boundary: request and session checks, segments,
// node ids, status mapping both ways, the token file's rules and its
// constant-time comparison, and kvd's term rule.
#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "daemon/cluster/node_agent.h"
#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"
#include "ipc/master/master_protocol.h"
#include "ipc/master/token.h"
#include "tests/integration/process_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::master {
namespace {

TEST(MasterChecks, SegmentsAndNodeIds) {
  EXPECT_TRUE(ValidNodeId("gpu-node.7_a"));
  EXPECT_FALSE(ValidNodeId(""));
  EXPECT_FALSE(ValidNodeId(".hidden"));
  EXPECT_FALSE(ValidNodeId("a b"));
  EXPECT_FALSE(ValidNodeId(std::string(64, 'a')));
  EXPECT_EQ(ParseSegment("")->node_id, "");
  EXPECT_EQ(ParseSegment("n1")->device, -1);
  EXPECT_EQ(ParseSegment("n1/15")->device, 15);
  EXPECT_EQ(ParseSegment("n1/16").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseSegment("n1/").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseSegment("n1/-1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseSegment("/0").status().code(), Code::kInvalidArgument);
}

TEST(MasterChecks, RequestsAndNodeMessages) {
  v1::WriteItem item;
  item.set_key("k");
  item.set_bytes_total(1);
  EXPECT_OK(CheckWriteItem(item));
  item.set_replica_num(kMaxReplicas + 1);
  EXPECT_NE(CheckWriteItem(item).ToString().find("replica_num 9 is over 8"), std::string::npos);
  item.set_replica_num(1);
  item.set_bytes_total(kMaxObjectBytes + 1);
  EXPECT_EQ(CheckWriteItem(item).code(), Code::kInvalidArgument);
  item.set_bytes_total(1);
  item.set_key(std::string(257, 'k'));
  EXPECT_EQ(CheckWriteItem(item).code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckBatchSize(0, "open").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckBatchSize(kMaxBatchItems + 1, "open").code(), Code::kInvalidArgument);
  v1::WriteRef ref;
  ref.set_key("k");
  EXPECT_EQ(CheckWriteRef(ref).code(), Code::kInvalidArgument) << "write id 0";

  v1::NodeMessage m;
  EXPECT_EQ(CheckNodeMessage(m).code(), Code::kProtocolError);
  m.mutable_register_()->set_node_id("n1");
  v1::DeviceReport* d = m.mutable_register_()->add_devices();
  d->set_device(0);
  d->set_capacity_bytes(100);
  d->set_used_bytes(10);
  d->set_high_watermark(0.9);
  d->set_low_watermark(0.8);
  EXPECT_OK(CheckNodeMessage(m));
  d->set_used_bytes(101);
  EXPECT_EQ(CheckNodeMessage(m).code(), Code::kProtocolError);
  d->set_used_bytes(10);
  d->set_low_watermark(0.95);
  EXPECT_EQ(CheckNodeMessage(m).code(), Code::kProtocolError);
  d->set_low_watermark(0.8);
  *m.mutable_register_()->add_devices() = *d;
  EXPECT_NE(CheckNodeMessage(m).ToString().find("device 0 twice"), std::string::npos);
  v1::NodeMessage events;
  v1::ObjectEvent* e = events.mutable_events()->add_events();
  e->set_key("k");
  e->set_bytes_total(0);
  EXPECT_EQ(CheckNodeMessage(events).code(), Code::kProtocolError) << "READY of 0 bytes";
  e->set_kind(v1::ObjectEvent::REMOVED);
  EXPECT_OK(CheckNodeMessage(events));
  e->set_tier(v1::HOST_TIER);
  EXPECT_OK(CheckNodeMessage(events));
  e->set_tier(static_cast<v1::CopyTier>(7));
  EXPECT_NE(CheckNodeMessage(events).ToString().find("events: tier 7"), std::string::npos) << "a tier that is none";
  e->set_tier(v1::GPU_STORE);
  e->set_device(16);
  EXPECT_EQ(CheckNodeMessage(events).code(), Code::kProtocolError);

  v1::MasterMessage order;
  order.set_term(1);
  order.mutable_instruction()->set_request_id(3);
  EXPECT_EQ(CheckMasterMessage(order).code(), Code::kProtocolError) << "no orders";
  v1::PlanOrder* p = order.mutable_instruction()->mutable_open()->add_orders();
  p->set_key("k");
  p->set_bytes_total(5);
  EXPECT_OK(CheckMasterMessage(order));
  order.set_term(0);
  EXPECT_EQ(CheckMasterMessage(order).code(), Code::kProtocolError);
  v1::InstructionReply reply;
  reply.add_statuses()->set_code(0);
  EXPECT_EQ(CheckInstructionReply(reply, 1, true).code(), Code::kProtocolError) << "no plan for the OK order";
  reply.mutable_statuses(0)->set_code(99);
  EXPECT_EQ(CheckInstructionReply(reply, 1, true).code(), Code::kProtocolError);
}

TEST(GrpcStatus, CodesRoundTrip) {
  for (int code = 1; code <= static_cast<int>(kLastCode); ++code) {
    Status s(static_cast<Code>(code), "why");
    Status back = FromGrpcStatus(ToGrpcStatus(s), "master x");
    EXPECT_EQ(back.code(), s.code());
    EXPECT_NE(back.ToString().find("master x"), std::string::npos);
    v1::ItemStatus item;
    ToItem(s, &item);
    EXPECT_EQ(FromItem(item, "m").code(), s.code());
  }
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow"), "m").code(),
            Code::kUnavailable);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "x", "999"), "m").code(), Code::kUnavailable);
  v1::ItemStatus bogus;
  bogus.set_code(77);
  EXPECT_EQ(FromItem(bogus, "m").code(), Code::kProtocolError);
}

TEST(Token, FileRulesAndComparison) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/token";
  std::ofstream(path) << "s3cret-token\n";
  chmod(path.c_str(), 0600);
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "s3cret-token");
  chmod(path.c_str(), 0644);
  EXPECT_EQ(ReadTokenFile(path).status().code(), Code::kPermissionDenied);
  EXPECT_NE(ReadTokenFile(path).status().ToString().find("mode 0644"), std::string::npos);
  chmod(path.c_str(), 0640);
  EXPECT_TRUE(ReadTokenFile(path).ok()) << "a group may share it";
  std::ofstream(path, std::ios::trunc) << "\n";
  EXPECT_EQ(ReadTokenFile(path).status().code(), Code::kInvalidArgument);
  std::ofstream(path, std::ios::trunc) << "two words";
  EXPECT_EQ(ReadTokenFile(path).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile(dir.path() + "/none").status().code(), Code::kNotFound);
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abd", "abc"));
  EXPECT_FALSE(TokensEqual("ab", "abc"));
  EXPECT_FALSE(TokensEqual("abcd", "abc"));
  EXPECT_FALSE(TokensEqual("", "abc"));
}

TEST(TermRule, AKvdRefusesAnOlderTerm) {
  std::atomic<uint64_t> highest{0};
  EXPECT_OK(kvd::NodeAgent::AdmitTerm(highest, 3));
  EXPECT_EQ(highest.load(), 3u);
  EXPECT_OK(kvd::NodeAgent::AdmitTerm(highest, 3));
  Status older = kvd::NodeAgent::AdmitTerm(highest, 2);
  EXPECT_EQ(older.code(), Code::kFailedPrecondition);
  EXPECT_NE(older.ToString().find("term 2 is refused: this kvd follows term 3"), std::string::npos);
  EXPECT_OK(kvd::NodeAgent::AdmitTerm(highest, 9));
  EXPECT_EQ(highest.load(), 9u);
}

}  // namespace
}  // namespace nanokv::master
