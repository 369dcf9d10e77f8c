#include "ipc/etcd/leader_record.h"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "ipc/proto/election.pb.h"

namespace nanokv::etcd {
namespace {

bool Printable(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c <= '~'; });
}

std::string CandidatePrefix(std::string_view election_key) { return std::string(election_key) + "/"; }

}  // namespace

Status CheckElectionKey(std::string_view election_key) {
  if (election_key.empty() || election_key.size() > kMaxElectionKeyBytes || election_key.back() == '/') {
    return Status::InvalidArgument("election key '" + std::string(election_key.substr(0, 64)) +
                                   "': want 1-512 bytes, not ending in '/'");
  }
  return Status::OK();
}

Status CheckCandidate(std::string_view id, std::string_view address) {
  if (id.empty() || id.size() > kMaxCandidateIdBytes || !Printable(id)) {
    return Status::InvalidArgument("candidate id '" + std::string(id.substr(0, 64)) +
                                   "': want 1-128 printable bytes without spaces");
  }
  if (address.size() > kMaxAddressBytes || !Printable(address)) {
    return Status::InvalidArgument("candidate address '" + std::string(address.substr(0, 64)) +
                                   "': want at most 256 printable bytes without spaces");
  }
  return Status::OK();
}

std::string CandidateKey(std::string_view election_key, int64_t lease_id) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(lease_id));
  return CandidatePrefix(election_key) + hex;
}

std::string EncodeCandidate(std::string_view id, std::string_view address) {
  election::CandidateRecord record;
  record.set_id(std::string(id));
  record.set_address(std::string(address));
  return record.SerializeAsString();
}

Result<LeaderInfo> DecodeCandidate(const KeyValue& kv) {
  election::CandidateRecord record;
  if (kv.value.size() > 2 * (kMaxCandidateIdBytes + kMaxAddressBytes) || !record.ParseFromString(kv.value)) {
    return Status::ProtocolError("candidate key '" + kv.key + "' does not hold a candidate record");
  }
  Status valid = CheckCandidate(record.id(), record.address());
  if (!valid.ok()) return Status::ProtocolError("candidate key '" + kv.key + "': " + std::string(valid.message()));
  if (kv.create_revision <= 0) return Status::ProtocolError("candidate key '" + kv.key + "' has no create revision");
  return LeaderInfo{record.id(), record.address(), static_cast<uint64_t>(kv.create_revision)};
}

Result<Candidates> ReadCandidates(EtcdClient& client, std::string_view election_key, Deadline deadline) {
  NANOKV_RETURN_IF_ERROR(CheckElectionKey(election_key));
  RangeSpec spec = RangeSpec::Prefix(CandidatePrefix(election_key));
  spec.sort = RangeSpec::Sort::kCreateRevision;
  NANOKV_ASSIGN_OR_RETURN(RangeResult range, client.Range(spec, deadline));
  Candidates candidates;
  candidates.revision = range.revision;
  for (KeyValue& kv : range.kvs) {
    if (kv.lease == 0) {
      spdlog::warn("election {}: key '{}' has no lease: not a candidate, ignored", election_key, kv.key);
      continue;
    }
    candidates.keys.push_back(std::move(kv));
  }
  // etcd sorted them; a reply out of order would crown the wrong leader.
  bool sorted = std::is_sorted(candidates.keys.begin(), candidates.keys.end(), [](const KeyValue& a, const KeyValue& b) {
    return a.create_revision < b.create_revision;
  });
  if (!sorted) return Status::ProtocolError("etcd: the candidates of " + std::string(election_key) + " came unsorted");
  return candidates;
}

Result<std::optional<LeaderInfo>> ReadLeader(EtcdClient& client, std::string_view election_key, Deadline deadline) {
  NANOKV_ASSIGN_OR_RETURN(Candidates candidates, ReadCandidates(client, election_key, deadline));
  if (candidates.keys.empty()) return std::optional<LeaderInfo>();
  NANOKV_ASSIGN_OR_RETURN(LeaderInfo leader, DecodeCandidate(candidates.keys.front()));
  return std::optional<LeaderInfo>(std::move(leader));
}

}  // namespace nanokv::etcd
