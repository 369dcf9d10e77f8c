// Our etcd types to etcd's messages and back. etcd is trusted, but a reply
// is still checked before we use it: a reply without its header, a key-value
// without a key or with revisions that cannot be, a transaction answering
// ops it was not asked, are kProtocolError naming the call, never a crash.
// Internal to ipc/etcd/.
#ifndef NANOKV_IPC_ETCD_ETCD_DECODE_H_
#define NANOKV_IPC_ETCD_ETCD_DECODE_H_

#include <string_view>

#include "ipc/etcd/etcd_types.h"
#include "ipc/proto/etcd_v3.pb.h"
#include "nanokv/status.h"

namespace nanokv::etcd {

void EncodeRange(const RangeSpec& spec, etcdserverpb::RangeRequest* out);
void EncodeTxn(const TxnSpec& spec, etcdserverpb::TxnRequest* out);
void EncodeWatch(const WatchSpec& spec, etcdserverpb::WatchCreateRequest* out);

// The header's revision; kProtocolError when the header is missing.
Result<int64_t> DecodeHeader(bool has_header, const etcdserverpb::ResponseHeader& header,
                             std::string_view what);
// A live key-value (non-empty key, 0 < create_revision <= mod_revision,
// version > 0, lease >= 0).
Result<KeyValue> DecodeKeyValue(const etcdserverpb::KeyValue& kv, std::string_view what);

Result<RangeResult> DecodeRange(const etcdserverpb::RangeResponse& reply, std::string_view what);
// `spec` is what was asked: each answer must match its op's kind.
Result<TxnResult> DecodeTxn(const TxnSpec& spec, const etcdserverpb::TxnResponse& reply);
// Events of a watch reply (a deleted key has only its key and mod_revision).
Result<WatchBatch> DecodeWatch(const etcdserverpb::WatchResponse& reply);

}  // namespace nanokv::etcd

#endif  // NANOKV_IPC_ETCD_ETCD_DECODE_H_
