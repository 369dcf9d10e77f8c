// Range checks of everything that crosses the master's boundary
// (ipc/proto/master.proto). The master runs them on every request and on
// every message a node sends before it looks further; a kvd runs them on
// every message a master sends. A batch is refused whole only for its shape
// (no items, too many); a bad item gets its own status beside good ones.
// Every error is kInvalidArgument (a caller's request) or kProtocolError (a
// peer's message) and names the field.
#ifndef NANOKV_IPC_MASTER_MASTER_CHECKS_H_
#define NANOKV_IPC_MASTER_MASTER_CHECKS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "ipc/proto/master.pb.h"
#include "nanokv/status.h"

namespace nanokv::master {

// Node ids: 1..kMaxNodeIdBytes of [A-Za-z0-9_.-], not starting with '.'
// (a host name fits).
bool ValidNodeId(std::string_view id);

// A preferred segment: "" (none), "<node>" or "<node>/<device>".
struct Segment {
  std::string node_id;  // empty: none
  int device = -1;      // -1: any device of the node
};
Result<Segment> ParseSegment(std::string_view text);

// The key rule of nanokv/object_header.h, naming `where`.
Status CheckKey(std::string_view key, std::string_view where);

// Requests from engines and tools. The batch checks say whether the request
// may be served at all; the item checks give each item its status.
Status CheckBatchSize(size_t items, std::string_view what);
Status CheckWriteItem(const v1::WriteItem& item);
Status CheckWriteRef(const v1::WriteRef& ref);
Status CheckKeysRequest(const v1::KeysRequest& request);
// A node's route (its host and kvd socket), as it registered or as a
// master relays it: printable, bounded, the socket an absolute path.
Status CheckRoute(const v1::NodeRoute& route, const std::string& where);

// What a node sends, and what a master sends (kProtocolError).
Status CheckNodeMessage(const v1::NodeMessage& message);
Status CheckMasterMessage(const v1::MasterMessage& message);
// A node's reply to an instruction of `orders` orders: one status each, and
// for an open one valid plan per status that is OK.
Status CheckInstructionReply(const v1::InstructionReply& reply, size_t orders, bool plans);

}  // namespace nanokv::master

#endif  // NANOKV_IPC_MASTER_MASTER_CHECKS_H_
