// Test support for libkv/client: a scripted kvd and a fixture around it.
//
// FakeKvd: a scripted kvd for the client's tests: it speaks the wire protocol on a
// real socket with real page fds (host backend), tracks which (page,
// generation) the client has imported the way kvd does, and lets a test
// intercept any request or send anything (faults included).
#ifndef NANOKV_TESTS_UNIT_CLIENT_FAKE_KVD_H_
#define NANOKV_TESTS_UNIT_CLIENT_FAKE_KVD_H_

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ipc/naming.h"
#include "ipc/uds/channel.h"
#include "ipc/uds/fd_passing.h"
#include "ipc/wire/codec.h"
#include "libkv/gpu/backend.h"
#include "nanokv/client.h"

namespace nanokv::testing {

class FakeKvd {
 public:
  static constexpr size_t kPageBytes = 2u << 20;

  // Return true when the request was handled (or is to be ignored).
  using Hook = std::function<bool(const wire::Message& request)>;

  FakeKvd(const std::string& ipc_name, uint32_t pages_per_device, int devices = 1)
      : backend_(gpu::MakeHostBackend({.devices = devices})), pages_(devices) {
    for (auto& device : pages_) device.resize(pages_per_device);
    auto listener = ipc::Listener::Bind(ipc::SocketPath(ipc_name), 0600);
    bind_status_ = listener.status();
    if (listener.ok()) listener_ = std::move(*listener);
    thread_ = std::thread([this] { Serve(); });
  }

  ~FakeKvd() {
    stop_ = true;
    Close();
    thread_.join();
    for (auto& device : pages_) {
      for (auto& page : device) {
        if (page.handle.valid()) (void)backend_->ReleasePage(page.handle);
      }
    }
  }

  const Status& bind_status() const { return bind_status_; }
  gpu::Backend& backend() { return *backend_; }

  void SetHook(Hook hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }

  // Sends any message (request_id as set) with fds (kept by the caller).
  void Send(const wire::Message& message, const std::vector<int>& fds = {}) {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (channel_.valid()) (void)channel_.Send(wire::Encode(message), fds);
  }

  void SendNotice(wire::Message message) {
    message.set_request_id(0);
    Send(message);
  }

  // Replaces a free page's physical page (generation + 1) and tells the
  // client to forget the old one, as kvd's Recycle does.
  void Recycle(int device, uint32_t id, bool send_forget = true) {
    std::lock_guard<std::mutex> lock(mu_);
    Page& page = pages_[device][id];
    if (page.handle.valid()) (void)backend_->ReleasePage(page.handle);
    page.handle = *backend_->CreatePage(device, kPageBytes);
    ++page.generation;
    bool had = imported_.erase({device, id}) > 0;
    if (send_forget && had) {
      wire::Message forget;
      forget.mutable_forget()->set_device(device);
      forget.mutable_forget()->add_page_ids(id);
      SendNotice(forget);
    }
  }

  // Closes the connection (kvd crashed).
  void Close() {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (channel_.valid()) shutdown(channel_.fd(), SHUT_RDWR);
  }

