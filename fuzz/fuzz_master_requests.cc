// libFuzzer target: the cluster master's request decoding and handling. The
// first byte picks what the rest is: a request of an engine or tool (open,
// commit, revoke, remove, locate), a message of a node's session, or a whole
// session of a peer (its register, then messages, each 2 bytes of length and
// its bytes, then its end). Each is parsed as the gRPC service would get it
// and handed to the real ClusterMaster, which has two nodes registered
// through loopback links that answer every order at once (plans that pass
// the plan checks, or a refusal). The master must never crash, must answer
// every item of a batch, and its index must keep its invariants; a peer's
// session must not take a live node's id, nor hold more than the object
// limit, and must leave no copy behind.
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "ipc/master/master_checks.h"
#include "nanokv/object_header.h"
#include "master/service/cluster_master.h"

namespace {

using namespace nanokv;
using namespace nanokv::master;

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_master_requests: %s\n", what);
  std::abort();
}

// A node that carries out every order at once: a plan of 64 KiB pages for an
// open of at most 1 MiB, a refusal for a larger one; OK for the others.
class LoopbackNode : public NodeLink {
 public:
  ClusterMaster* master = nullptr;
  SessionRef session;
  uint32_t next_epoch = 1;
  void Send(v1::MasterMessage message) override {
    if (!message.has_instruction() || master == nullptr) return;
    const v1::Instruction& in = message.instruction();
    v1::NodeMessage out;
    v1::InstructionReply* reply = out.mutable_reply();
    reply->set_request_id(in.request_id());
    if (in.has_open()) {
      for (const v1::PlanOrder& o : in.open().orders()) {
        if (o.bytes_total() > (1u << 20)) {
          reply->add_statuses()->set_code(static_cast<uint32_t>(Code::kResourceExhausted));
          continue;
        }
        reply->add_statuses()->set_code(0);
        wire::ObjectPlan* p = reply->add_plans();
        const uint64_t page = 64 << 10;
        p->set_device(o.device());
        p->set_page_bytes(page);
        p->set_header_offset(0);
        p->set_payload_offset(page);
        uint64_t left = o.bytes_total();
        while (left > 0) {
          wire::ObjectSpan* s = p->add_spans();
          s->set_length(static_cast<uint32_t>(left < page ? left : page));
          left -= s->length();
        }
        p->set_n_pages(static_cast<uint32_t>(p->spans_size()));
        p->set_bytes_total(o.bytes_total());
        p->set_store_bytes(page * 20);
        p->set_epoch(next_epoch++);
        p->set_state(static_cast<uint32_t>(ObjectState::kWriting));
      }
    } else {
      int n = in.has_commit() ? in.commit().orders_size() : in.has_revoke() ? in.revoke().orders_size()
                                                                             : in.remove().orders_size();
      for (int i = 0; i < n; ++i) reply->add_statuses()->set_code(0);
    }
    if (!master->OnNodeMessage(session, out).ok()) Fail("the master refused a well-formed reply");
  }
  void Close(const Status&) override {}
};

// The limit of objects per node in the fuzzed master: low, so that
// sessions meet it.
constexpr uint64_t kObjectLimit = 256;

struct World {
  std::unique_ptr<SoleLeadership> leadership;
  std::unique_ptr<ClusterMaster> master;
  std::shared_ptr<LoopbackNode> nodes[2];
};

World& TheWorld() {
  static World* world = [] {
    auto* w = new World();
    w->leadership = std::make_unique<SoleLeadership>("fuzz", "127.0.0.1:1", 1);
    ClusterMasterOptions options;
    options.id = "fuzz";
    options.rebuild_window = std::chrono::milliseconds(0);
    options.max_objects_per_node = kObjectLimit;
    w->master = std::make_unique<ClusterMaster>(options, *w->leadership);
    (void)w->leadership->Start([m = w->master.get()](bool l, const LeaderRecord& r) { m->OnLeadership(l, r); });
    for (int i = 0; i < 2; ++i) {
      auto node = std::make_shared<LoopbackNode>();
      node->master = w->master.get();
      v1::RegisterNode r;
      r.set_node_id("n" + std::to_string(i));
      v1::DeviceReport* d = r.add_devices();
      d->set_device(0);
      d->set_capacity_bytes(64 << 20);
      d->set_high_watermark(0.95);
      d->set_low_watermark(0.85);
      auto session = w->master->OpenSession(r, node, "loopback");
      if (!session.ok()) Fail("the loopback node could not register");
      node->session = *session;
      v1::NodeMessage done;
      done.mutable_events()->set_snapshot_done(true);
      (void)w->master->OnNodeMessage(*session, done);
      w->nodes[i] = node;
    }
    return w;
  }();
  return *world;
}

