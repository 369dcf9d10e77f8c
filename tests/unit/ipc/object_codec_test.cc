// The object store's messages through Decode: valid ones pass, every field
// out of range is a protocol fault (kvd answers it with an Error, never acts).
#include "ipc/wire/object_codec.h"

#include <gtest/gtest.h>

#include "ipc/wire/codec.h"
#include "nanokv/object_header.h"

namespace nanokv::wire {
namespace {

Status DecodeMessage(Message m) {
  m.set_version(kWireVersion);
  std::string bytes = m.SerializeAsString();
  Message out;
  return Decode(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), &out);
}

template <typename Fill>
Status With(Fill fill) {
  Message m;
  fill(m);
  return DecodeMessage(m);
}

ObjectPlan GoodPlan() {
  ObjectPlan p;
  p.set_device(0);
  p.set_header_offset(64);
  p.set_payload_offset(4096);
  p.set_page_bytes(4096);
  p.set_store_bytes(3 * 4096);
  p.set_bytes_total(5000);
  p.set_n_pages(2);
  ObjectSpan* a = p.add_spans();
  a->set_page_id(7);
  a->set_offset(0);
  a->set_length(4096);
  ObjectSpan* b = p.add_spans();
  b->set_page_id(9);
  b->set_offset(0);
  b->set_length(904);
  p.set_state(2);
  return p;
}

TEST(ObjectCodec, AcceptsValidRequestsAndPlans) {
  EXPECT_TRUE(With([](Message& m) {
                m.mutable_object_open()->set_key("sess:42:kv:L0");
                m.mutable_object_open()->set_bytes_total(1);
                m.mutable_object_open()->set_preferred_device(-1);
              }).ok());
  EXPECT_TRUE(With([](Message& m) { m.mutable_object_commit()->set_key(std::string(256, 'k')); }).ok());
  EXPECT_TRUE(With([](Message& m) { *m.mutable_object_plan() = GoodPlan(); }).ok());
  EXPECT_TRUE(With([](Message& m) { m.mutable_object_list(); }).ok());
  EXPECT_TRUE(With([](Message& m) { m.mutable_object_evict()->set_device(-1); }).ok());
  EXPECT_TRUE(IsObjectRequest(Message::kObjectPages));
  EXPECT_FALSE(IsObjectRequest(Message::kObjectPlan));
  EXPECT_FALSE(IsObjectBody(Message::kGrant));
}

TEST(ObjectCodec, RejectsOutOfRangeFields) {
  auto fault = [](const Status& s) { return s.code() == Code::kProtocolError; };
  EXPECT_TRUE(fault(With([](Message& m) { m.mutable_object_open()->set_key(""); })));
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_open()->set_key(std::string(257, 'k'));
    m.mutable_object_open()->set_bytes_total(1);
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_open()->set_key("a b");
    m.mutable_object_open()->set_bytes_total(1);
  })));
  EXPECT_TRUE(fault(With([](Message& m) { m.mutable_object_open()->set_key("k"); })));  // 0 bytes
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_open()->set_key("k");
    m.mutable_object_open()->set_bytes_total(1);
    m.mutable_object_open()->set_preferred_device(static_cast<int32_t>(kMaxDevices));
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_pin()->set_key("k");
    m.mutable_object_pin()->set_pin(3);
  })));
  EXPECT_TRUE(fault(With([](Message& m) { m.mutable_object_pages()->set_device(0); })));  // no pages
  EXPECT_TRUE(fault(With([](Message& m) {
    for (uint32_t i = 0; i <= kMaxObjectPageFds; ++i) m.mutable_object_pages()->add_page_ids(i);
  })));
  EXPECT_TRUE(fault(With([](Message& m) { m.mutable_object_evict()->set_device(-2); })));
  // A write names the plan it writes; a read names none.
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_pages()->add_page_ids(1);
    m.mutable_object_pages()->set_write(true);
  })));
  EXPECT_TRUE(With([](Message& m) {
    m.mutable_object_pages()->add_page_ids(1);
    m.mutable_object_pages()->set_write(true);
    m.mutable_object_pages()->set_plan_key("k");
    m.mutable_object_pages()->set_plan_epoch(3);
  }).ok());
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_pages()->add_page_ids(1);
    m.mutable_object_pages()->set_write_secret(7);
  })));
  // ... or the asker's slab, never both; a read names no slab.
  EXPECT_TRUE(With([](Message& m) {
                m.mutable_object_pages()->add_page_ids(1);
                m.mutable_object_pages()->set_write(true);
                m.mutable_object_pages()->set_slab_id(5);
              }).ok());
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_pages()->add_page_ids(1);
    m.mutable_object_pages()->set_write(true);
    m.mutable_object_pages()->set_slab_id(5);
    m.mutable_object_pages()->set_plan_key("k");
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_pages()->add_page_ids(1);
    m.mutable_object_pages()->set_slab_id(5);
  })));
  // The store's summary (kvctl objects; a host client's device count).
  EXPECT_TRUE(With([](Message& m) { m.mutable_object_info(); }).ok());
  EXPECT_TRUE(With([](Message& m) {
    auto* d = m.mutable_object_info_reply()->add_devices();
    d->set_device(1);
    d->set_store_bytes(100);
    d->set_used_bytes(100);
  }).ok());
  EXPECT_TRUE(fault(With([](Message& m) {
    auto* d = m.mutable_object_info_reply()->add_devices();
    d->set_store_bytes(100);
    d->set_used_bytes(101);  // more used than there is
  })));
  EXPECT_TRUE(fault(With([](Message& m) { m.mutable_object_info_reply()->add_devices()->set_device(-1); })));
  EXPECT_TRUE(fault(With([](Message& m) {
    for (int i = 0; i <= kMaxObjectInfoDevices; ++i) m.mutable_object_info_reply()->add_devices();
  })));
  EXPECT_TRUE(With([](Message& m) {
    auto* d = m.mutable_object_info_reply()->add_devices();
    for (int i = 0; i < kMaxObjectStoreOwners; ++i) d->add_owners()->set_uid(1000 + i);
  }).ok());
  EXPECT_TRUE(fault(With([](Message& m) {
    auto* d = m.mutable_object_info_reply()->add_devices();
    for (int i = 0; i <= kMaxObjectStoreOwners; ++i) d->add_owners()->set_uid(1000 + i);
  })));
  // Plans whose spans or offsets do not add up.
  EXPECT_TRUE(fault(With([](Message& m) {
    *m.mutable_object_plan() = GoodPlan();
    m.mutable_object_plan()->set_bytes_total(5001);
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    *m.mutable_object_plan() = GoodPlan();
    m.mutable_object_plan()->mutable_spans(1)->set_offset(4000);  // runs past its page
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    *m.mutable_object_plan() = GoodPlan();
    m.mutable_object_plan()->set_store_bytes(4096);  // payload outside the range
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    *m.mutable_object_plan() = GoodPlan();
    m.mutable_object_plan()->set_n_pages(3);
  })));
  // A get's lease: locate and release-the-previous ride on an acquire only,
  // the released key is checked like any key, the reply's plan like a plan.
  EXPECT_TRUE(With([](Message& m) {
    m.mutable_object_lease()->set_key("k");
    m.mutable_object_lease()->set_locate(true);
    m.mutable_object_lease()->set_release_key("j");
    m.mutable_object_lease()->set_release_lease_id(9);
  }).ok());
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_lease()->set_key("k");
    m.mutable_object_lease()->set_release_lease_id(9);  // no key for it
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    m.mutable_object_lease()->set_key("k");
    m.mutable_object_lease()->set_release(true);
    m.mutable_object_lease()->set_locate(true);
  })));
  EXPECT_TRUE(With([](Message& m) { *m.mutable_object_lease_reply()->mutable_plan() = GoodPlan(); }).ok());
  EXPECT_TRUE(fault(With([](Message& m) {
    *m.mutable_object_lease_reply()->mutable_plan() = GoodPlan();
    m.mutable_object_lease_reply()->mutable_plan()->set_n_pages(3);
  })));
  EXPECT_TRUE(fault(With([](Message& m) {
    for (uint32_t i = 0; i <= kMaxObjectListEntries; ++i) {
      m.mutable_object_list_reply()->add_objects()->set_key("k");
    }
  })));
}

