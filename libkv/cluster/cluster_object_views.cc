// ClusterClient's views (nanokv/cluster_client.h, View): a READY copy on
// this host read where it lies, under a lease its kvd holds for the view.
// This node's copies first, with no question to the master; the rest
// located through the master, viewed through their node's kvd on this host.
#include <map>

#include "libkv/cluster/cluster_client_impl.h"
#include "libkv/cluster/cluster_put.h"
#include "nanokv/cluster_client.h"

namespace nanokv {

std::vector<Result<ObjectView>> ClusterClient::BatchView(const std::vector<std::string>& keys) {
  std::vector<Result<ObjectView>> out;
  auto local = impl_->Local();
  if (local.ok()) {
    out = (*local)->BatchView(keys);
  } else {
    for (size_t i = 0; i < keys.size(); ++i) out.emplace_back(local.status());
  }
  std::vector<size_t> ask;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Code code = out[i].ok() ? Code::kOk : out[i].status().code();
    if (code == Code::kNotFound || code == Code::kFailedPrecondition || code == Code::kUnavailable) ask.push_back(i);
  }
  if (ask.empty()) return out;
  std::vector<std::string> asked;
  for (size_t i : ask) asked.push_back(keys[i]);
  std::vector<Result<ObjectLocation>> locations = BatchGetLocation(asked);
  for (size_t k = 0; k < ask.size(); ++k) {
    const size_t i = ask[k];
    if (!locations[k].ok()) {
      out[i] = locations[k].status();
      continue;
    }
    out[i] = Status::FailedPrecondition("nanokv cluster: every copy of '" + keys[i] + "' is on another host (node " +
                                        locations[k]->replicas.front().node_id +
                                        "): a view maps pages of this host only; move its bytes with GetToDevice");
    for (const Replica& replica : locations[k]->replicas) {
      if (!cluster::OnThisHost(replica)) continue;
      auto store = impl_->StoreOf(replica);
      out[i] = store.ok() ? (*store)->View(keys[i]) : Result<ObjectView>(store.status());
      if (out[i].ok()) break;
    }
  }
  return out;
}

Result<ObjectView> ClusterClient::View(std::string_view key) {
  return std::move(BatchView({std::string(key)})[0]);
}

}  // namespace nanokv