// Takes the next message of a session: 2 bytes of length, then its bytes.
bool NextMessage(const uint8_t** data, size_t* size, v1::NodeMessage* out) {
  if (*size < 2) return false;
  const size_t length = std::min<size_t>(*size - 2, static_cast<size_t>((*data)[0] | ((*data)[1] << 8)));
  const bool parsed = out->ParseFromArray(*data + 2, static_cast<int>(length));
  *data += 2 + length;
  *size -= 2 + length;
  return parsed;
}

// A peer's whole session, as NodeStream runs it: register, then each
// message checked and handled until one is refused, then the end.
void RunSession(World& world, const uint8_t* data, size_t size) {
  ClusterMaster& master = *world.master;
  v1::NodeMessage hello;
  if (!NextMessage(&data, &size, &hello) || !hello.has_register_() || !CheckNodeMessage(hello).ok()) return;
  auto peer = std::make_shared<LoopbackNode>();
  peer->master = &master;
  auto session = master.OpenSession(hello.register_(), peer, "fuzz");
  const std::string& id = hello.register_().node_id();
  if (id == "n0" || id == "n1") {
    if (session.ok()) Fail("a session took the id of a live node");
    return;
  }
  if (!session.ok()) return;
  peer->session = *session;
  for (int n = 0; n < 64; ++n) {
    v1::NodeMessage message;
    if (!NextMessage(&data, &size, &message)) break;
    if (!CheckNodeMessage(message).ok() || !master.OnNodeMessage(*session, message).ok()) break;
    if (master.index().copies_of(session->node) > kObjectLimit) Fail("a session holds more than the object limit");
  }
  master.CloseSession(*session, Status::Unavailable("the fuzzed session ends"));
  if (master.index().copies_of(session->node) != 0) Fail("a session that ended left copies in the index");
  if (!master.nodes().IsAlive("n0") || !master.nodes().IsAlive("n1")) Fail("a peer's session ended a live node's");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  World& world = TheWorld();
  ClusterMaster& master = *world.master;
  const uint8_t kind = data[0] % 7;
  const void* body = data + 1;
  const int length = static_cast<int>(size - 1);
  size_t answered = 0, asked = 0;
  switch (kind) {
    case 0: {
      v1::OpenRequest request;
      if (!request.ParseFromArray(body, length) || !CheckBatchSize(request.items_size(), "open").ok()) return 0;
      asked = static_cast<size_t>(request.items_size());
      master.Open(request, [&](v1::OpenReply reply) { answered = static_cast<size_t>(reply.results_size()); });
      break;
    }
    case 1:
    case 2: {
      v1::FinishRequest request;
      if (!request.ParseFromArray(body, length) || !CheckBatchSize(request.items_size(), "commit").ok()) return 0;
      asked = static_cast<size_t>(request.items_size());
      master.Finish(request, kind == 1, [&](v1::AckReply reply) { answered = static_cast<size_t>(reply.results_size()); });
      break;
    }
    case 3:
    case 4: {
      v1::KeysRequest request;
      if (!request.ParseFromArray(body, length) || !CheckBatchSize(request.keys_size(), "keys").ok() ||
          !CheckKeysRequest(request).ok()) {
        return 0;
      }
      asked = static_cast<size_t>(request.keys_size());
      if (kind == 3) {
        master.Remove(request, [&](v1::AckReply reply) { answered = static_cast<size_t>(reply.results_size()); });
      } else {
        answered = static_cast<size_t>(master.Locate(request).results_size());
      }
      break;
    }
    case 6:
      RunSession(world, data + 1, size - 1);
      break;
    default: {
      // A node's message, as its session would hand it over once checked.
      v1::NodeMessage message;
      if (!message.ParseFromArray(body, length) || !CheckNodeMessage(message).ok()) return 0;
      if (message.has_register_()) return 0;  // a second register ends the session: not this target's
      (void)master.OnNodeMessage(world.nodes[data[1 % size] & 1]->session, message);
      break;
    }
  }
  if (answered != asked) Fail("a batch was not answered item for item");
  Status invariants = master.index().CheckInvariants();
  if (!invariants.ok()) {
    std::fprintf(stderr, "%s\n", invariants.ToString().c_str());
    Fail("the index broke an invariant");
  }
  return 0;
}
