// MisbehavingKvd: a scripted kvd that exists ONLY to inject faults the real
// kvd never sends: replies whose fd count does not match their pages, a page
// without an fd the client never imported, replies to requests nobody made,
// surplus fds, a new generation of a page without the forget that must come
// first, a kvd that answers after the client gave up, a socket closed in
// the middle of a request, and a kvd of another wire version. Normal behaviour is tested against the real kvd,
// run in-process (in_process_kvd.h); do not add a test of it here.
//
// It speaks the wire protocol on a real socket with real page fds (host
// backend) and tracks which (page, generation) the client has imported the
// way kvd does, so the fault is the only thing that differs; a hook may take
// over any request.
#ifndef NANOKV_TESTS_UNIT_CLIENT_MISBEHAVING_KVD_H_
#define NANOKV_TESTS_UNIT_CLIENT_MISBEHAVING_KVD_H_

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/naming.h"
#include "ipc/uds/channel.h"
#include "ipc/uds/fd_passing.h"
#include "ipc/wire/codec.h"
#include "gpu/backend.h"
#include "nanokv/client.h"
#include "tests/unit/client/client_test_util.h"

namespace nanokv::testing {

class MisbehavingKvd {
 public:
  static constexpr size_t kPageBytes = 2u << 20;

  // Return true when the request was handled (or is to be ignored).
  using Hook = std::function<bool(const wire::Message& request)>;

  // Serves one connection at ipc::SocketPath(ipc_name) on a thread.
  MisbehavingKvd(const std::string& ipc_name, uint32_t pages)
      : backend_(gpu::MakeHostBackend()), pages_(pages) {
    auto listener = ipc::Listener::Bind(ipc::SocketPath(ipc_name), 0600);
    bind_status_ = listener.status();
    if (listener.ok()) listener_ = std::move(*listener);
    thread_ = std::thread([this] { Serve(); });
  }

  ~MisbehavingKvd() {
    stop_ = true;
    Close();
    thread_.join();
    for (auto& page : pages_) {
      if (page.handle.valid()) (void)backend_->ReleasePage(page.handle);
    }
  }

  const Status& bind_status() const { return bind_status_; }

  void SetHook(Hook hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }

  // Sends any message (request_id as set) with fds (kept by the caller).
  void Send(const wire::Message& message, const std::vector<int>& fds = {}) {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (channel_.valid()) (void)channel_.Send(wire::Encode(message), fds);
  }

  // Sends `message` as it is, its version included (wire::Encode sets ours).
  void SendRaw(const wire::Message& message) {
    std::vector<std::byte> bytes(message.ByteSizeLong());
    message.SerializeToArray(bytes.data(), static_cast<int>(bytes.size()));
    std::lock_guard<std::mutex> lock(send_mu_);
    if (channel_.valid()) (void)channel_.Send(bytes);
  }

  // Gives a free page a new physical page (generation + 1) and, unlike kvd,
  // does NOT tell the client to forget the old one first.
  void RecycleWithoutForget(uint32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    Page& page = pages_[id];
    if (page.handle.valid()) (void)backend_->ReleasePage(page.handle);
    page.handle = *backend_->CreatePage(0, kPageBytes);
    ++page.generation;
  }

  // Closes the connection (kvd crashed).
  void Close() {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (channel_.valid()) shutdown(channel_.fd(), SHUT_RDWR);
  }

  uint32_t held_pages() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t n = 0;
    for (const auto& page : pages_) n += page.holds;
    return n;
  }
  int returns() const { return returns_; }

