#include "master/election/leader_election.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace nanokv::master {
namespace {

using etcd::Clock;
using etcd::Deadline;
using std::chrono::milliseconds;

int64_t SteadyNanos(Deadline time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

constexpr Deadline kNever = Deadline::max();

}  // namespace

Result<std::unique_ptr<LeaderElection>> LeaderElection::Start(ElectionOptions options, OnChange on_change) {
  NANOKV_RETURN_IF_ERROR(etcd::CheckElectionKey(options.election_key));
  NANOKV_RETURN_IF_ERROR(etcd::CheckCandidate(options.candidate_id, options.address));
  if (options.lease_ttl < std::chrono::seconds(1) || options.lease_ttl > std::chrono::hours(1)) {
    return Status::InvalidArgument("election: lease_ttl " + std::to_string(options.lease_ttl.count()) +
                                   " ms: want 1 s to 1 h (etcd's leases are whole seconds)");
  }
  etcd::EtcdOptions etcd_options;
  etcd_options.endpoints = options.etcd_endpoints;
  etcd_options.dial_timeout = milliseconds(0);  // etcd may come up later
  etcd_options.ca_file = options.etcd_ca_file;
  etcd_options.cert_file = options.etcd_cert_file;
  etcd_options.key_file = options.etcd_key_file;
  NANOKV_ASSIGN_OR_RETURN(auto client, etcd::EtcdClient::Connect(etcd_options));
  std::unique_ptr<LeaderElection> election(
      new LeaderElection(std::move(options), std::move(on_change), std::move(client)));
  election->thread_ = std::thread([e = election.get()] { e->Run(); });
  return election;
}

LeaderElection::LeaderElection(ElectionOptions options, OnChange on_change, std::unique_ptr<etcd::EtcdClient> client)
    : options_(std::move(options)),
      on_change_(std::move(on_change)),
      client_(std::move(client)),
      renew_every_(options_.lease_ttl / 3),
      slack_(options_.lease_ttl / 10),
      retry_every_(options_.lease_ttl / 10) {}

LeaderElection::~LeaderElection() { Stop(); }

std::optional<LeaderInfo> LeaderElection::Leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

bool LeaderElection::IsLeader() const {
  return SteadyNanos(Clock::now()) < leader_until_ns_.load(std::memory_order_acquire);
}

uint64_t LeaderElection::term() const {
  if (!IsLeader()) return 0;
  return term_.load(std::memory_order_acquire);
}

void LeaderElection::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true);
    if (watch_ != nullptr) watch_->Cancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeaderElection::Sleep(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait_until(lock, deadline, [&] { return stopping_.load(); });
}

void LeaderElection::SetWatch(std::unique_ptr<etcd::EtcdWatch> watch) {
  std::unique_ptr<etcd::EtcdWatch> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(watch_);
    watch_ = std::move(watch);
    if (stopping_.load() && watch_ != nullptr) watch_->Cancel();
  }
  // `old` closes here, outside the lock: closing a stream may wait on gRPC.
}

Deadline LeaderElection::CallDeadline() const {
  Deadline soon = Clock::now() + renew_every_;
  return lease_ != 0 ? std::min(soon, valid_until_) : soon;
}

void LeaderElection::Report(const Status& status) {
  std::string text = status.ToString();
  if (text != last_report_) {
    spdlog::warn("election {}: {}", options_.election_key, text);
    last_report_ = std::move(text);
  } else {
    spdlog::debug("election {}: {}", options_.election_key, text);
  }
}

void LeaderElection::Run() {
  while (!stopping_.load()) {
    Status status = Campaign();
    if (stopping_.load()) break;
    if (!status.ok()) Report(status);
    Sleep(Clock::now() + retry_every_);
  }
  if (leading_) StepDown("stopped");
  SetWatch(nullptr);
  // Revoked, a standby's watch sees our key go at once; else it waits out
  // the TTL.
  for (int64_t lease : {lease_, abandoned_lease_}) {
    if (lease == 0) continue;
    Status revoked = client_->RevokeLease(lease, Clock::now() + renew_every_);
    if (!revoked.ok() && revoked.code() != Code::kNotFound) {
      spdlog::warn("election {}: could not revoke the lease at stop ({}); it expires by itself",
                   options_.election_key, revoked.ToString());
    }
  }
  lease_ = abandoned_lease_ = 0;
}

