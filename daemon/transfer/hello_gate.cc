// The gate before a peer's hello (daemon/transfer/hello_gate.h).
#include "daemon/transfer/hello_gate.h"

#include <algorithm>

#include "ipc/master/token.h"
#include "ipc/ucx/transfer_wire.h"

namespace nanokv::kvd {

Status HelloVerdict(const transfer::v1::Hello& hello, std::string_view token) {
  if (hello.protocol() != ucx::kTransferProtocol) {
    return Status::Unsupported("transfer protocol " + std::to_string(hello.protocol()) + ", this kvd speaks " +
                               std::to_string(ucx::kTransferProtocol));
  }
  if (!token.empty() && !master::TokensEqual(hello.token(), token)) {
    return Status::PermissionDenied("the transfer agent refuses a peer without the cluster's token "
                                    "(master.token_file)");
  }
  return Status::OK();
}

HelloWaiters::HelloWaiters(size_t per_host, size_t total)
    : per_host_(std::max<size_t>(per_host, 1)), total_(std::max<size_t>(total, 1)) {}

std::optional<HelloWaiters::Id> HelloWaiters::Add(Id id, const std::string& host) {
  if (Waiting(id)) return std::nullopt;
  std::optional<Id> ended;
  auto victim = order_.end();
  if (Of(host) >= per_host_) {
    victim = std::find_if(order_.begin(), order_.end(), [&](const Waiter& w) { return w.host == host; });
  } else if (order_.size() >= total_) {
    victim = order_.begin();
  }
  if (victim != order_.end()) {
    ended = victim->id;
    Erase(victim);
  }
  order_.push_back({id, host});
  by_id_[id] = std::prev(order_.end());
  ++per_host_count_[host];
  return ended;
}

void HelloWaiters::Remove(Id id) {
  auto found = by_id_.find(id);
  if (found != by_id_.end()) Erase(found->second);
}

size_t HelloWaiters::Of(const std::string& host) const {
  auto found = per_host_count_.find(host);
  return found == per_host_count_.end() ? 0 : found->second;
}

void HelloWaiters::Erase(std::list<Waiter>::iterator at) {
  auto count = per_host_count_.find(at->host);
  if (--count->second == 0) per_host_count_.erase(count);
  by_id_.erase(at->id);
  order_.erase(at);
}

}  // namespace nanokv::kvd
