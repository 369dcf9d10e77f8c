// What kvd's transfer agent (daemon/transfer/) asks of the index beyond an
// engine's calls: the plan of a write in progress, found by the key and the
// epoch a remote writer names, so the agent writes only where its own index
// says (never spans a peer sent).
#include "daemon/objects/object_index.h"

namespace nanokv::kvd {

Result<ObjectPlan> ObjectIndex::WritingPlan(std::string_view key, uint32_t epoch) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  const std::string quoted = "'" + std::string(key.substr(0, 256)) + "'";
  if (object == nullptr) return Status::NotFound("object " + quoted + " does not exist");
  if (object->epoch != epoch) {
    return Status::FailedPrecondition("object " + quoted + " is at epoch " + std::to_string(object->epoch) +
                                      ", not the plan's " + std::to_string(epoch));
  }
  if (object->state != ObjectState::kReserved && object->state != ObjectState::kWriting) {
    return Status::FailedPrecondition("object " + quoted + " is " + ObjectStateName(object->state) +
                                      ", not being written");
  }
  return PlanOf(*object);
}

}  // namespace nanokv::kvd