Status LeaderElection::Campaign() {
  if (abandoned_lease_ != 0) {
    // Our old key must go before we stand again, or we would queue behind it.
    Status revoked = client_->RevokeLease(abandoned_lease_, CallDeadline());
    if (!revoked.ok() && revoked.code() != Code::kNotFound) return revoked;
    abandoned_lease_ = 0;
  }
  Deadline sent = Clock::now();
  auto ttl_seconds = std::chrono::ceil<std::chrono::seconds>(options_.lease_ttl);
  NANOKV_ASSIGN_OR_RETURN(etcd::LeaseGrant grant, client_->GrantLease(ttl_seconds, CallDeadline()));
  lease_ = grant.id;
  valid_until_ = sent + std::min<Clock::duration>(options_.lease_ttl, grant.ttl) - slack_;
  renew_at_ = sent + renew_every_;
  key_ = etcd::CandidateKey(options_.election_key, lease_);

  // Ours if it does not exist yet; if it does (a retry after a lost reply
  // created it), it is ours anyway: the key names our lease.
  etcd::TxnSpec stand;
  stand.compares = {etcd::Compare::CreateRevision(key_, etcd::Compare::Op::kEqual, 0)};
  stand.success = {etcd::TxnOp::Put(key_, etcd::EncodeCandidate(options_.candidate_id, options_.address), lease_)};
  stand.failure = {etcd::TxnOp::Get(key_)};
  Result<etcd::TxnResult> stood = client_->Txn(stand, CallDeadline());
  if (!stood.ok() || (!stood->succeeded && stood->results[0].kvs.empty())) {
    GiveUpLease("could not register as a candidate");
    return stood.ok() ? Status::Unavailable("election: our candidate key vanished as it was made") : stood.status();
  }
  revision_ = stood->succeeded ? stood->revision : stood->results[0].kvs[0].create_revision;
  spdlog::info("election {}: {} stands as candidate {} (revision {})", options_.election_key,
               options_.candidate_id, key_, revision_);
  read_at_ = Clock::now();

  while (!stopping_.load()) {
    Deadline now = Clock::now();
    if (now >= valid_until_) {
      GiveUpLease("the lease could not be renewed in time");
      return Status::Unavailable("election: lease not renewed within " + std::to_string(options_.lease_ttl.count()) +
                                 " ms; standing again under a new one");
    }
    if (now >= renew_at_) {
      Status renewed = Renew();
      if (renewed.code() == Code::kNotFound) {
        GiveUpLease("etcd has no more lease");
        return renewed;
      }
      continue;
    }
    if (now >= read_at_) {
      Status read = ReadAndDecide();
      if (!read.ok()) {
        if (lease_ == 0) return read;  // our key is gone: lease given up
        Report(read);
        read_at_ = Clock::now() + retry_every_;
      }
      continue;
    }
    Deadline wake = std::min({renew_at_, valid_until_, read_at_});
    if (watch_ == nullptr) {
      Sleep(wake);
      continue;
    }
    // Only this thread replaces watch_, so it may use it without the lock.
    Result<std::optional<etcd::WatchBatch>> batch = watch_->Next(wake);
    if (!batch.ok()) {
      if (!stopping_.load()) spdlog::debug("election {}: watch ended: {}", options_.election_key, batch.status().ToString());
      SetWatch(nullptr);
      read_at_ = Clock::now();
    } else if (batch->has_value() && !(*batch)->events.empty()) {
      read_at_ = Clock::now();  // a candidate came or went: look again
    }
  }
  return Status::OK();
}

