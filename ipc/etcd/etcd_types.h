// The vocabulary of the etcd client (ipc/etcd/etcd_client.h): what a call
// takes and what it answers, in our types, so no caller sees protobuf.
// Glossary: a *revision* is etcd's store-wide counter, bumped by every change
// and never reused (it survives restarts, being in etcd's log); a key's
// *create_revision* is the revision of its creation, *mod_revision* of its
// last change, *version* the count of changes since creation. A *lease* is a
// TTL in etcd that keys can be attached to: they are deleted when it expires.
#ifndef NANOKV_IPC_ETCD_ETCD_TYPES_H_
#define NANOKV_IPC_ETCD_ETCD_TYPES_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nanokv::etcd {

// Every call ends by its deadline, on the monotonic clock.
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline DeadlineIn(Clock::duration timeout) { return Clock::now() + timeout; }

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;  // 0: none
};

// The end of the range that holds every key starting with `prefix` (etcd's
// rule: the prefix with its last byte below 0xff incremented, the bytes after
// it dropped; "\0", every key, when there is none).
std::string PrefixEnd(std::string_view prefix);

// A read. `range_end` empty: `key` alone; else keys in [key, range_end).
struct RangeSpec {
  enum class Sort { kKey, kCreateRevision };  // ascending either way
  std::string key;
  std::string range_end;
  int64_t limit = 0;     // 0: all
  int64_t revision = 0;  // 0: the newest
  Sort sort = Sort::kKey;
  bool keys_only = false;
  bool count_only = false;
  bool serializable = false;  // false: linearizable (what etcd has committed)

  static RangeSpec Key(std::string key) {
    RangeSpec spec;
    spec.key = std::move(key);
    return spec;
  }
  static RangeSpec Prefix(std::string prefix) {
    RangeSpec spec;
    spec.range_end = PrefixEnd(prefix);
    spec.key = std::move(prefix);
    return spec;
  }
};

struct RangeResult {
  int64_t revision = 0;  // the store's revision when it was read
  std::vector<KeyValue> kvs;
  bool more = false;     // the range holds more than `limit`
  int64_t count = 0;     // keys in the range
};

// A condition of a transaction: `target` of `key` compared to a number
// (version, create or mod revision, lease) or to `value`.
struct Compare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue, kLease };
  enum class Op { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = Target::kVersion;
  Op op = Op::kEqual;
  int64_t number = 0;
  std::string value;

  // create_revision == 0 is "the key does not exist".
  static Compare CreateRevision(std::string key, Op op, int64_t revision) {
    return {std::move(key), Target::kCreateRevision, op, revision, {}};
  }
  static Compare ModRevision(std::string key, Op op, int64_t revision) {
    return {std::move(key), Target::kModRevision, op, revision, {}};
  }
  static Compare Version(std::string key, Op op, int64_t version) {
    return {std::move(key), Target::kVersion, op, version, {}};
  }
  static Compare Value(std::string key, Op op, std::string value) {
    return {std::move(key), Target::kValue, op, 0, std::move(value)};
  }
  static Compare Lease(std::string key, Op op, int64_t lease) {
    return {std::move(key), Target::kLease, op, lease, {}};
  }
};

// One operation of a transaction's branch.
struct TxnOp {
  enum class Kind { kRange, kPut, kDelete };
  Kind kind = Kind::kRange;
  std::string key;
  std::string range_end;  // kRange, kDelete: as in RangeSpec
  std::string value;      // kPut
  int64_t lease = 0;      // kPut

  static TxnOp Get(std::string key, std::string range_end = {}) {
    return {Kind::kRange, std::move(key), std::move(range_end), {}, 0};
  }
  static TxnOp Put(std::string key, std::string value, int64_t lease = 0) {
    return {Kind::kPut, std::move(key), {}, std::move(value), lease};
  }
  static TxnOp Delete(std::string key, std::string range_end = {}) {
    return {Kind::kDelete, std::move(key), std::move(range_end), {}, 0};
  }
};

// If every compare holds, `success` runs, else `failure`: atomically, at one
// revision.
struct TxnSpec {
  std::vector<Compare> compares;
  std::vector<TxnOp> success;
  std::vector<TxnOp> failure;
};

// What one TxnOp answered, in the order of the branch that ran.
struct TxnOpResult {
  TxnOp::Kind kind = TxnOp::Kind::kRange;
  std::vector<KeyValue> kvs;  // kRange
  int64_t deleted = 0;        // kDelete
};

struct TxnResult {
  int64_t revision = 0;  // after the transaction
  bool succeeded = false;
  std::vector<TxnOpResult> results;
};

struct LeaseGrant {
  int64_t id = 0;
  std::chrono::seconds ttl{0};  // what etcd granted: at least its minimum
};

struct LeaseTimeToLive {
  int64_t id = 0;
  std::chrono::seconds remaining{0};  // left now; negative: expired or never granted
  std::chrono::seconds granted{0};
  std::vector<std::string> keys;      // when asked for
};

// A watch of `key`, or of [key, range_end), from `start_revision` (0: from
// now on; a revision etcd has compacted away ends the watch).
struct WatchSpec {
  std::string key;
  std::string range_end;
  int64_t start_revision = 0;
  bool prev_kv = false;
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // kDelete: the key, and mod_revision = the deletion's
  std::optional<KeyValue> prev_kv;
};

// Events of one or more revisions, in order (none: a progress notice).
struct WatchBatch {
  int64_t revision = 0;
  std::vector<WatchEvent> events;
};

}  // namespace nanokv::etcd

#endif  // NANOKV_IPC_ETCD_ETCD_TYPES_H_
