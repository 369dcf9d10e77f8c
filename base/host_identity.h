// What tells two processes they run on one host (one kernel): the kernel's
// boot id, which every container of the host shares, unless an operator
// names the host otherwise. A kvd publishes it in its node record; a cluster
// client whose host identity is the same reaches that kvd's socket and maps
// its pages, so device bytes between them never cross host memory.
#ifndef NANOKV_BASE_HOST_IDENTITY_H_
#define NANOKV_BASE_HOST_IDENTITY_H_

#include <string>

namespace nanokv {

// "NANOKV_HOST_ID": a client's host identity, over the boot id. Set it
// different on two processes of one host to make them take the path between
// hosts (tests, benchmarks), or alike on hosts that share memory otherwise.
inline constexpr const char* kHostIdVariable = "NANOKV_HOST_ID";

// `configured` when not empty, else $NANOKV_HOST_ID, else "boot:" and the
// kernel's boot id (/proc/sys/kernel/random/boot_id); "" when none can be
// read (then no peer counts as this host).
std::string HostIdentity(const std::string& configured = "");

}  // namespace nanokv

#endif  // NANOKV_BASE_HOST_IDENTITY_H_