  // Sends the grant reply datagrams for `ids` the way kvd does (at most
  // kMaxFdsPerMessage fds each, an fd only for what the client lacks).
  void SendGrant(uint64_t request_id, const std::vector<uint32_t>& ids) {
    std::vector<wire::Message> replies;
    std::vector<std::vector<int>> fds;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t i = 0;
      do {
        wire::Message reply;
        reply.set_request_id(request_id);
        reply.mutable_grant_reply()->set_device(0);
        std::vector<int> batch;
        while (i < ids.size()) {
          Page& page = pages_[ids[i]];
          auto it = imported_.find(ids[i]);
          bool needs_fd = it == imported_.end() || it->second != page.generation;
          if (needs_fd && batch.size() == ipc::kMaxFdsPerMessage) break;
          wire::PageGrant* g = reply.mutable_grant_reply()->add_pages();
          g->set_page_id(ids[i]);
          g->set_generation(page.generation);
          g->set_fd_attached(needs_fd);
          if (needs_fd) {
            batch.push_back(*backend_->ExportPage(page.handle));
            imported_[ids[i]] = page.generation;
          }
          ++i;
        }
        reply.mutable_grant_reply()->set_more(i < ids.size());
        replies.push_back(reply);
        fds.push_back(std::move(batch));
      } while (i < ids.size());
    }
    for (size_t r = 0; r < replies.size(); ++r) {
      Send(replies[r], fds[r]);
      for (int fd : fds[r]) close(fd);
    }
  }

  // Takes `count` free pages (creating them on first use); none if too few.
  std::vector<uint32_t> Take(uint32_t count) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint32_t> ids;
    for (uint32_t id = 0; id < pages_.size() && ids.size() < count; ++id) {
      if (pages_[id].holds == 0) ids.push_back(id);
    }
    if (ids.size() < count) return {};
    for (uint32_t id : ids) {
      Page& page = pages_[id];
      if (!page.handle.valid()) page.handle = *backend_->CreatePage(0, kPageBytes);
      ++page.holds;
    }
    return ids;
  }

 private:
  struct Page {
    gpu::PageHandle handle;
    uint32_t generation = 0;
    uint32_t holds = 0;
  };

  void Serve() {
    if (!bind_status_.ok()) return;
    pollfd ready{listener_.fd(), POLLIN, 0};
    while (!stop_ && poll(&ready, 1, 50) <= 0) {
    }
    if (stop_) return;
    auto accepted = listener_.Accept();
    if (!accepted.ok() || !accepted->has_value()) return;
    {
      std::lock_guard<std::mutex> lock(send_mu_);
      channel_ = std::move(**accepted);
      (void)channel_.SetNonBlocking(false);
    }
    std::vector<std::byte> data;
    std::vector<int> fds;
    for (;;) {
      fds.clear();
      auto received = channel_.Receive(&data, &fds);
      for (int fd : fds) close(fd);
      if (!received.ok() || *received != ipc::Channel::Received::kMessage) break;
      wire::Message request;
      if (!wire::Decode(data, &request).ok()) break;
      Hook hook;
      {
        std::lock_guard<std::mutex> lock(mu_);
        hook = hook_;
      }
      if (hook && hook(request)) continue;
      Handle(request);
    }
  }

  // The well-behaved answers, so a test reaches its fault: attach, grant,
  // return and detach, as kvd gives them.
  void Handle(const wire::Message& request) {
    wire::Message reply;
    reply.set_request_id(request.request_id());
    switch (request.body_case()) {
      case wire::Message::kAttach: {
        wire::AttachReply* r = reply.mutable_attach_reply();
        r->set_tenant_id(1);
        r->set_segment_name("nanokv_misbehaving");
        r->set_backend("host");
        r->set_limit_bytes(uint64_t{pages_.size()} * kPageBytes);
        wire::DeviceGeometry* g = r->add_devices();
        g->set_device(0);
        g->set_page_bytes(kPageBytes);
        g->set_capacity_pages(static_cast<uint32_t>(pages_.size()));
        break;
      }
      case wire::Message::kGrant: {
        std::vector<uint32_t> ids = Take(request.grant().pages());
        if (ids.empty()) {
          reply = wire::ErrorReply(request.request_id(),
                                   Status::ResourceExhausted("misbehaving kvd: no pages"));
          break;
        }
        SendGrant(request.request_id(), ids);
        return;
      }
      case wire::Message::kReturnPages: {
        std::lock_guard<std::mutex> lock(mu_);
        for (uint32_t id : request.return_pages().page_ids()) {
          if (id < pages_.size() && pages_[id].holds > 0) --pages_[id].holds;
        }
        ++returns_;
        reply.mutable_return_reply()->set_returned(
            static_cast<uint32_t>(request.return_pages().page_ids_size()));
        break;
      }
      case wire::Message::kDetach:
        reply.mutable_detach_reply();
        break;
      case wire::Message::kForgetDone:
        return;  // kvd answers it with nothing
      default:
        reply = wire::ErrorReply(request.request_id(),
                                 Status::ProtocolError("misbehaving kvd: unexpected request"));
        break;
    }
    Send(reply);
  }

  std::unique_ptr<gpu::Backend> backend_;
  Status bind_status_;
  ipc::Listener listener_;
  std::mutex send_mu_;
  ipc::Channel channel_;  // guarded by send_mu_ for sends; read by the server thread
  mutable std::mutex mu_;
  std::vector<Page> pages_;                  // by page id, one device
  std::map<uint32_t, uint32_t> imported_;    // the client's, as kvd tracks it
  Hook hook_;
  std::atomic<bool> stop_{false};
  std::atomic<int> returns_{0};
  std::thread thread_;
};

// A test with its own socket directory and, after Start, a misbehaving kvd
// and a client attached to it.
class MisbehavingKvdTest : public ::testing::Test {
 protected:
  static constexpr size_t kPage = MisbehavingKvd::kPageBytes;

  void TearDown() override { kvd_.reset(); }

  std::unique_ptr<Client> Start(uint32_t pages = 16, ClientOptions options = {}) {
    std::string ipc_name = UniqueIpcName("misbehaving");
    kvd_ = std::make_unique<MisbehavingKvd>(ipc_name, pages);
    EXPECT_TRUE(kvd_->bind_status().ok()) << kvd_->bind_status().ToString();
    options.ipc_name = ipc_name;
    if (options.tenant.empty()) options.tenant = "test-engine";
    auto client = Client::Attach(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  ScopedRunDir run_dir_;
  std::unique_ptr<MisbehavingKvd> kvd_;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_CLIENT_MISBEHAVING_KVD_H_
