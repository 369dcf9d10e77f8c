// Orders to several nodes at once: grouped into one instruction per node (a
// batch of N keys is one message to each node it touches), each order
// answered by its own status and, for an open, its plan.
#ifndef NANOKV_MASTER_NODES_ORDERS_H_
#define NANOKV_MASTER_NODES_ORDERS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "ipc/proto/master.pb.h"
#include "master/nodes/node_registry.h"
#include "nanokv/status.h"

namespace nanokv::master {

enum class OrderKind { kOpen, kCommit, kRevoke, kRemove };

struct Order {
  uint16_t node = 0;
  v1::PlanOrder plan;  // kOpen
  v1::KeyOrder key;    // the others
};

// Runs once per order, from the thread that got its node's answer (orders of
// different nodes concurrently): its index in `orders`, its status, its plan
// (kOpen, OK only: the answer's own, which `each` may move from) and the
// session that answered.
using OrderDone = std::function<void(size_t order, const Status& status, wire::ObjectPlan* plan, SessionRef session)>;

// Sends `orders` grouped by node through `nodes` with `term`; `each` runs for
// every order, then `all` once, after the last.
void SendOrders(NodeRegistry& nodes, uint64_t term, OrderKind kind, std::vector<Order> orders, OrderDone each,
                std::function<void()> all);

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_NODES_ORDERS_H_