// A plan naming the host tier: READY, its spans the tier's own page
// numbers in order inside it, no header. libkv decodes every plan so:
// anything else is a fault before a page is asked for or mapped.
ObjectPlan GoodHostPlan() {
  ObjectPlan p = GoodPlan();
  p.set_tier(1);
  p.set_header_offset(0);
  p.set_header_page(0);
  p.set_payload_offset(4096 + 100);
  p.mutable_spans(0)->set_page_id(1);
  p.mutable_spans(0)->set_offset(100);
  p.mutable_spans(0)->set_length(3996);
  p.mutable_spans(1)->set_page_id(2);
  p.mutable_spans(1)->set_length(1004);
  p.set_state(3);  // READY
  return p;
}

// A release batch names leases by id alone, up to kMaxReleaseBatch: a
// hostile peer cannot make kvd walk more, and an empty one is a fault.
TEST(ObjectCodec, AReleaseBatchTakesOneToKMaxReleaseBatchIds) {
  auto release = [](int ids) {
    return With([&](Message& m) {
      m.mutable_object_release_batch();
      for (int i = 0; i < ids; ++i) m.mutable_object_release_batch()->add_lease_ids(uint64_t{1} << 63 | i);
    });
  };
  EXPECT_TRUE(release(1).ok());
  EXPECT_TRUE(release(kMaxReleaseBatch).ok());
  EXPECT_EQ(release(0).code(), Code::kProtocolError);
  Status over = release(kMaxReleaseBatch + 1);
  EXPECT_EQ(over.code(), Code::kProtocolError);
  EXPECT_NE(over.message().find("object_release_batch"), std::string::npos) << over.ToString();
}

