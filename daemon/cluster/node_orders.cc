// A node's answers to its master's orders: each order carried out on the
// node's ObjectIndex as an engine's request would be (the owner allocates),
// one status per order, a plan per open that succeeded.
#include "daemon/cluster/node_agent.h"
#include "base/clocks.h"
#include "ipc/master/grpc_status.h"
#include "ipc/wire/object_plan.h"

namespace nanokv::kvd {
namespace v1 = master::v1;

v1::InstructionReply NodeAgent::Execute(const v1::Instruction& instruction) {
  v1::InstructionReply reply;
  reply.set_request_id(instruction.request_id());
  const uint64_t now = SteadyNowNs();
  switch (instruction.body_case()) {
    case v1::Instruction::kOpen:
      for (const v1::PlanOrder& order : instruction.open().orders()) {
        auto plan = store_.OpenForWrite(order.key(), order.bytes_total(), order.device(), now);
        master::ToItem(plan.status(), reply.add_statuses());
        if (!plan.ok()) continue;
        const size_t d = static_cast<size_t>(plan->device);
        wire::ToWirePlan(*plan, d < options_.device_uuids.size() ? options_.device_uuids[d] : "", reply.add_plans());
      }
      break;
    case v1::Instruction::kCommit:
      for (const v1::KeyOrder& order : instruction.commit().orders()) {
        master::ToItem(store_.Commit(order.key(), order.epoch(), now), reply.add_statuses());
      }
      break;
    case v1::Instruction::kRevoke:
      for (const v1::KeyOrder& order : instruction.revoke().orders()) {
        master::ToItem(store_.Revoke(order.key(), order.epoch(), now), reply.add_statuses());
      }
      break;
    case v1::Instruction::kRemove:
      for (const v1::KeyOrder& order : instruction.remove().orders()) {
        master::ToItem(store_.Remove(order.key(), now), reply.add_statuses());
      }
      break;
    case v1::Instruction::BODY_NOT_SET:
      break;
  }
  return reply;
}

}  // namespace nanokv::kvd
