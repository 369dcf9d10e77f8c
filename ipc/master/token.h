// The cluster's shared secret: one token file that nodes, clients and masters
// all name (token_file in their configs). A master with a token refuses every
// call that does not carry the same token; the comparison takes the same time
// wherever the two differ, so a caller cannot find it a byte at a time.
#ifndef NANOKV_IPC_MASTER_TOKEN_H_
#define NANOKV_IPC_MASTER_TOKEN_H_

#include <string>
#include <string_view>

#include "nanokv/status.h"

namespace nanokv::master {

// The token in `path`: its text less trailing whitespace, 1 to kMaxTokenBytes
// printable ASCII bytes (it travels as gRPC metadata). Refused, naming the
// file: not a regular file, readable or writable by others (mode & 007: a
// secret for a group of users is shared through the file's group), empty,
// too long, or other bytes.
Result<std::string> ReadTokenFile(const std::string& path);

// Whether `given` equals `expected`, in time that depends only on their
// lengths, not on where they differ.
bool TokensEqual(std::string_view given, std::string_view expected);

}  // namespace nanokv::master

#endif  // NANOKV_IPC_MASTER_TOKEN_H_