// Encode stamps the version without copying the message: a message that
// names another version is restamped, and one decoded again is equal.
TEST(ObjectCodec, EncodeStampsTheVersionOfAnyMessage) {
  Message m;
  m.set_request_id(9);
  m.mutable_object_release_batch()->add_lease_ids(5);
  for (uint32_t version : {0u, kWireVersion, kWireVersion + 7}) {
    m.set_version(version);
    Message out;
    ASSERT_TRUE(Decode(Encode(m), &out).ok()) << version;
    EXPECT_EQ(out.version(), kWireVersion);
    EXPECT_EQ(out.request_id(), 9u);
    ASSERT_EQ(out.object_release_batch().lease_ids_size(), 1);
    EXPECT_EQ(out.object_release_batch().lease_ids(0), 5u);
  }
}

ObjectSlabReply GoodSlabReply() {
  ObjectSlabReply r;
  r.set_slab_id(1);
  r.set_device(0);
  r.set_payload_offset(4096 + 256);
  r.set_payload_bytes(2 * 4096);
  r.set_header_offset(64);
  r.set_header_slots(8);
  r.set_first_epoch(5);
  r.set_ring_records(16);
  r.set_page_bytes(4096);
  r.set_store_bytes(4 * 4096);
  r.set_header_page(3);
  for (uint32_t id : {7u, 8u, 9u}) r.add_payload_pages(id);
  return r;
}

