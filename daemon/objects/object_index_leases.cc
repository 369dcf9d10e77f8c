// The object store's read leases (object_index.h): the plan API's side;
// the table keeps them (object_table.h); and reads without a lease, which
// the read table covers (read_table.h).
#include <string>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {
namespace {

std::string Quote(std::string_view key) { return "'" + std::string(key.substr(0, 80)) + "'"; }

}  // namespace

Result<std::pair<ObjectIndex::Object*, LeaseExpiry>> ObjectIndex::LeaseLocked(std::string_view key, uint32_t holder,
                                                                              uint64_t now_ns, uint64_t connection,
                                                                              LeaseTerm term) {
  table_.PruneLeases(now_ns);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("lease of " + Quote(key) + ": no such object");
  if (object->state != ObjectState::kReady) {
    return Status::FailedPrecondition("lease of " + Quote(key) + ": it is " +
                                      ObjectStateName(object->state) + ", not READY");
  }
  NANOKV_ASSIGN_OR_RETURN(LeaseExpiry lease,
                          table_.AddLease(*object, holder, now_ns, connection, term == LeaseTerm::kHeld));
  return std::pair{object, lease};
}

Result<LeaseExpiry> ObjectIndex::AcquireLease(std::string_view key, uint32_t holder, uint64_t now_ns,
                                              uint64_t connection, LeaseTerm term) {
  std::lock_guard lock(mu_);
  NANOKV_ASSIGN_OR_RETURN(auto leased, LeaseLocked(key, holder, now_ns, connection, term));
  OrderOf(*leased.first).Touch(leased.first, now_ns);
  return leased.second;
}

Result<ObjectIndex::LeasedLocation> ObjectIndex::LeaseAndLocate(std::string_view key, uint32_t holder, uint64_t now_ns,
                                                                uint64_t connection, LeaseTerm term) {
  std::lock_guard lock(mu_);
  NANOKV_ASSIGN_OR_RETURN(auto leased, LeaseLocked(key, holder, now_ns, connection, term));
  return LeasedLocation{leased.second, LocateLocked(*leased.first, now_ns)};  // touches it
}

Result<std::optional<ObjectPlan>> ObjectIndex::LocateUnleased(std::string_view key, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("read of " + Quote(key) + ": no such object");
  if (object->state != ObjectState::kReady) {
    return Status::FailedPrecondition("read of " + Quote(key) + ": it is " + ObjectStateName(object->state) +
                                      ", not READY");
  }
  if (read_table_ == nullptr || object->tier != Tier::kGpu) return std::optional<ObjectPlan>();
  return std::optional<ObjectPlan>(LocateLocked(*object, now_ns));
}

void ObjectIndex::PublishRead(const Object& object) {
  if (read_table_ == nullptr || object.tier != Tier::kGpu || object.state != ObjectState::kReady) return;
  read_table_->PublishLocation(object.device, object.record, object.key, object.key_hash, object.payload_offset,
                               object.bytes_total, object.epoch);
}

void ObjectIndex::WithdrawRead(const Object& object) {
  if (read_table_ != nullptr) read_table_->Withdraw(object.device, object.record);
}

Result<ObjectIndex::ReadTableShare> ObjectIndex::ShareReadTable() const {
  if (read_table_ == nullptr) return Status::Unimplemented("this kvd has no read table: every get takes a lease");
  ReadTableShare share;
  NANOKV_ASSIGN_OR_RETURN(share.fd, read_table_->ReaderFd());
  share.entries = read_table_->entries();
  share.buckets = read_table_->buckets();
  for (const Device& device : devices_) share.devices.push_back(device.ordinal);  // fixed after Create
  return share;
}

Status ObjectIndex::CheckReadTable() const {
  if (read_table_ == nullptr) return Status::OK();
  std::vector<std::unordered_map<uint32_t, const Object*>> by_record(devices_.size());
  for (const auto& [key, object] : table_.objects()) by_record[object.device][object.record] = &object;
  for (size_t d = 0; d < devices_.size(); ++d) {
    for (uint32_t r = 0; r < read_table_->entries(); ++r) {
      const uint32_t epoch = read_table_->At(d, r);
      const auto listed = read_table_->ListedAt(d, r);
      if (epoch == 0 && !listed) continue;
      auto it = by_record[d].find(r);
      const Object* object = it == by_record[d].end() ? nullptr : it->second;
      if (epoch != 0 && (object == nullptr || object->tier != Tier::kGpu || object->state != ObjectState::kReady ||
                         object->epoch != epoch)) {
        return Status::Internal("object store device " + std::to_string(devices_[d].ordinal) + ": read table entry " +
                                std::to_string(r) + " names epoch " + std::to_string(epoch) +
                                ", which is no READY copy in the store there");
      }
      // A listed location is its record's published copy, as it lies.
      if (!listed) continue;
      if (object == nullptr || epoch != listed->epoch || object->epoch != listed->epoch || object->key != listed->key ||
          object->payload_offset != listed->payload_offset || object->bytes_total != listed->bytes) {
        return Status::Internal("object store device " + std::to_string(devices_[d].ordinal) +
                                ": the location directory lists " + Quote(listed->key) + " at record " +
                                std::to_string(r) + ", which is not where that copy lies");
      }
    }
  }
  return Status::OK();
}

Status ObjectIndex::ReleaseLease(std::string_view key, uint64_t lease_id, uint64_t now_ns, uint32_t holder) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("release of a lease on " + Quote(key) + ": no such object");
  return table_.ReleaseLease(*object, lease_id, now_ns, holder);
}

size_t ObjectIndex::ReleaseLeases(std::span<const uint64_t> lease_ids, uint64_t now_ns, uint32_t holder) {
  std::lock_guard lock(mu_);
  size_t released = 0;
  for (uint64_t id : lease_ids) {
    Status done = table_.ReleaseLeaseById(id, now_ns, holder);
    if (done.ok())
      ++released;
    else
      spdlog::debug("object store: a batch release: {}", done.ToString());
  }
  return released;
}

size_t ObjectIndex::EndConnectionLeases(uint64_t connection) {
  std::lock_guard lock(mu_);
  return table_.EndConnectionLeases(connection);
}

size_t ObjectIndex::lease_count() const {
  std::lock_guard lock(mu_);
  return table_.lease_count();
}

size_t ObjectIndex::lease_count(uint32_t holder) const {
  std::lock_guard lock(mu_);
  return table_.lease_count(holder);
}

}  // namespace nanokv::kvd
