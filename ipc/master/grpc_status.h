// nanokv::Status across gRPC. A master ends a failed call with a grpc::Status
// whose details hold the nanokv::Code as a decimal number, so the caller gets
// the exact code back; a status without one (the transport's own: deadline,
// connection refused) is mapped by its gRPC code. A batch's per-item
// outcomes travel as ItemStatus (ipc/proto/master.proto).
#ifndef NANOKV_IPC_MASTER_GRPC_STATUS_H_
#define NANOKV_IPC_MASTER_GRPC_STATUS_H_

#include <string_view>

#include <grpcpp/support/status.h>

#include "ipc/proto/master.pb.h"
#include "nanokv/status.h"

namespace nanokv::master {

grpc::Status ToGrpcStatus(const Status& status);
// `peer` prefixes the message ("master 10.0.0.1:7470: ...").
Status FromGrpcStatus(const grpc::Status& status, std::string_view peer);

void ToItem(const Status& status, v1::ItemStatus* out);
// The Status an ItemStatus stands for; a code out of range is kProtocolError.
Status FromItem(const v1::ItemStatus& item, std::string_view peer);

}  // namespace nanokv::master

#endif  // NANOKV_IPC_MASTER_GRPC_STATUS_H_
