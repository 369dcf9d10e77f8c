// kvd's transfer agent: the node's end of the data path between nodes
// (docs/ARCHITECTURE.md, "The data path between nodes"). On when the
// `master:` block names a data_address (host:port; it listens there, port 0
// picks one, and the bound address is what the node agent tells the
// master). Peers (ClusterClient's own UCP workers on other nodes) connect
// over UCX and, after a hello with the protocol version and the cluster
// token, send:
//   put {key, epoch, offset} + a chunk: the agent looks the write up in its
//     own ObjectIndex by key and epoch (the plan the master ordered here; a
//     peer's spans are never trusted), checks the range lies inside it,
//     pulls the chunk into a host staging buffer and copies it into the
//     store pages with the backend. The header goes WRITING before the first
//     byte and READY after the last, as a producer's copies do; commit stays
//     the master's order.
//   get {key}: a read lease as kvd's own caller, the payload copied out
//     chunk by chunk (store -> staging -> the network, `depth` chunks in
//     flight), the lease ended after the last send completed or the peer
//     went away.
// Every header is decoded and range-checked; a bad one ends that endpoint,
// never the agent. A peer silent for transfer.timeout while it has work in
// flight is dropped.
//
// Threads: one, the agent's own, progressing its UCP worker and sleeping on
// the worker's event fd when idle; it does every copy. No other kvd thread
// waits on it or on the network.
#ifndef NANOKV_DAEMON_TRANSFER_TRANSFER_AGENT_H_
#define NANOKV_DAEMON_TRANSFER_TRANSFER_AGENT_H_

#include <memory>
#include <string>

#include "daemon/config/master_link_config.h"
#include "daemon/objects/object_index.h"
#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

struct TransferAgentOptions {
  std::string listen_address;  // host:port (port 0: any)
  std::string token;           // the cluster's token; empty: any peer that reaches the port may transfer
  TransferConfig config;
};

class TransferAgent {
 public:
  // Binds the listener and starts the thread. kInvalidArgument naming
  // master.data_address for an address that does not parse, kUnavailable
  // when it cannot be bound. `store` and `backend` must outlive the agent.
  static Result<std::unique_ptr<TransferAgent>> Start(ObjectIndex& store, gpu::Backend& backend,
                                                      TransferAgentOptions options);
  ~TransferAgent();  // Stop()
  TransferAgent(const TransferAgent&) = delete;
  TransferAgent& operator=(const TransferAgent&) = delete;

  // Ends every endpoint (leases of reads in flight are released) and joins.
  void Stop();
  // host:port as bound: what peers dial.
  const std::string& address() const;
  // "staging" (device <-> pinned host <-> network) or "direct" (UCX moves
  // device memory itself); only staging is built, direct is reported as
  // possible in the log when UCX could.
  const std::string& mode() const;

  class Impl;

 private:
  explicit TransferAgent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// kvd's start-up: with `master:` and a data_address, reads the token file
// (errors name master.token_file), starts the agent and rewrites
// link->data_address to the address bound (so port 0 is told as the real
// one). nullptr when the node has no data_address.
Result<std::unique_ptr<TransferAgent>> StartTransferAgent(ObjectIndex& store, gpu::Backend& backend,
                                                          MasterLinkConfig* link);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_TRANSFER_TRANSFER_AGENT_H_