  uint32_t held_pages() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t n = 0;
    for (const auto& device : pages_) {
      for (const auto& page : device) n += page.holds;
    }
    return n;
  }
  int fds_sent() const { return fds_sent_; }
  int returns() const { return returns_; }
  std::vector<uint32_t> last_returned() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_returned_;
  }
  bool client_closed() const { return client_closed_; }

  // Builds the grant reply datagrams for `ids` of `device` the way kvd does
  // (at most kMaxFdsPerMessage fds each) and sends them.
  void SendGrant(uint64_t request_id, int device, const std::vector<uint32_t>& ids) {
    std::vector<wire::Message> replies;
    std::vector<std::vector<int>> fds;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t i = 0;
      do {
        wire::Message reply;
        reply.set_request_id(request_id);
        reply.mutable_grant_reply()->set_device(device);
        std::vector<int> batch;
        while (i < ids.size()) {
          Page& page = pages_[device][ids[i]];
          auto it = imported_.find({device, ids[i]});
          bool needs_fd = it == imported_.end() || it->second != page.generation;
          if (needs_fd && batch.size() == ipc::kMaxFdsPerMessage) break;
          wire::PageGrant* g = reply.mutable_grant_reply()->add_pages();
          g->set_page_id(ids[i]);
          g->set_generation(page.generation);
          g->set_fd_attached(needs_fd);
          if (needs_fd) {
            batch.push_back(*backend_->ExportPage(page.handle));
            imported_[{device, ids[i]}] = page.generation;
          }
          ++i;
        }
        reply.mutable_grant_reply()->set_more(i < ids.size());
        replies.push_back(reply);
        fds.push_back(std::move(batch));
      } while (i < ids.size());
    }
    for (size_t r = 0; r < replies.size(); ++r) {
      fds_sent_ += static_cast<int>(fds[r].size());  // before the client can see them
      Send(replies[r], fds[r]);
      for (int fd : fds[r]) close(fd);
    }
  }

  // Takes `count` free pages of `device` (creating them on first use).
  std::vector<uint32_t> Take(int device, uint32_t count) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint32_t> ids;
    for (uint32_t id = 0; id < pages_[device].size() && ids.size() < count; ++id) {
      if (pages_[device][id].holds == 0) ids.push_back(id);
    }
    if (ids.size() < count) return {};
    for (uint32_t id : ids) Hold(device, id);
    return ids;
  }

 private:
  struct Page {
    gpu::PageHandle handle;
    uint32_t generation = 0;
    uint32_t holds = 0;
  };

  // REQUIRES: mu_ held.
  void Hold(int device, uint32_t id) {
    Page& page = pages_[device][id];
    if (!page.handle.valid()) page.handle = *backend_->CreatePage(device, kPageBytes);
    ++page.holds;
  }

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
    client_closed_ = true;
  }

  void Handle(const wire::Message& request) {
    wire::Message reply;
    reply.set_request_id(request.request_id());
    switch (request.body_case()) {
      case wire::Message::kAttach: {
        wire::AttachReply* r = reply.mutable_attach_reply();
        r->set_tenant_id(7);
        r->set_segment_name("nanokv_fake");
        r->set_backend("host");
        r->set_limit_bytes(uint64_t{pages_[0].size()} * kPageBytes);
        for (size_t d = 0; d < pages_.size(); ++d) {
          wire::DeviceGeometry* g = r->add_devices();
          g->set_device(static_cast<int>(d));
          g->set_page_bytes(kPageBytes);
          g->set_capacity_pages(static_cast<uint32_t>(pages_[d].size()));
        }
        break;
      }
      case wire::Message::kGrant: {
        int device = request.grant().device();
        std::vector<uint32_t> ids = Take(device, request.grant().pages());
        if (ids.empty()) {
          reply = wire::ErrorReply(request.request_id(),
                                   Status::ResourceExhausted("fake kvd: no pages"));
          break;
        }
        SendGrant(request.request_id(), device, ids);
        return;
      }
      case wire::Message::kShare: {
        int device = request.share().device();
        std::vector<uint32_t> ids(request.share().page_ids().begin(),
                                  request.share().page_ids().end());
        {
          std::lock_guard<std::mutex> lock(mu_);
          for (uint32_t id : ids) Hold(device, id);
        }
        SendGrant(request.request_id(), device, ids);
        return;
      }
      case wire::Message::kReturnPages: {
        std::lock_guard<std::mutex> lock(mu_);
        int device = request.return_pages().device();
        last_returned_.assign(request.return_pages().page_ids().begin(),
                              request.return_pages().page_ids().end());
        for (uint32_t id : last_returned_) {
          if (pages_[device][id].holds > 0) --pages_[device][id].holds;
        }
        ++returns_;
        reply.mutable_return_reply()->set_returned(static_cast<uint32_t>(last_returned_.size()));
        break;
      }
      case wire::Message::kSetLimit: {
        uint64_t used = uint64_t{held_pages()} * kPageBytes;
        reply.mutable_set_limit_reply()->set_limit_bytes(request.set_limit().limit_bytes());
        reply.mutable_set_limit_reply()->set_used_bytes(used);
        break;
      }
      case wire::Message::kDetach:
        reply.mutable_detach_reply();
        break;
      default:
        reply =
            wire::ErrorReply(request.request_id(), Status::ProtocolError("fake kvd: unexpected"));
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
  std::vector<std::vector<Page>> pages_;
  std::map<std::pair<int, uint32_t>, uint32_t> imported_;  // the client's, as kvd tracks it
  std::vector<uint32_t> last_returned_;
  Hook hook_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> client_closed_{false};
  std::atomic<int> fds_sent_{0};
  std::atomic<int> returns_{0};
  std::thread thread_;
};

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const ::nanokv::Status& s_ = (expr);                    \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)

inline std::vector<uint32_t> Ids(const std::vector<GrantedPage>& pages) {
  std::vector<uint32_t> ids;
  for (const auto& page : pages) ids.push_back(page.id);
  return ids;
}

// A test with its own socket directory and, after Start, a fake kvd and a
// client attached to it.
class FakeKvdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/nanokv-client-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    run_dir_ = dir;
    const char* old = std::getenv("NANOKV_RUN_DIR");
    if (old != nullptr) old_run_dir_ = old;
    setenv("NANOKV_RUN_DIR", run_dir_.c_str(), 1);
  }
  void TearDown() override {
    kvd_.reset();
    if (old_run_dir_) {
      setenv("NANOKV_RUN_DIR", old_run_dir_->c_str(), 1);
    } else {
      unsetenv("NANOKV_RUN_DIR");
    }
    std::filesystem::remove_all(run_dir_);
  }

  // Starts the fake kvd and attaches one client to it.
  std::unique_ptr<Client> Start(uint32_t pages = 16, ClientOptions options = {}, int devices = 1) {
    kvd_ = std::make_unique<FakeKvd>("fake", pages, devices);
    EXPECT_TRUE(kvd_->bind_status().ok()) << kvd_->bind_status().ToString();
    options.ipc_name = "fake";
    if (options.tenant.empty()) options.tenant = "test-engine";
    auto client = Client::Attach(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string run_dir_;
  std::optional<std::string> old_run_dir_;
  std::unique_ptr<FakeKvd> kvd_;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_CLIENT_FAKE_KVD_H_
