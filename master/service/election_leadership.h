// Leadership through etcd: the adapter of LeaderElection (master/election/)
// to the master's Leadership seam. The master's term is the election's
// (the create_revision of its candidate key), so terms grow from leader to
// leader and nodes refuse a deposed one.
#ifndef NANOKV_MASTER_SERVICE_ELECTION_LEADERSHIP_H_
#define NANOKV_MASTER_SERVICE_ELECTION_LEADERSHIP_H_

#include <atomic>
#include <memory>
#include <optional>
#include <utility>

#include "master/election/leader_election.h"
#include "master/service/leadership.h"

namespace nanokv::master {

class ElectionLeadership : public Leadership {
 public:
  // `options.address` may still change (set_address) until Start.
  explicit ElectionLeadership(ElectionOptions options) : options_(std::move(options)) {}
  ~ElectionLeadership() override { Stop(); }

  void set_address(std::string address) { options_.address = std::move(address); }

  Status Start(OnChange on_change) override {
    auto election = LeaderElection::Start(options_, [on_change = std::move(on_change)](bool leads,
                                                                                     const LeaderInfo& info) {
      if (on_change) on_change(leads, Record(info));
    });
    if (!election.ok()) return election.status();
    owned_ = std::move(election).value();
    election_.store(owned_.get(), std::memory_order_release);
    return Status::OK();
  }
  bool IsLeader() const override {
    const LeaderElection* e = election_.load(std::memory_order_acquire);
    return e != nullptr && e->IsLeader();
  }
  uint64_t term() const override {
    const LeaderElection* e = election_.load(std::memory_order_acquire);
    return e != nullptr ? e->term() : 0;
  }
  std::optional<LeaderRecord> Leader() const override {
    const LeaderElection* e = election_.load(std::memory_order_acquire);
    std::optional<LeaderInfo> leader = e != nullptr ? e->Leader() : std::nullopt;
    if (!leader) return std::nullopt;
    return Record(*leader);
  }
  void Stop() override {
    if (owned_ != nullptr) owned_->Stop();
  }

 private:
  static LeaderRecord Record(const LeaderInfo& info) { return {info.id, info.address, info.term}; }

  ElectionOptions options_;
  std::unique_ptr<LeaderElection> owned_;
  // Published once started: the service's threads ask before Start ends.
  std::atomic<const LeaderElection*> election_{nullptr};
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_ELECTION_LEADERSHIP_H_
