// Writes the seed corpus of fuzz_wire_decode: one valid encoded message of
// each body kind, into the directory given (fuzz/corpus/wire). The output is
// committed; run it again after a change to ipc/proto/nanokv.proto.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ipc/wire/codec.h"

namespace {

using namespace nanokv::wire;

bool Write(const std::string& dir, const std::string& name, Message message) {
  std::vector<std::byte> bytes = Encode(std::move(message));
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  std::vector<std::pair<std::string, Message>> seeds;
  auto add = [&](const std::string& name) -> Message& {
    seeds.emplace_back(name, Message());
    seeds.back().second.set_request_id(seeds.size());
    return seeds.back().second;
  };
  {
    AttachRequest* a = add("attach").mutable_attach();
    a->set_tenant("engine-a");
    a->set_group("team-a");
    a->add_devices(0);
    a->add_devices(1);
    a->set_limit_bytes(96u << 20);
  }
  add("attach_fraction").mutable_attach()->set_tenant("engine-b"), seeds.back().second.mutable_attach()->set_limit_fraction(0.5);
  {
    AttachReply* r = add("attach_reply").mutable_attach_reply();
    r->set_tenant_id(3);
    r->set_segment_name("/nanokv_demo");
    r->set_backend("host");
    r->set_limit_bytes(1u << 30);
    DeviceGeometry* g = r->add_devices();
    g->set_device(0);
    g->set_page_bytes(2u << 20);
    g->set_capacity_pages(128);
  }
  {
    GrantRequest* g = add("grant").mutable_grant();
    g->set_device(1);
    g->set_pages(8);
  }
  {
    GrantReply* g = add("grant_reply").mutable_grant_reply();
    g->set_device(0);
    for (uint32_t i = 0; i < 3; ++i) {
      PageGrant* p = g->add_pages();
      p->set_page_id(i);
      p->set_generation(1);
      p->set_fd_attached(true);
    }
    g->set_more(true);
  }
  {
    // A restart's hand-back by id and generation alone (no fds), and one
    // page of an older engine's that comes with its fd.
    AdoptRequest* a = add("adopt").mutable_adopt();
    a->set_device(0);
    for (uint32_t i = 0; i < 3; ++i) {
      PageGrant* p = a->add_pages();
      p->set_page_id(i);
      p->set_generation(2);
      p->set_fd_attached(i == 2);
    }
  }
  {
    DevicePages* s = add("share").mutable_share();
    s->set_device(0);
    s->add_page_ids(4);
    s->add_page_ids(5);
  }
  {
    DevicePages* r = add("return_pages").mutable_return_pages();
    r->set_device(0);
    r->add_page_ids(1);
    r->add_page_ids(2);
  }
  add("return_reply").mutable_return_reply()->set_returned(2);
  {
    SetLimitRequest* s = add("set_limit").mutable_set_limit();
    s->set_tenant("engine-a");
    s->set_limit_bytes(64u << 20);
  }
  {
    SetLimitReply* s = add("set_limit_reply").mutable_set_limit_reply();
    s->set_limit_bytes(64u << 20);
    s->set_used_bytes(32u << 20);
  }
  {
    EvictRequest* e = add("evict").mutable_evict();
    e->set_tenant("engine-a");
    e->set_bytes(4u << 20);
  }
  {
    EvictReply* e = add("evict_reply").mutable_evict_reply();
    e->set_pages_requested(2);
    e->set_used_bytes(8u << 20);
  }
  add("detach").mutable_detach();
  add("detach_reply").mutable_detach_reply();
  {
    ReclaimRequest* r = add("reclaim").mutable_reclaim();
    r->set_device(-1);
    r->set_pages(4);
    r->set_limit_bytes(16u << 20);
  }
  {
    ForgetPages* f = add("forget").mutable_forget();
    f->set_device(0);
    f->add_page_ids(7);
  }
  {
    DevicePages* f = add("forget_done").mutable_forget_done();
    f->set_device(0);
    f->add_page_ids(7);
  }
  {
    ReserveReport* r = add("reserve_report").mutable_reserve_report();
    r->set_device(0);
    r->set_reserve_bytes(8u << 20);
  }
  add("ring_setup").mutable_ring_setup();
  {
    RingSetupReply* r = add("ring_setup_reply").mutable_ring_setup_reply();
    r->set_ring_version(1);
    r->set_ring_bytes(135168);
  }
  add("shutdown").mutable_shutdown()->set_reason("kvd stopping");
  {
    Error* e = add("error").mutable_error();
    e->set_code(5);
    e->set_message("grant: out of memory");
  }
  {
    Error* e = add("error_retry_after_forget").mutable_error();
    e->set_code(5);
    e->set_message("device 0 is full: 1 of its 8 pages are held after recycle");
    e->set_retry_after_forget(true);
  }
  {
    ObjectSlabRequest* r = add("object_slab").mutable_object_slab();
    r->set_device(0);
    r->set_payload_bytes(64u << 20);
    r->set_header_slots(1024);
    r->set_ring_records(256);
  }
  {
    ObjectSlabReply* r = add("object_slab_reply").mutable_object_slab_reply();
    r->set_slab_id(1);
    r->set_payload_offset(2u << 20);
    r->set_payload_bytes(2u << 20);
    r->set_header_offset(0);
    r->set_header_slots(1024);
    r->set_first_epoch(7);
    r->set_ring_records(256);
    r->set_ttl_ms(60000);
    r->set_page_bytes(2u << 20);
    r->set_store_bytes(8u << 20);
    r->set_header_page(3);
    r->add_payload_pages(4);
  }
  add("object_slab_release").mutable_object_slab_release()->set_slab_id(1);
  for (auto& [name, message] : seeds) {
    if (!Write(dir, name, std::move(message))) {
      std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
      return 1;
    }
  }
  std::printf("%zu seeds in %s\n", seeds.size(), dir.c_str());
  return 0;
}
