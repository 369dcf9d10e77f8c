// The object store's read leases (object_index.h): the plan API's side;
// the table keeps them (object_table.h).
#include <string>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {
namespace {

std::string Quote(std::string_view key) { return "'" + std::string(key.substr(0, 80)) + "'"; }

}  // namespace

Result<LeaseExpiry> ObjectIndex::AcquireLease(std::string_view key, uint32_t holder, uint64_t now_ns,
                                              uint64_t connection, LeaseTerm term) {
  std::lock_guard lock(mu_);
  table_.PruneLeases(now_ns);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("lease of " + Quote(key) + ": no such object");
  if (object->state != ObjectState::kReady) {
    return Status::FailedPrecondition("lease of " + Quote(key) + ": it is " +
                                      ObjectStateName(object->state) + ", not READY");
  }
  NANOKV_ASSIGN_OR_RETURN(LeaseExpiry lease,
                          table_.AddLease(*object, holder, now_ns, connection, term == LeaseTerm::kHeld));
  OrderOf(*object).Touch(object, now_ns);
  return lease;
}

Status ObjectIndex::ReleaseLease(std::string_view key, uint64_t lease_id, uint64_t now_ns, uint32_t holder) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("release of a lease on " + Quote(key) + ": no such object");
  return table_.ReleaseLease(*object, lease_id, now_ns, holder);
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
