// Who may write a slab's pages (issue 34), through a real kvd and raw
// requests: a grant carries no page fds; kvd lends the write fds of a
// slab's header page and payload pages to its producer only, naming the
// slab, while it lives, and no page of another slab through it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ipc/uds/channel.h"
#include "ipc/wire/codec.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/raw_object_requests.h"
#include "tests/util/other_user.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

class KvdSlabAccessTest : public KvdFixture {
 protected:
  void StartWithStore(const std::string& extra_yaml = "") {
    StartKvd(32, {"--config", WriteConfig("object_store:\n  size: 16MiB\n" + extra_yaml)});
  }
};

// A slab of `bytes` on device 0; its fds (the ring's) closed.
Result<wire::ObjectSlabReply> GrantRaw(ipc::Channel& channel, uint64_t rid, uint64_t bytes = 1u << 20) {
  wire::Message m;
  m.set_request_id(rid);
  wire::ObjectSlabRequest* r = m.mutable_object_slab();
  r->set_device(0);
  r->set_payload_bytes(bytes);
  r->set_header_slots(8);
  r->set_ring_records(8);
  std::vector<int> fds;
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, Ask(channel, m, &fds));
  for (int fd : fds) close(fd);
  if (reply.has_error()) return ErrorOf(reply);
  if (fds.size() != 1) return Status::Internal("a grant carried " + std::to_string(fds.size()) + " fds");
  return reply.object_slab_reply();
}

// The write fd of `page` asked naming slab `slab_id`: OK when one that
// writes came, else kvd's error.
Status AskSlabPage(ipc::Channel& channel, uint64_t rid, uint32_t page, uint64_t slab_id) {
  wire::Message m = PagesRequest(rid, 0, page, true);
  m.mutable_object_pages()->set_slab_id(slab_id);
  std::vector<int> fds;
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, Ask(channel, m, &fds));
  const bool writes = fds.size() == 1 && (fcntl(fds[0], F_GETFL) & O_ACCMODE) == O_RDWR;
  for (int fd : fds) close(fd);
  if (reply.has_error()) return ErrorOf(reply);
  return writes ? Status::OK() : Status::Internal(std::to_string(fds.size()) + " fds, or one that reads only");
}

TEST_F(KvdSlabAccessTest, ASlabsPagesAreLentToItsProducerWhileItLivesAndNoOtherPage) {
  StartWithStore();
  auto channel = ipc::Channel::Connect(SocketPath());
  ASSERT_OK(channel.status());
  uint64_t rid = 0;
  auto a = GrantRaw(*channel, ++rid);
  ASSERT_OK(a.status());
  auto b = GrantRaw(*channel, ++rid, 4u << 20);
  ASSERT_OK(b.status());
  ASSERT_EQ(a->payload_pages_size(), 1);
  ASSERT_GE(b->payload_pages_size(), 2);
  const uint32_t bs = b->payload_pages(b->payload_pages_size() - 1);  // past a's one page
  ASSERT_NE(a->payload_pages(0), bs);

  EXPECT_OK(AskSlabPage(*channel, ++rid, a->header_page(), a->slab_id()));
  EXPECT_OK(AskSlabPage(*channel, ++rid, a->payload_pages(0), a->slab_id()));
  EXPECT_OK(AskSlabPage(*channel, ++rid, bs, b->slab_id()));
  Status other = AskSlabPage(*channel, ++rid, bs, a->slab_id());
  EXPECT_EQ(other.code(), Code::kPermissionDenied) << other.ToString();
  EXPECT_NE(other.message().find("is not a page of slab " + std::to_string(a->slab_id())), std::string::npos)
      << other.ToString();
  Status unknown = AskSlabPage(*channel, ++rid, a->payload_pages(0), 999);
  EXPECT_NE(unknown.message().find("is lent for no slab 999"), std::string::npos) << unknown.ToString();

  wire::Message release;
  release.set_request_id(++rid);
  release.mutable_object_slab_release()->set_slab_id(a->slab_id());
  std::vector<int> fds;
  auto released = Ask(*channel, release, &fds);
  ASSERT_OK(released.status());
  ASSERT_FALSE(released->has_error()) << released->error().message();
  Status ended = AskSlabPage(*channel, ++rid, a->payload_pages(0), a->slab_id());
  EXPECT_EQ(ended.code(), Code::kPermissionDenied) << ended.ToString();
  EXPECT_TRUE(kvd_.Running());
}

TEST_F(KvdSlabAccessTest, AnotherUidGetsNoWriteFdNamingRootsSlab) {
  if (Backend() != "host") GTEST_SKIP() << "a CUDA fd gives its holder full access (ARCHITECTURE.md)";
  NANOKV_SKIP_UNLESS_ROOT();
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  StartWithStore("socket_mode: \"0666\"\nallowed_uids: [" + std::to_string(kNobody) + "]\n");
  auto channel = ipc::Channel::Connect(SocketPath());
  ASSERT_OK(channel.status());
  auto slab = GrantRaw(*channel, 1);
  ASSERT_OK(slab.status());
  const std::string socket = SocketPath();
  EXPECT_EQ(RunAs(kNobody, kNobody,
                  [&] {
                    auto theirs = ipc::Channel::Connect(socket);
                    if (!theirs.ok()) return 2;
                    Status s = AskSlabPage(*theirs, 1, slab->payload_pages(0), slab->slab_id());
                    if (s.code() != Code::kPermissionDenied) return 3;
                    return s.message().find("is not uid " + std::to_string(kNobody) + "'s") == std::string::npos ? 4
                                                                                                                 : 0;
                  }),
            0)
      << "nobody got a write fd of root's slab page";
  EXPECT_TRUE(kvd_.Running());
}

}  // namespace
}  // namespace nanokv::testing
