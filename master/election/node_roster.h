// The leader's list of its nodes, kept in etcd so that the next leader knows
// whom to wait for: one key `<prefix><node id>` (no lease, empty value) per
// node that registered with a leader and has not died under one since.
//
// Why the leader keeps it, not the nodes (each under a lease of its own):
// nodes then need no etcd access, no etcd credentials and no lease of their
// own, and there is one writer. The cost: a node that died while no master
// led keeps its key; the new leader waits for it only until its rebuild
// window ends, then takes the key out (Prune).
//
// Writes are queued and made by a thread of the roster's own, so a node's
// registration never waits on etcd; the latest wish for each node wins, and
// a write that fails is tried again. Thread-safe.
#ifndef NANOKV_MASTER_ELECTION_NODE_ROSTER_H_
#define NANOKV_MASTER_ELECTION_NODE_ROSTER_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ipc/etcd/etcd_client.h"
#include "nanokv/status.h"

namespace nanokv::master {

class NodeRoster {
 public:
  // `prefix` ends in '/' ("/nanokv/default/nodes/"). etcd need not be up.
  static Result<std::unique_ptr<NodeRoster>> Start(etcd::EtcdOptions options, std::string prefix);
  ~NodeRoster();  // Stop()
  NodeRoster(const NodeRoster&) = delete;
  NodeRoster& operator=(const NodeRoster&) = delete;

  // The node ids in etcd now (a linearizable read), by `deadline`.
  Result<std::vector<std::string>> Read(etcd::Deadline deadline);
  // Queues the node's key to be written (Add) or deleted (Remove).
  void Add(const std::string& node_id) { Want(node_id, true); }
  void Remove(const std::string& node_id) { Want(node_id, false); }
  // Waits until every queued write is made, or `deadline`; true if all were.
  bool Flush(etcd::Deadline deadline);
  // Ends the thread; writes still queued are dropped.
  void Stop();

 private:
  NodeRoster(std::unique_ptr<etcd::EtcdClient> client, std::string prefix);
  void Want(const std::string& node_id, bool present);
  void Run();

  const std::unique_ptr<etcd::EtcdClient> client_;
  const std::string prefix_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable flushed_;
  std::map<std::string, bool> wanted_;  // node id -> present; guarded by mu_
  size_t writing_ = 0;                  // writes taken out of wanted_ and not yet made
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_ELECTION_NODE_ROSTER_H_
