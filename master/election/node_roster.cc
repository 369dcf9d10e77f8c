#include "master/election/node_roster.h"

#include <spdlog/spdlog.h>

namespace nanokv::master {
namespace {

using etcd::Clock;
constexpr std::chrono::milliseconds kCallTimeout{1000};
constexpr std::chrono::milliseconds kRetryAfter{200};

}  // namespace

Result<std::unique_ptr<NodeRoster>> NodeRoster::Start(etcd::EtcdOptions options, std::string prefix) {
  if (prefix.empty() || prefix.back() != '/') {
    return Status::InvalidArgument("node roster: prefix '" + prefix + "' must end in '/'");
  }
  options.dial_timeout = std::chrono::milliseconds(0);  // etcd may come up later
  NANOKV_ASSIGN_OR_RETURN(auto client, etcd::EtcdClient::Connect(options));
  std::unique_ptr<NodeRoster> roster(new NodeRoster(std::move(client), std::move(prefix)));
  roster->thread_ = std::thread([r = roster.get()] { r->Run(); });
  return roster;
}

NodeRoster::NodeRoster(std::unique_ptr<etcd::EtcdClient> client, std::string prefix)
    : client_(std::move(client)), prefix_(std::move(prefix)) {}

NodeRoster::~NodeRoster() { Stop(); }

void NodeRoster::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::vector<std::string>> NodeRoster::Read(etcd::Deadline deadline) {
  NANOKV_ASSIGN_OR_RETURN(etcd::RangeResult range, client_->Range(etcd::RangeSpec::Prefix(prefix_), deadline));
  std::vector<std::string> ids;
  for (const etcd::KeyValue& kv : range.kvs) ids.push_back(kv.key.substr(prefix_.size()));
  return ids;
}

void NodeRoster::Want(const std::string& node_id, bool present) {
  {
    std::lock_guard lock(mu_);
    wanted_[node_id] = present;
  }
  wake_.notify_all();
}

bool NodeRoster::Flush(etcd::Deadline deadline) {
  std::unique_lock lock(mu_);
  return flushed_.wait_until(lock, deadline, [&] { return wanted_.empty() && writing_ == 0; });
}

void NodeRoster::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !wanted_.empty(); });
    if (stopping_) return;
    std::map<std::string, bool> batch;
    batch.swap(wanted_);
    writing_ = batch.size();
    lock.unlock();
    std::map<std::string, bool> failed;
    for (const auto& [id, present] : batch) {
      const etcd::Deadline deadline = Clock::now() + kCallTimeout;
      Status done = present ? client_->Put(prefix_ + id, "", 0, deadline).status()
                            : client_->Delete(prefix_ + id, "", deadline).status();
      if (!done.ok()) {
        spdlog::debug("node roster: {} {}: {}; trying again", present ? "adding" : "removing", id, done.ToString());
        failed.emplace(id, present);
      }
    }
    lock.lock();
    for (const auto& wish : failed) wanted_.emplace(wish);  // a newer wish for that node wins
    writing_ = 0;
    flushed_.notify_all();
    if (!failed.empty()) wake_.wait_for(lock, kRetryAfter, [&] { return stopping_; });
  }
}

}  // namespace nanokv::master
