// Reading a small file that someone else may have put in the way: a token, a
// certificate, a config. open(2) on a FIFO blocks until a writer comes (and
// a process in open() ignores SIGTERM's default action only after it
// returns), so every such file is opened without blocking and refused unless
// it is a regular file, before one byte is read.
#ifndef NANOKV_BASE_SMALL_FILE_H_
#define NANOKV_BASE_SMALL_FILE_H_

#include <sys/stat.h>

#include <cstddef>
#include <string>

#include "nanokv/status.h"

namespace nanokv {

// A YAML config is a few KiB; the limit refuses only a mistake (a log named
// as the config).
inline constexpr size_t kMaxConfigFileBytes = 1 << 20;

struct SmallFile {
  std::string text;
  struct stat st {};  // of the file read, for its mode and owner
};

// The whole of `path`, at most `max_bytes`. `what` names the file in every
// error ("token file /etc/nanokv/token: not a regular file"). kNotFound when
// it does not exist, kPermissionDenied when it is not a regular file (a FIFO,
// a device, a folder) or not readable, kInvalidArgument when over max_bytes.
// `no_follow`: a symbolic link is refused too (O_NOFOLLOW).
Result<SmallFile> ReadSmallFile(const std::string& path, size_t max_bytes, const std::string& what,
                                bool no_follow = false);

// A PEM file (a certificate chain, a key, a CA bundle: a few KiB, at most
// 1 MiB), as ReadSmallFile reads it; kInvalidArgument when it holds no
// "-----BEGIN" (an empty file, a DER file, the wrong path).
Result<std::string> ReadPemFile(const std::string& path, const std::string& what);

}  // namespace nanokv

#endif  // NANOKV_BASE_SMALL_FILE_H_
