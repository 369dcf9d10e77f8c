// Who is a master of this cluster, and who may call one: a challenge on the
// shared token, so that neither side ever sends the token itself. A caller
// with a token first says Hello with a fresh nonce; the master answers with
// a ticket of its own randomness and a proof, HMAC-SHA256(token, its label,
// nonce, ticket), that only a holder of the token can make. The caller checks
// the proof before it sends anything else (its objects, its term, a request),
// then puts on every call a credential, HMAC(token, another label, nonce,
// ticket), which any master with the token checks without state (a master
// that restarted or took over leadership accepts it too).
//
// What this protects: a process that binds the master's port while the master
// is down (any local user can) learns neither the token nor anything a node
// would send, and cannot give a node an order or a term. What it does not:
// without TLS an eavesdropper on the wire can replay a caller's credential
// (never learn the token) and a man in the middle with a live master behind
// it can relay; TLS (tls: in the configs) is for networks you do not trust.
#ifndef NANOKV_IPC_MASTER_MASTER_AUTH_H_
#define NANOKV_IPC_MASTER_MASTER_AUTH_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "nanokv/status.h"

namespace nanokv::master {

inline constexpr size_t kNonceBytes = 16;  // the caller's and the master's randomness
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256
// The credential's metadata: hex(nonce) "." hex(ticket) "." hex(mac).
inline constexpr char kCredentialKey[] = "nanokv-credential";
inline constexpr size_t kCredentialChars = 2 * (kNonceBytes + kNonceBytes + kProofBytes) + 2;

// kNonceBytes from the system's random source (OpenSSL's RAND_bytes).
std::string NewNonce();

// The master's answer to a Hello with `nonce`: a fresh ticket and the proof.
struct HelloAnswer {
  std::string ticket;
  std::string proof;
};
HelloAnswer AnswerHello(std::string_view token, std::string_view nonce);

// The caller's check of a master's answer to its Hello with `nonce`; on
// success the credential its calls carry. kPermissionDenied when the proof is
// not the token's (not a master of this cluster), kInvalidArgument when the
// answer is malformed.
Result<std::string> AcceptHello(std::string_view token, std::string_view nonce, std::string_view ticket,
                                std::string_view proof);

// The master's check of a call's credential (metadata kCredentialKey): OK
// only when it was made with `token`. Hostile input: any bytes are refused
// cleanly, and the comparison takes the same time wherever it differs.
Status CheckCredential(std::string_view token, std::string_view credential);

// What a transfer hello carries in place of the token (the data path between
// nodes, daemon/transfer/): hex HMAC(token, a label of its own), "" without a
// token. Why: a process on a dead kvd's data port learns from a hello only
// this key, never the token that gives the master's calls.
std::string DataPathKey(std::string_view token);

}  // namespace nanokv::master

#endif  // NANOKV_IPC_MASTER_MASTER_AUTH_H_
