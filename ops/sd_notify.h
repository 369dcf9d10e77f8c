// systemd's readiness protocol (Type=notify, sd_notify(3)) without
// libsystemd: one datagram of "KEY=value" lines to the Unix socket named by
// $NOTIFY_SOCKET ("@name" is an abstract socket). With no $NOTIFY_SOCKET
// (not started by systemd) it does nothing.
#ifndef NANOKV_OPS_SD_NOTIFY_H_
#define NANOKV_OPS_SD_NOTIFY_H_

#include <string_view>

#include "nanokv/status.h"

namespace nanokv::ops {

// Sends `state` ("READY=1\nSTATUS=serving"). OK when sent or when there is
// no $NOTIFY_SOCKET; kInvalidArgument for a socket name that is not a Unix
// socket path; the send's errno otherwise.
Status SdNotify(std::string_view state);

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_SD_NOTIFY_H_
