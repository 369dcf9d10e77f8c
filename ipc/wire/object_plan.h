// An ObjectPlan (nanokv/object_types.h) to and from the wire's message of
// the same name: one copy of the conversion for kvd's server, its cluster
// node agent, the object store client and ClusterClient.
#ifndef NANOKV_IPC_WIRE_OBJECT_PLAN_H_
#define NANOKV_IPC_WIRE_OBJECT_PLAN_H_

#include <string>
#include <string_view>

#include "ipc/proto/nanokv.pb.h"
#include "nanokv/object_types.h"

namespace nanokv::wire {

// `device_uuid`: the uuid of the plan's device ("" when unknown).
void ToWirePlan(const nanokv::ObjectPlan& plan, const std::string& device_uuid, ObjectPlan* out);
// REQUIRES: `in` passed CheckObjectPlan (object_codec.h).
nanokv::ObjectPlan FromWirePlan(std::string_view key, const ObjectPlan& in);

}  // namespace nanokv::wire

#endif  // NANOKV_IPC_WIRE_OBJECT_PLAN_H_
