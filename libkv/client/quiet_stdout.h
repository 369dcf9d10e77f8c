// A library keeps quiet on stdout: an engine's stdout is
// often a data channel (a server's protocol, a pipe to the next stage).
// libkv, like the layers under it, logs through spdlog's default logger,
// and spdlog's own default logger writes to stdout. So every entry point
// (Client::Attach, ObjectStore::Open, ClusterClient, the C ABI through them)
// first calls KeepLogsOffStdout: where the default logger is still spdlog's
// own stdout one, it is replaced by one of the same name and level on
// stderr. An engine that set its own default logger keeps it.
#ifndef NANOKV_LIBKV_CLIENT_QUIET_STDOUT_H_
#define NANOKV_LIBKV_CLIENT_QUIET_STDOUT_H_

namespace nanokv::client {

// Idempotent and thread-safe.
void KeepLogsOffStdout();

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_QUIET_STDOUT_H_