TEST(ObjectCodec, SlabMessagesAreRangeChecked) {
  auto fault = [](const Status& s) { return s.code() == Code::kProtocolError; };
  auto request = [](int32_t device, uint64_t bytes, uint32_t slots, uint32_t records) {
    return With([&](Message& m) {
      ObjectSlabRequest* r = m.mutable_object_slab();
      r->set_device(device);
      r->set_payload_bytes(bytes);
      r->set_header_slots(slots);
      r->set_ring_records(records);
    });
  };
  EXPECT_TRUE(request(0, 1 << 20, 64, 256).ok());
  EXPECT_TRUE(IsObjectRequest(Message::kObjectSlab));
  EXPECT_TRUE(IsObjectRequest(Message::kObjectSlabRelease));
  EXPECT_TRUE(IsObjectBody(Message::kObjectSlabReply));
  EXPECT_FALSE(IsObjectRequest(Message::kObjectSlabReply));
  EXPECT_TRUE(fault(request(-1, 1 << 20, 64, 256)));  // a slab names its device
  EXPECT_TRUE(fault(request(static_cast<int32_t>(kMaxDevices), 1 << 20, 64, 256)));
  EXPECT_TRUE(fault(request(0, 0, 64, 256)));
  EXPECT_TRUE(fault(request(0, 1 << 20, 0, 256)));
  EXPECT_TRUE(fault(request(0, 1 << 20, kMaxSlabHeaderSlots + 1, 256)));
  EXPECT_TRUE(fault(request(0, 1 << 20, 64, 0)));
  EXPECT_TRUE(fault(request(0, 1 << 20, 64, 1)));
  EXPECT_TRUE(fault(request(0, 1 << 20, 64, 384)));  // not a power of two
  EXPECT_TRUE(fault(request(0, 1 << 20, 64, kMaxSlabRingRecords * 2)));
  EXPECT_TRUE(With([](Message& m) { m.mutable_object_slab_release()->set_slab_id(3); }).ok());
  EXPECT_TRUE(fault(With([](Message& m) { m.mutable_object_slab_release(); })));

  auto reply = [](auto change) {
    return With([&](Message& m) {
      ObjectSlabReply r = GoodSlabReply();
      change(r);
      *m.mutable_object_slab_reply() = r;
    });
  };
  EXPECT_TRUE(reply([](ObjectSlabReply&) {}).ok());
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_slab_id(0); })));
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_page_bytes(0); })));
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_payload_offset(UINT64_MAX - 10); })));  // overflow
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_payload_bytes(4 * 4096); })));          // past the store
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_header_offset(4 * 4096 - 64); })));
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_header_offset(4096 - 64); })));  // across a page
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_header_slots(UINT32_MAX); })));
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.add_payload_pages(10); })));  // pages disagree with the range
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_ring_records(12); })));
  EXPECT_TRUE(fault(reply([](ObjectSlabReply& r) { r.set_device_uuid(std::string(1, '\x01')); })));
}

TEST(ObjectCodec, RefusesHostilePlansOfTheHostTier) {
  auto plan = [](auto change) {
    return With([&](Message& m) {
      *m.mutable_object_lease_reply()->mutable_plan() = GoodHostPlan();
      change(*m.mutable_object_lease_reply()->mutable_plan());
    });
  };
  auto says = [](const Status& status, const std::string& what) {
    return status.code() == Code::kProtocolError && status.message().find(what) != std::string::npos;
  };
  EXPECT_TRUE(plan([](ObjectPlan&) {}).ok()) << plan([](ObjectPlan&) {}).ToString();
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.set_tier(2); }), "tier 2"));
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.set_tier(0xffffffffu); }), "tier"));
  // A page past the tier, or another than the offset says.
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.mutable_spans(1)->set_page_id(3); }), "out of range"));
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.mutable_spans(1)->set_page_id(7); }), "out of range"));
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.mutable_spans(0)->set_page_id(0); }), "out of range"));
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.mutable_spans(0)->set_offset(0); }), "payload_offset"));
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.set_state(1); }), "not READY"));
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.set_header_offset(64); }), "header"));
  EXPECT_TRUE(says(plan([](ObjectPlan& p) { p.set_write_secret(5); }), "writer"));
  // Host-tier page fds are read-only: a write of them is refused, and so is a tier out of range.
  EXPECT_TRUE(With([](Message& m) {
                m.mutable_object_pages()->set_device(0);
                m.mutable_object_pages()->add_page_ids(1);
                m.mutable_object_pages()->set_tier(1);
              }).ok());
  EXPECT_TRUE(says(With([](Message& m) {
                     m.mutable_object_pages()->set_device(0);
                     m.mutable_object_pages()->add_page_ids(1);
                     m.mutable_object_pages()->set_tier(1);
                     m.mutable_object_pages()->set_write(true);
                     m.mutable_object_pages()->set_plan_key("k");
                   }),
                   "a write of host-tier pages"));
  EXPECT_TRUE(says(With([](Message& m) {
                     m.mutable_object_pages_reply()->set_device(0);
                     m.mutable_object_pages_reply()->add_page_ids(1);
                     m.mutable_object_pages_reply()->set_tier(9);
                   }),
                   "tier 9"));
}

