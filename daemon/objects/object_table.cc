#include "daemon/objects/object_table.h"

#include <algorithm>
#include <string>

namespace nanokv::kvd {
namespace {

std::string Quote(std::string_view key) { return "'" + std::string(key.substr(0, 80)) + "'"; }

}  // namespace

StoredObject* ObjectTable::Find(std::string_view key) {
  auto it = objects_.find(std::string(key));
  return it == objects_.end() ? nullptr : &it->second;
}

StoredObject* ObjectTable::Insert(StoredObject object) {
  std::string key = object.key;
  auto [it, inserted] = objects_.emplace(std::move(key), std::move(object));
  return &it->second;
}

void ObjectTable::Erase(StoredObject* object) {
  for (const auto& lease : object->leases) ForgetLease(lease.first);
  objects_.erase(object->key);
}

bool ObjectTable::Leased(StoredObject& object, uint64_t now_ns) {
  for (auto it = object.leases.begin(); it != object.leases.end();) {
    if (it->second <= now_ns) {
      ForgetLease(it->first);
      it = object.leases.erase(it);
    } else {
      ++it;
    }
  }
  return !object.leases.empty();
}

void ObjectTable::ForgetLease(uint64_t id) {
  auto record = leases_.find(id);
  if (record == leases_.end()) return;
  auto count = leases_per_holder_.find(record->second.holder);
  if (count != leases_per_holder_.end() && --count->second == 0) leases_per_holder_.erase(count);
  if (record->second.connection != 0) {
    auto listed = connection_leases_.find(record->second.connection);
    if (listed != connection_leases_.end() && listed->second.erase(id) != 0 && listed->second.empty()) {
      connection_leases_.erase(listed);
    }
  }
  leases_.erase(record);
}

void ObjectTable::PruneLeases(uint64_t now_ns) {
  while (!leases_.empty()) {
    auto oldest = leases_.begin();
    StoredObject* object = oldest->second.object;
    auto lease = object->leases.find(oldest->first);
    // The oldest lease is the first to expire: once it holds, all do.
    if (lease != object->leases.end() && lease->second > now_ns) return;
    if (lease != object->leases.end()) object->leases.erase(lease);
    ForgetLease(oldest->first);
  }
}

Result<LeaseExpiry> ObjectTable::AddLease(StoredObject& object, uint32_t holder, uint64_t now_ns, uint64_t connection,
                                          bool held) {
  auto count = leases_per_holder_.find(holder);
  if (count != leases_per_holder_.end() && count->second >= config_.max_leases) {
    return Status::ResourceExhausted("lease of " + Quote(object.key) + ": uid " + std::to_string(holder) + " holds " +
                                     std::to_string(count->second) +
                                     " read leases, the most object_store.max_leases allows; "
                                     "release some, or wait for them to expire (lease_ttl)");
  }
  LeaseExpiry lease{next_lease_++, now_ns + static_cast<uint64_t>(config_.lease_ttl.count()) * 1'000'000};
  if (held && connection != 0) lease = {next_held_lease_++, UINT64_MAX};
  if (connection != 0) connection_leases_[connection].insert(lease.id);
  object.leases.emplace(lease.id, lease.expires_ns);
  leases_.emplace(lease.id, LeaseRecord{&object, holder, connection});
  ++leases_per_holder_[holder];
  return lease;
}

Status ObjectTable::ReleaseLease(StoredObject& object, uint64_t lease_id, uint64_t now_ns, uint32_t holder) {
  Leased(object, now_ns);  // drops expired ones
  auto record = leases_.find(lease_id);
  if (holder != kKvdCallers && object.leases.contains(lease_id) && record != leases_.end() &&
      record->second.holder != holder) {
    return Status::PermissionDenied("lease " + std::to_string(lease_id) + " on " + Quote(object.key) +
                                    " is another uid's: only its holder ends it early");
  }
  if (object.leases.erase(lease_id) == 0) {
    return Status::NotFound("lease " + std::to_string(lease_id) + " on " + Quote(object.key) +
                            " is not held (released, or expired after lease_ttl)");
  }
  ForgetLease(lease_id);
  return Status::OK();
}

Status ObjectTable::ReleaseLeaseById(uint64_t lease_id, uint64_t now_ns, uint32_t holder) {
  auto record = leases_.find(lease_id);
  if (record == leases_.end()) {
    return Status::NotFound("lease " + std::to_string(lease_id) +
                            " is not held (released, or expired after lease_ttl)");
  }
  return ReleaseLease(*record->second.object, lease_id, now_ns, holder);
}

size_t ObjectTable::EndConnectionLeases(uint64_t connection) {
  auto listed = connection_leases_.find(connection);
  if (listed == connection_leases_.end()) return 0;
  std::set<uint64_t> ids = std::move(listed->second);
  connection_leases_.erase(listed);
  for (uint64_t id : ids) {
    auto record = leases_.find(id);
    if (record == leases_.end()) continue;
    record->second.object->leases.erase(id);
    record->second.connection = 0;  // its connection's set is gone already
    ForgetLease(id);
  }
  return ids.size();
}

size_t ObjectTable::lease_count(uint32_t holder) const {
  auto held = leases_per_holder_.find(holder);
  return held == leases_per_holder_.end() ? 0 : held->second;
}

Status ObjectTable::CheckLeases() const {
  size_t object_leases = 0;
  for (const auto& [key, object] : objects_) {
    for (const auto& lease : object.leases) {
      auto record = leases_.find(lease.first);
      if (record == leases_.end() || record->second.object != &object) {
        return Status::Internal("object store: '" + key + "': lease " + std::to_string(lease.first) +
                                " is not in the lease list");
      }
    }
    object_leases += object.leases.size();
  }
  size_t counted = 0;
  for (const auto& [holder, count] : leases_per_holder_) counted += count;
  if (object_leases != leases_.size() || counted != leases_.size()) {
    return Status::Internal("object store: " + std::to_string(leases_.size()) + " leases listed, " +
                            std::to_string(object_leases) + " on objects, " + std::to_string(counted) +
                            " counted by holder");
  }
  return Status::OK();
}

void ObjectTable::Journal(const StoredObject& object) {
  if (journal_ == nullptr) return;
  JournaledObject record;
  record.key = object.key;
  record.committed = object.state == ObjectState::kReady;
  record.tier = object.tier;
  record.slot = object.tier == Tier::kGpu ? object.slot : 0;  // a host-tier object has no header slot
  record.epoch = object.epoch;
  record.owner = object.owner;
  record.pin = object.pin;
  record.seq = object.seq;
  record.payload_offset = object.payload_offset;
  record.bytes_total = object.bytes_total;
  journal_->Record(object.device, object.record, record);
}

void ObjectTable::ClearRecord(size_t d, uint32_t record) {
  if (journal_ != nullptr) journal_->Clear(d, record);
}

void ObjectTable::RemoveJournal() {
  if (journal_ != nullptr) journal_->Remove();
}

}  // namespace nanokv::kvd
