// Who leads an election, as anyone with an etcd client can read it: the
// election itself (master/election/) writes these keys, a standby master,
// kvd or a client reads them.
//
// Layout: each candidate keeps the key `<election_key>/<its lease id, 16 hex
// digits>`, attached to its lease, holding a CandidateRecord
// (ipc/proto/election.proto: id, address). The leader is the candidate whose
// key has the lowest create_revision, and its term is that create_revision:
// etcd's revision only grows and is kept in etcd's log, so each leader's term
// is higher than every earlier leader's, across etcd restarts too. (A key
// comes before the leader's only if it was created before it, and then it
// would be the leader.) Keys under the prefix without a lease are not
// candidates (an operator's stray write cannot block the election).
#ifndef NANOKV_IPC_ETCD_LEADER_RECORD_H_
#define NANOKV_IPC_ETCD_LEADER_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/etcd/etcd_client.h"
#include "ipc/etcd/etcd_types.h"
#include "nanokv/status.h"

namespace nanokv::etcd {

struct LeaderInfo {
  std::string id;
  std::string address;
  uint64_t term = 0;  // strictly increasing from leader to leader
};

inline constexpr size_t kMaxElectionKeyBytes = 512;
inline constexpr size_t kMaxCandidateIdBytes = 128;
inline constexpr size_t kMaxAddressBytes = 256;

// kInvalidArgument unless the key is 1-512 bytes not ending in '/', the id
// 1-128 printable bytes and the address at most 256 printable bytes.
Status CheckElectionKey(std::string_view election_key);
Status CheckCandidate(std::string_view id, std::string_view address);

std::string CandidateKey(std::string_view election_key, int64_t lease_id);
std::string EncodeCandidate(std::string_view id, std::string_view address);
// A candidate's key-value as a LeaderInfo (term = its create_revision);
// kProtocolError naming the key when the value is not a valid record.
Result<LeaderInfo> DecodeCandidate(const KeyValue& kv);

// The candidates now, lowest create_revision (the leader) first, and the
// store's revision they were read at (a watch from revision + 1 misses
// nothing after them). A linearizable read.
struct Candidates {
  int64_t revision = 0;
  std::vector<KeyValue> keys;
};
Result<Candidates> ReadCandidates(EtcdClient& client, std::string_view election_key, Deadline deadline);

// The leader now, nullopt when no candidate stands.
Result<std::optional<LeaderInfo>> ReadLeader(EtcdClient& client, std::string_view election_key,
                                             Deadline deadline);

}  // namespace nanokv::etcd

#endif  // NANOKV_IPC_ETCD_LEADER_RECORD_H_