// Reads without a lease: a read entry only on a READY copy in the store,
// and the read table's reply in range.
TEST(ObjectCodec, ReadEntriesAndTheReadTableAreRangeChecked) {
  auto lease_reply = [](auto change) {
    return With([&](Message& m) {
      ObjectPlan& p = *m.mutable_object_lease_reply()->mutable_plan();
      p = GoodPlan();
      p.set_state(static_cast<uint32_t>(nanokv::ObjectState::kReady));
      p.set_read_entry(3);
      change(p);
    });
  };
  EXPECT_TRUE(lease_reply([](ObjectPlan&) {}).ok()) << lease_reply([](ObjectPlan&) {}).ToString();
  EXPECT_EQ(
      lease_reply([](ObjectPlan& p) { p.set_state(static_cast<uint32_t>(nanokv::ObjectState::kWriting)); }).code(),
      Code::kProtocolError);
  EXPECT_FALSE(With([](Message& m) {
                 ObjectPlan& p = *m.mutable_object_lease_reply()->mutable_plan();
                 p = GoodHostPlan();
                 p.set_read_entry(1);
               }).ok());
  EXPECT_TRUE(With([](Message& m) { m.mutable_object_read_table(); }).ok());
  auto table = [](uint32_t entries, std::vector<int32_t> devices) {
    return With([&](Message& m) {
      m.mutable_object_read_table_reply()->set_entries(entries);
      for (int32_t d : devices) m.mutable_object_read_table_reply()->add_devices(d);
    });
  };
  EXPECT_TRUE(table(32768, {0, 1}).ok());
  EXPECT_EQ(table(0, {0}).code(), Code::kProtocolError);
  EXPECT_EQ(table(kMaxReadTableEntries + 1, {0}).code(), Code::kProtocolError);
  EXPECT_EQ(table(16, {}).code(), Code::kProtocolError);
  EXPECT_EQ(table(16, {-1}).code(), Code::kProtocolError);
  EXPECT_EQ(table(16, std::vector<int32_t>(kMaxObjectInfoDevices + 1, 0)).code(), Code::kProtocolError);
  EXPECT_TRUE(IsObjectRequest(Message::kObjectReadTable));
  EXPECT_TRUE(IsObjectBody(Message::kObjectReadTableReply));
  EXPECT_FALSE(IsObjectRequest(Message::kObjectReadTableReply));
}

// An info reply's slab list: bounded, and each slab's figures consistent.
TEST(ObjectCodec, InfoReplySlabsAreRangeChecked) {
  auto info = [](auto change) {
    return With([&](Message& m) {
      ObjectStoreDevice* d = m.mutable_object_info_reply()->add_devices();
      d->set_device(0);
      d->set_store_bytes(64 << 20);
      d->set_slabs(1);
      ObjectSlabEntry* slab = d->add_slab_list();
      slab->set_slab_id(1);
      slab->set_payload_bytes(4 << 20);
      slab->set_unannounced_bytes(1 << 20);
      slab->set_header_slots(128);
      slab->set_slots_taken(5);
      change(*d);
    });
  };
  EXPECT_TRUE(info([](ObjectStoreDevice&) {}).ok());
  EXPECT_EQ(info([](ObjectStoreDevice& d) { d.set_slabs(0); }).code(), Code::kProtocolError);
  EXPECT_EQ(info([](ObjectStoreDevice& d) { d.mutable_slab_list(0)->set_unannounced_bytes(5 << 20); }).code(),
            Code::kProtocolError);
  EXPECT_EQ(info([](ObjectStoreDevice& d) { d.mutable_slab_list(0)->set_payload_bytes(65 << 20); }).code(),
            Code::kProtocolError);
  EXPECT_EQ(info([](ObjectStoreDevice& d) { d.mutable_slab_list(0)->set_slots_taken(129); }).code(),
            Code::kProtocolError);
  EXPECT_EQ(info([](ObjectStoreDevice& d) {
              d.set_slabs(100);
              for (int i = 0; i < kMaxObjectInfoSlabs; ++i) *d.add_slab_list() = d.slab_list(0);
            }).code(),
            Code::kProtocolError);
}

}  // namespace
}  // namespace nanokv::wire
