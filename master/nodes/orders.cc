#include "master/nodes/orders.h"

#include <atomic>
#include <map>
#include <memory>

#include "ipc/master/grpc_status.h"

namespace nanokv::master {

void SendOrders(NodeRegistry& nodes, uint64_t term, OrderKind kind, std::vector<Order> orders, OrderDone each,
                std::function<void()> all) {
  std::map<uint16_t, std::vector<size_t>> by_node;
  for (size_t i = 0; i < orders.size(); ++i) by_node[orders[i].node].push_back(i);
  if (by_node.empty()) return all();
  struct Round {
    OrderDone each;
    std::function<void()> all;
    std::atomic<size_t> nodes_left;
  };
  auto round = std::make_shared<Round>();
  round->each = std::move(each);
  round->all = std::move(all);
  round->nodes_left.store(by_node.size());
  for (auto& [node, indexes] : by_node) {
    v1::Instruction instruction;
    v1::KeyOrders* keys = nullptr;
    switch (kind) {
      case OrderKind::kOpen: break;
      case OrderKind::kCommit: keys = instruction.mutable_commit(); break;
      case OrderKind::kRevoke: keys = instruction.mutable_revoke(); break;
      case OrderKind::kRemove: keys = instruction.mutable_remove(); break;
    }
    for (size_t i : indexes) {
      if (kind == OrderKind::kOpen) {
        *instruction.mutable_open()->add_orders() = std::move(orders[i].plan);
      } else {
        *keys->add_orders() = std::move(orders[i].key);
      }
    }
    const size_t count = indexes.size();
    nodes.Send(node, std::move(instruction), count, kind == OrderKind::kOpen, term,
               [round, indexes = std::move(indexes)](Result<v1::InstructionReply> reply, SessionRef session) {
                 int plan = 0;
                 for (size_t k = 0; k < indexes.size(); ++k) {
                   if (!reply.ok()) {
                     round->each(indexes[k], reply.status(), nullptr, session);
                     continue;
                   }
                   Status status = FromItem(reply->statuses(static_cast<int>(k)), "node");
                   wire::ObjectPlan* p =
                       status.ok() && reply->plans_size() > 0 ? reply->mutable_plans(plan++) : nullptr;
                   round->each(indexes[k], status, p, session);
                 }
                 if (round->nodes_left.fetch_sub(1) == 1) round->all();
               });
  }
}

}  // namespace nanokv::master
