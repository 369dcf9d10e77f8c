// Where a daemon's log lines go (kvd; the master uses the same): every line
// to stderr, and with a log file appended there too, as text or as JSON lines
// (one object per line: ts, level, logger, pid, tid, msg), for journald,
// Loki, Elastic and friends. spdlog's default logger is replaced, so the lines
// of every library in the process (libkv's, ipc's) take the same way.
#ifndef NANOKV_OPS_LOGGING_H_
#define NANOKV_OPS_LOGGING_H_

#include <string>
#include <string_view>

#include "nanokv/status.h"

namespace nanokv::ops {

enum class LogFormat { kText, kJson };

// "text" or "json"; kInvalidArgument naming both otherwise.
Result<LogFormat> ParseLogFormat(std::string_view text);

struct LogOptions {
  std::string program = "kvd";  // the logger's name: the JSON "logger" field
  std::string level = "info";   // trace, debug, info, warn, error, critical, off
  LogFormat format = LogFormat::kText;
  std::string file;             // empty: stderr only; else appended to as well
};

// Replaces spdlog's default logger. kIOError naming the file when it cannot
// be opened for appending (the logger stays as it was then); kInvalidArgument
// for an unknown level.
Status SetUpLogging(const LogOptions& options);

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_LOGGING_H_
