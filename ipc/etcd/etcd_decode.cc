#include "ipc/etcd/etcd_decode.h"

#include <string>

namespace nanokv::etcd {
namespace {

namespace pb = etcdserverpb;

Status Malformed(std::string_view what, const std::string& why) {
  return Status::ProtocolError("etcd: " + std::string(what) + " reply: " + why);
}

pb::Compare::CompareTarget TargetOf(Compare::Target target) {
  switch (target) {
    case Compare::Target::kVersion: return pb::Compare::VERSION;
    case Compare::Target::kCreateRevision: return pb::Compare::CREATE;
    case Compare::Target::kModRevision: return pb::Compare::MOD;
    case Compare::Target::kValue: return pb::Compare::VALUE;
    case Compare::Target::kLease: return pb::Compare::LEASE;
  }
  return pb::Compare::VERSION;
}

pb::Compare::CompareResult ResultOf(Compare::Op op) {
  switch (op) {
    case Compare::Op::kEqual: return pb::Compare::EQUAL;
    case Compare::Op::kGreater: return pb::Compare::GREATER;
    case Compare::Op::kLess: return pb::Compare::LESS;
    case Compare::Op::kNotEqual: return pb::Compare::NOT_EQUAL;
  }
  return pb::Compare::EQUAL;
}

void EncodeOp(const TxnOp& op, pb::RequestOp* out) {
  switch (op.kind) {
    case TxnOp::Kind::kRange: {
      auto* range = out->mutable_request_range();
      range->set_key(op.key);
      range->set_range_end(op.range_end);
      break;
    }
    case TxnOp::Kind::kPut: {
      auto* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case TxnOp::Kind::kDelete: {
      auto* del = out->mutable_request_delete_range();
      del->set_key(op.key);
      del->set_range_end(op.range_end);
      break;
    }
  }
}

// A deleted key in a watch event: only the key and the deletion's revision.
Result<KeyValue> DecodeDeleted(const pb::KeyValue& kv, std::string_view what) {
  if (kv.key().empty()) return Malformed(what, "a deleted key-value without a key");
  if (kv.mod_revision() <= 0) return Malformed(what, "deleted key '" + kv.key() + "' without a revision");
  KeyValue out;
  out.key = kv.key();
  out.mod_revision = kv.mod_revision();
  return out;
}

}  // namespace

void EncodeRange(const RangeSpec& spec, pb::RangeRequest* out) {
  out->set_key(spec.key);
  out->set_range_end(spec.range_end);
  out->set_limit(spec.limit);
  out->set_revision(spec.revision);
  if (spec.sort == RangeSpec::Sort::kCreateRevision) {
    out->set_sort_order(pb::RangeRequest::ASCEND);
    out->set_sort_target(pb::RangeRequest::CREATE);
  }
  out->set_keys_only(spec.keys_only);
  out->set_count_only(spec.count_only);
  out->set_serializable(spec.serializable);
}

void EncodeTxn(const TxnSpec& spec, pb::TxnRequest* out) {
  for (const Compare& compare : spec.compares) {
    auto* c = out->add_compare();
    c->set_key(compare.key);
    c->set_target(TargetOf(compare.target));
    c->set_result(ResultOf(compare.op));
    switch (compare.target) {
      case Compare::Target::kVersion: c->set_version(compare.number); break;
      case Compare::Target::kCreateRevision: c->set_create_revision(compare.number); break;
      case Compare::Target::kModRevision: c->set_mod_revision(compare.number); break;
      case Compare::Target::kValue: c->set_value(compare.value); break;
      case Compare::Target::kLease: c->set_lease(compare.number); break;
    }
  }
  for (const TxnOp& op : spec.success) EncodeOp(op, out->add_success());
  for (const TxnOp& op : spec.failure) EncodeOp(op, out->add_failure());
}

void EncodeWatch(const WatchSpec& spec, pb::WatchCreateRequest* out) {
  out->set_key(spec.key);
  out->set_range_end(spec.range_end);
  out->set_start_revision(spec.start_revision);
  out->set_prev_kv(spec.prev_kv);
}

Result<int64_t> DecodeHeader(bool has_header, const pb::ResponseHeader& header, std::string_view what) {
  if (!has_header) return Malformed(what, "no header");
  if (header.revision() < 0) return Malformed(what, "a negative revision in its header");
  return header.revision();
}

Result<KeyValue> DecodeKeyValue(const pb::KeyValue& kv, std::string_view what) {
  if (kv.key().empty()) return Malformed(what, "a key-value without a key");
  if (kv.create_revision() <= 0 || kv.mod_revision() < kv.create_revision() || kv.version() <= 0 ||
      kv.lease() < 0) {
    return Malformed(what, "key '" + kv.key() + "' has create_revision " + std::to_string(kv.create_revision()) +
                               ", mod_revision " + std::to_string(kv.mod_revision()) + ", version " +
                               std::to_string(kv.version()) + ", lease " + std::to_string(kv.lease()));
  }
  return KeyValue{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()};
}

Result<RangeResult> DecodeRange(const pb::RangeResponse& reply, std::string_view what) {
  RangeResult result;
  NANOKV_ASSIGN_OR_RETURN(result.revision, DecodeHeader(reply.has_header(), reply.header(), what));
  result.kvs.reserve(static_cast<size_t>(reply.kvs_size()));
  for (const auto& kv : reply.kvs()) {
    NANOKV_ASSIGN_OR_RETURN(KeyValue decoded, DecodeKeyValue(kv, what));
    result.kvs.push_back(std::move(decoded));
  }
  result.more = reply.more();
  result.count = reply.count();
  if (result.count < static_cast<int64_t>(result.kvs.size())) {
    return Malformed(what, "count " + std::to_string(result.count) + " under the " +
                               std::to_string(result.kvs.size()) + " key-values it carries");
  }
  return result;
}

Result<TxnResult> DecodeTxn(const TxnSpec& spec, const pb::TxnResponse& reply) {
  TxnResult result;
  NANOKV_ASSIGN_OR_RETURN(result.revision, DecodeHeader(reply.has_header(), reply.header(), "Txn"));
  result.succeeded = reply.succeeded();
  const std::vector<TxnOp>& asked = result.succeeded ? spec.success : spec.failure;
  if (static_cast<size_t>(reply.responses_size()) != asked.size()) {
    return Malformed("Txn", std::to_string(reply.responses_size()) + " answers to " +
                                std::to_string(asked.size()) + " operations");
  }
  for (size_t i = 0; i < asked.size(); ++i) {
    const pb::ResponseOp& answer = reply.responses(static_cast<int>(i));
    TxnOpResult op;
    op.kind = asked[i].kind;
    bool matches = false;
    switch (op.kind) {
      case TxnOp::Kind::kRange:
        if ((matches = answer.has_response_range())) {
          NANOKV_ASSIGN_OR_RETURN(RangeResult range, DecodeRange(answer.response_range(), "Txn range"));
          op.kvs = std::move(range.kvs);
        }
        break;
      case TxnOp::Kind::kPut:
        matches = answer.has_response_put();
        break;
      case TxnOp::Kind::kDelete:
        if ((matches = answer.has_response_delete_range())) {
          op.deleted = answer.response_delete_range().deleted();
        }
        break;
    }
    if (!matches) return Malformed("Txn", "answer " + std::to_string(i) + " is not of the kind asked");
    result.results.push_back(std::move(op));
  }
  return result;
}

Result<WatchBatch> DecodeWatch(const pb::WatchResponse& reply) {
  WatchBatch batch;
  NANOKV_ASSIGN_OR_RETURN(batch.revision, DecodeHeader(reply.has_header(), reply.header(), "Watch"));
  batch.events.reserve(static_cast<size_t>(reply.events_size()));
  for (const pb::Event& event : reply.events()) {
    if (!event.has_kv()) return Malformed("Watch", "an event without its key-value");
    WatchEvent out;
    switch (event.type()) {
      case pb::Event::PUT: {
        out.type = WatchEvent::Type::kPut;
        NANOKV_ASSIGN_OR_RETURN(out.kv, DecodeKeyValue(event.kv(), "Watch"));
        break;
      }
      case pb::Event::DELETE: {
        out.type = WatchEvent::Type::kDelete;
        NANOKV_ASSIGN_OR_RETURN(out.kv, DecodeDeleted(event.kv(), "Watch"));
        break;
      }
      default:
        return Malformed("Watch", "event type " + std::to_string(static_cast<int>(event.type())));
    }
    if (event.has_prev_kv()) {
      NANOKV_ASSIGN_OR_RETURN(KeyValue prev, DecodeKeyValue(event.prev_kv(), "Watch"));
      out.prev_kv = std::move(prev);
    }
    batch.events.push_back(std::move(out));
  }
  return batch;
}

}  // namespace nanokv::etcd
