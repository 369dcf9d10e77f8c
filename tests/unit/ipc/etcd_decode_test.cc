// etcd's replies are decoded defensively: what etcd would never send (a
// reply without its header, a key without revisions, a transaction answering
// other ops than asked, an event without its key) is kProtocolError, not a
// crash or a wrong answer. And the election's record in etcd.
#include "ipc/etcd/etcd_decode.h"

#include <gtest/gtest.h>

#include "ipc/etcd/leader_record.h"
#include "tests/util/status_matchers.h"

namespace nanokv::etcd {
namespace {

namespace pb = etcdserverpb;

pb::KeyValue GoodKv(const std::string& key) {
  pb::KeyValue kv;
  kv.set_key(key);
  kv.set_value("v");
  kv.set_create_revision(5);
  kv.set_mod_revision(7);
  kv.set_version(2);
  return kv;
}

TEST(EtcdDecodeTest, PrefixEnd) {
  EXPECT_EQ(PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixEnd("ab"), "ac");
  EXPECT_EQ(PrefixEnd(std::string("a\xff\xff", 3)), "b");
  EXPECT_EQ(PrefixEnd(std::string("\xff", 1)), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdDecodeTest, KeyValues) {
  ASSERT_OK(DecodeKeyValue(GoodKv("k"), "t").status());
  pb::KeyValue no_key = GoodKv("");
  EXPECT_EQ(DecodeKeyValue(no_key, "t").status().code(), Code::kProtocolError);
  pb::KeyValue unborn = GoodKv("k");
  unborn.set_create_revision(0);
  EXPECT_EQ(DecodeKeyValue(unborn, "t").status().code(), Code::kProtocolError);
  pb::KeyValue backwards = GoodKv("k");
  backwards.set_mod_revision(4);
  EXPECT_EQ(DecodeKeyValue(backwards, "t").status().code(), Code::kProtocolError);
  pb::KeyValue negative_lease = GoodKv("k");
  negative_lease.set_lease(-1);
  EXPECT_EQ(DecodeKeyValue(negative_lease, "t").status().code(), Code::kProtocolError);
}

TEST(EtcdDecodeTest, RangeNeedsItsHeaderAndACountThatHoldsItsKeys) {
  pb::RangeResponse reply;
  *reply.add_kvs() = GoodKv("k");
  reply.set_count(1);
  EXPECT_EQ(DecodeRange(reply, "Range").status().code(), Code::kProtocolError);  // no header
  reply.mutable_header()->set_revision(9);
  auto range = DecodeRange(reply, "Range");
  ASSERT_OK(range.status());
  EXPECT_EQ(range->revision, 9);
  EXPECT_EQ(range->kvs[0].version, 2);
  reply.set_count(0);
  EXPECT_EQ(DecodeRange(reply, "Range").status().code(), Code::kProtocolError);
}

TEST(EtcdDecodeTest, TxnAnswersMustMatchTheOpsAsked) {
  TxnSpec spec;
  spec.success = {TxnOp::Put("k", "v"), TxnOp::Get("k")};
  spec.failure = {TxnOp::Get("k")};
  pb::TxnResponse reply;
  reply.mutable_header()->set_revision(3);
  reply.set_succeeded(true);
  reply.add_responses()->mutable_response_put();
  EXPECT_EQ(DecodeTxn(spec, reply).status().code(), Code::kProtocolError);  // one answer to two ops
  reply.add_responses()->mutable_response_delete_range();
  EXPECT_EQ(DecodeTxn(spec, reply).status().code(), Code::kProtocolError);  // a delete for a get
  reply.mutable_responses(1)->mutable_response_range()->mutable_header()->set_revision(3);
  auto result = DecodeTxn(spec, reply);
  ASSERT_OK(result.status());
  EXPECT_TRUE(result->succeeded);
  EXPECT_EQ(result->results[1].kind, TxnOp::Kind::kRange);
  reply.set_succeeded(false);  // the failure branch has one op
  EXPECT_EQ(DecodeTxn(spec, reply).status().code(), Code::kProtocolError);
}

TEST(EtcdDecodeTest, WatchEvents) {
  pb::WatchResponse reply;
  reply.mutable_header()->set_revision(8);
  reply.add_events()->set_type(pb::Event::PUT);  // no kv
  EXPECT_EQ(DecodeWatch(reply).status().code(), Code::kProtocolError);
  *reply.mutable_events(0)->mutable_kv() = GoodKv("k");
  pb::Event* deleted = reply.add_events();
  deleted->set_type(pb::Event::DELETE);
  deleted->mutable_kv()->set_key("k");
  EXPECT_EQ(DecodeWatch(reply).status().code(), Code::kProtocolError);  // a deletion without its revision
  deleted->mutable_kv()->set_mod_revision(8);
  auto batch = DecodeWatch(reply);
  ASSERT_OK(batch.status());
  ASSERT_EQ(batch->events.size(), 2u);
  EXPECT_EQ(batch->events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(batch->events[1].kv.mod_revision, 8);
  reply.mutable_events(1)->set_type(static_cast<pb::Event::EventType>(7));
  EXPECT_EQ(DecodeWatch(reply).status().code(), Code::kProtocolError);
}

TEST(LeaderRecordTest, RoundTripAndMalformedValues) {
  KeyValue kv;
  kv.key = CandidateKey("/nanokv/c/leader", 0x1234);
  EXPECT_EQ(kv.key, "/nanokv/c/leader/0000000000001234");
  kv.value = EncodeCandidate("master-a", "10.0.0.1:7470");
  kv.create_revision = 42;
  auto leader = DecodeCandidate(kv);
  ASSERT_OK(leader.status());
  EXPECT_EQ(leader->id, "master-a");
  EXPECT_EQ(leader->address, "10.0.0.1:7470");
  EXPECT_EQ(leader->term, 42u);

  kv.value = "\xff\xff garbage";
  EXPECT_EQ(DecodeCandidate(kv).status().code(), Code::kProtocolError);
  kv.value = EncodeCandidate("", "10.0.0.1:7470");  // no id
  EXPECT_EQ(DecodeCandidate(kv).status().code(), Code::kProtocolError);
  kv.value = EncodeCandidate("a b", "x");
  EXPECT_EQ(DecodeCandidate(kv).status().code(), Code::kProtocolError);

  EXPECT_EQ(CheckElectionKey("").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckElectionKey("/nanokv/c/leader/").code(), Code::kInvalidArgument);
  EXPECT_OK(CheckElectionKey("/nanokv/c/leader"));
  EXPECT_EQ(CheckCandidate(std::string(129, 'a'), "").code(), Code::kInvalidArgument);
  EXPECT_OK(CheckCandidate("m1", ""));
}

}  // namespace
}  // namespace nanokv::etcd