Status LeaderElection::Renew() {
  Deadline sent = Clock::now();
  Result<std::chrono::seconds> ttl = client_->KeepAliveOnce(lease_, CallDeadline());
  if (!ttl.ok()) {
    if (ttl.status().code() != Code::kNotFound) {
      Report(ttl.status());
      renew_at_ = Clock::now() + retry_every_;
    }
    return ttl.status();
  }
  valid_until_ = sent + std::min<Clock::duration>(options_.lease_ttl, *ttl) - slack_;
  renew_at_ = sent + renew_every_;
  if (leading_) leader_until_ns_.store(SteadyNanos(valid_until_), std::memory_order_release);
  // The renewal went to another member than the watch: that member may be
  // hung or cut off, and its watch silent. Watch through the one that answers.
  if (watch_ != nullptr && watch_->endpoint_index() != client_->current_endpoint()) {
    SetWatch(nullptr);
    read_at_ = Clock::now();
  }
  return Status::OK();
}

Status LeaderElection::ReadAndDecide() {
  NANOKV_ASSIGN_OR_RETURN(etcd::Candidates candidates,
                          etcd::ReadCandidates(*client_, options_.election_key, CallDeadline()));
  read_at_ = kNever;
  bool ours_stands = std::any_of(candidates.keys.begin(), candidates.keys.end(),
                                 [&](const etcd::KeyValue& kv) { return kv.key == key_; });
  if (!ours_stands) {
    GiveUpLease("our candidate key is gone from etcd");
    return Status::Unavailable("election: our candidate key " + key_ + " was deleted; standing again");
  }
  const etcd::KeyValue& first = candidates.keys.front();
  Result<LeaderInfo> leader = etcd::DecodeCandidate(first);
  if (!leader.ok()) Report(leader.status());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leader.ok() && (!leader_ || leader_->id != leader->id || leader_->term != leader->term)) {
      spdlog::info("election {}: the leader is {} at {} (term {})", options_.election_key, leader->id,
                   leader->address, leader->term);
    }
    leader_ = leader.ok() ? std::optional<LeaderInfo>(*leader) : std::nullopt;
  }
  if (first.key == key_ && !leading_) {
    BecomeLeader();
  } else if (first.key != key_ && leading_) {
    StepDown("an older candidate " + first.key + " appeared");
  }
  if (watch_ == nullptr) {
    // From the revision after the read: nothing in between is missed.
    Result<std::unique_ptr<etcd::EtcdWatch>> watch = client_->Watch(
        {options_.election_key + "/", etcd::PrefixEnd(options_.election_key + "/"), candidates.revision + 1, false},
        CallDeadline());
    if (!watch.ok()) return watch.status();
    SetWatch(std::move(watch).value());
  }
  return Status::OK();
}

void LeaderElection::BecomeLeader() {
  if (Clock::now() >= valid_until_) return;  // the loop gives the lease up
  LeaderInfo self{options_.candidate_id, options_.address, static_cast<uint64_t>(revision_)};
  term_.store(self.term, std::memory_order_release);
  leader_until_ns_.store(SteadyNanos(valid_until_), std::memory_order_release);
  leading_ = true;
  spdlog::info("election {}: {} leads, term {}", options_.election_key, self.id, self.term);
  if (on_change_) on_change_(true, self);
}

void LeaderElection::StepDown(const std::string& why) {
  leader_until_ns_.store(0, std::memory_order_release);
  leading_ = false;
  LeaderInfo self{options_.candidate_id, options_.address, static_cast<uint64_t>(revision_)};
  spdlog::warn("election {}: {} steps down from term {}: {}", options_.election_key, self.id, self.term, why);
  if (on_change_) on_change_(false, self);
}

void LeaderElection::GiveUpLease(const std::string& why) {
  if (leading_) StepDown(why);
  SetWatch(nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader_.reset();  // what we saw may be stale now
  }
  if (lease_ != 0) abandoned_lease_ = lease_;
  lease_ = 0;
}

}  // namespace nanokv::master
