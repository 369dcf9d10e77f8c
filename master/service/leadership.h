// The seam where the master learns whether it leads: one small interface the
// master asks (IsLeader, term, Leader) and is told of changes by. A master
// alone leads from its start at a fixed term (SoleLeadership, configs/
// master.yaml's `term`); several masters elect one through etcd
// (master/election/, an adapter of LeaderElection to this interface).
//
// The term rule: every message a master sends a node carries its term, and a
// kvd refuses one older than the highest it has followed, so a deposed
// master that still runs cannot route a plan (docs/ARCHITECTURE.md).
#ifndef NANOKV_MASTER_SERVICE_LEADERSHIP_H_
#define NANOKV_MASTER_SERVICE_LEADERSHIP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "nanokv/status.h"

namespace nanokv::master {

// Who leads: its id, the address of its service, its term.
struct LeaderRecord {
  std::string id;
  std::string address;
  uint64_t term = 0;
};

class Leadership {
 public:
  using OnChange = std::function<void(bool is_leader, const LeaderRecord& leader)>;
  virtual ~Leadership() = default;
  // Begins; `on_change` runs (on the implementation's own thread, or inside
  // Start) each time this master starts or stops leading.
  virtual Status Start(OnChange on_change) = 0;
  // True only while this master surely leads.
  virtual bool IsLeader() const = 0;
  // This master's term while it leads, 0 otherwise.
  virtual uint64_t term() const = 0;
  // Who leads as last seen (this master or another); nullopt when unknown.
  virtual std::optional<LeaderRecord> Leader() const = 0;
  // Stops leading (on_change(false) if it led) and ends.
  virtual void Stop() = 0;
};

// A master with no etcd: it leads alone, from Start until Stop, at `term`.
class SoleLeadership : public Leadership {
 public:
  SoleLeadership(std::string id, std::string address, uint64_t term)
      : self_{std::move(id), std::move(address), term} {}
  // Where this master is reached, once known (it may bind port 0).
  // REQUIRES: before Start.
  void set_address(std::string address) { self_.address = std::move(address); }

  Status Start(OnChange on_change) override {
    on_change_ = std::move(on_change);
    leading_.store(true);
    if (on_change_) on_change_(true, self_);
    return Status::OK();
  }
  bool IsLeader() const override { return leading_.load(); }
  uint64_t term() const override { return leading_.load() ? self_.term : 0; }
  std::optional<LeaderRecord> Leader() const override {
    if (!leading_.load()) return std::nullopt;
    return self_;
  }
  void Stop() override {
    if (leading_.exchange(false) && on_change_) on_change_(false, self_);
  }

 private:
  LeaderRecord self_;
  OnChange on_change_;
  std::atomic<bool> leading_{false};
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_LEADERSHIP_H_
