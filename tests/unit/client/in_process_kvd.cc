#include "tests/unit/client/in_process_kvd.h"


#include <utility>

#include "base/naming.h"
#include "ipc/uds/channel.h"
#include "base/open_file_limit.h"

namespace nanokv::testing {
const kvd::Tenant* KvdSnapshot::FindTenant(const std::string& name) const {
  for (const kvd::Tenant& tenant : tenants) {
    if (tenant.name == name) return &tenant;
  }
  return nullptr;
}

Result<std::unique_ptr<InProcessKvd>> InProcessKvd::Start(const std::string& ipc_name,
                                                          const InProcessKvdOptions& options) {
  (void)RaiseOpenFileLimit();  // kvd's pages and the engine's imports share this fd table
  // A small device: all of its memory is kvd's capacity.
  const size_t capacity_bytes = size_t{options.pages_per_device} * kPageBytes;
  auto backend = gpu::MakeHostBackend(
      {.devices = options.devices, .granularity = kPageBytes, .device_bytes = capacity_bytes});
  kvd::NodeOptions node_options;
  for (int device = 0; device < options.devices; ++device) {
    kvd::PagePoolConfig pool;
    pool.device = device;
    pool.page_bytes = kPageBytes;
    pool.capacity_bytes = capacity_bytes;
    pool.reserve_pages = options.reserve_pages;
    node_options.pools.push_back(pool);
  }
  node_options.default_limit_bytes = options.default_limit_bytes;
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<kvd::NodeState> node,
                          kvd::NodeState::Create(*backend, node_options));
  NANOKV_ASSIGN_OR_RETURN(ipc::Listener listener,
                          ipc::Listener::Bind(ipc::SocketPath(ipc_name), 0600));

  std::unique_ptr<InProcessKvd> self(
      new InProcessKvd(ipc_name, std::move(backend), std::move(node)));
  kvd::ServerOptions server_options;
  server_options.segment_name = self->segment_name();
  server_options.backend_name = std::string(self->backend_->name());
  self->server_ =
      std::make_unique<kvd::NodeServer>(*self->node_, std::move(listener), server_options);
  InProcessKvd* raw = self.get();
  self->server_->SetPublisher([raw](const kvd::NodeState& state) { raw->Publish(state); });
  self->thread_ = std::thread([raw] {
    Status ran = raw->server_->Run();
    std::lock_guard<std::mutex> lock(raw->mu_);
    raw->run_status_ = ran;
    raw->exited_ = true;
    raw->published_.notify_all();
  });
  // The first loop turn publishes at once: from then on the server serves.
  std::unique_lock<std::mutex> lock(self->mu_);
  bool up = self->published_.wait_for(lock, std::chrono::seconds(10), [raw] {
    return raw->snapshot_.publishes > 0 || raw->exited_;
  });
  if (self->exited_) return self->run_status_;
  if (!up) return Status::Unavailable("the in-process kvd did not start serving in 10 s");
  return self;
}

InProcessKvd::InProcessKvd(std::string ipc_name, std::unique_ptr<gpu::Backend> backend,
                           std::unique_ptr<kvd::NodeState> node)
    : ipc_name_(std::move(ipc_name)), backend_(std::move(backend)), node_(std::move(node)) {}

InProcessKvd::~InProcessKvd() {
  Status stopped = Stop();
  if (!stopped.ok()) ADD_FAILURE() << "kvd's Run(): " << stopped.ToString();
}

Status InProcessKvd::Stop() {
  if (thread_.joinable()) {
    server_->Stop();
    thread_.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  return run_status_;
}

void InProcessKvd::Publish(const kvd::NodeState& node) {
  KvdSnapshot next;
  next.connections = server_->connection_count();  // this is the server's thread
  for (const kvd::Tenant* tenant : node.Tenants()) next.tenants.push_back(*tenant);
  next.devices = node.Counts();
  std::lock_guard<std::mutex> lock(mu_);
  next.publishes = snapshot_.publishes + 1;
  snapshot_ = std::move(next);
  published_.notify_all();
}

KvdSnapshot InProcessKvd::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

bool InProcessKvd::WaitFor(const std::function<bool(const KvdSnapshot&)>& done, uint64_t after,
                           std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto fresh_and_done = [&] { return snapshot_.publishes > after && done(snapshot_); };
  published_.wait_for(lock, timeout, [&] { return exited_ || fresh_and_done(); });
  return fresh_and_done();
}

void InProcessKvdTest::TearDown() {
  if (kvd_ == nullptr) return;
  Status stopped = kvd_->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.ToString();
  // Stopped: the node is ours to read (rule 1). Every engine is gone, so
  // every page it held must be back.
  const kvd::NodeState& node = kvd_->node();
  EXPECT_TRUE(node.Tenants().empty()) << "a tenant outlived kvd's shutdown";
  for (const kvd::DeviceCounts& counts : node.Counts()) {
    EXPECT_EQ(counts.held_pages, 0u) << "device " << counts.device;
    EXPECT_EQ(counts.free_pages, counts.created_pages) << "device " << counts.device;
  }
  EXPECT_TRUE(KvdInvariantsHold());
  EXPECT_EQ(kvd_->snapshot().connections, 0u);
  kvd_.reset();
}

void InProcessKvdTest::StartKvd(const InProcessKvdOptions& options) {
  auto started = InProcessKvd::Start(UniqueIpcName("client"), options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  kvd_ = std::move(*started);
}

Result<std::unique_ptr<Client>> InProcessKvdTest::Attach(ClientOptions options) {
  if (kvd_ == nullptr) return Status::FailedPrecondition("StartKvd first");
  options.ipc_name = kvd_->ipc_name();
  if (options.tenant.empty()) options.tenant = "test-engine";
  return Client::Attach(options);
}

std::unique_ptr<Client> InProcessKvdTest::Start(uint32_t pages, ClientOptions options,
                                                int devices) {
  StartKvd({.devices = devices, .pages_per_device = pages});
  if (kvd_ == nullptr) return nullptr;
  auto client = Attach(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

const kvd::Tenant* InProcessKvdTest::FindTenant(const std::string& name) const {
  return kvd_->node().FindTenantByName(name);
}

uint32_t InProcessKvdTest::UsedPages(const std::string& tenant, int device) const {
  const kvd::Tenant* t = FindTenant(tenant);
  EXPECT_NE(t, nullptr) << "kvd knows no tenant '" << tenant << "'";
  return t != nullptr ? t->used_pages.at(device) : 0;
}

kvd::DeviceCounts InProcessKvdTest::Counts(int device) const {
  return kvd_->node().Counts().at(device);
}

::testing::AssertionResult InProcessKvdTest::KvdInvariantsHold() const {
  Status checked = kvd_->node().CheckInvariants();
  if (checked.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << checked.ToString();
}

}  // namespace nanokv::testing
