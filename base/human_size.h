// Sizes as people write them: "2097152", "512M", "2G", "1.5GiB", "64 KiB", and
// shares of a whole: "30%" (and 0.3 where a fraction is expected). Used by
// kvd's config, NANOKV_LIMIT and kvctl. K/M/G/T are powers of 1024 with or
// without "iB"; "KB/MB/GB" are powers of 1000, as the SI says.
#ifndef NANOKV_BASE_HUMAN_SIZE_H_
#define NANOKV_BASE_HUMAN_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "nanokv/status.h"

namespace nanokv {

// kInvalidArgument naming the text for anything else (negative, overflow,
// unknown suffix, trailing junk).
Result<uint64_t> ParseBytes(std::string_view text);

// A size or a share: exactly one of the two is set.
struct SizeOrShare {
  uint64_t bytes = 0;
  double fraction = 0;  // in (0, 1] when given as "N%"
  bool is_fraction() const { return fraction > 0; }
  // The bytes this stands for out of `whole`.
  uint64_t Resolve(uint64_t whole) const {
    return is_fraction() ? static_cast<uint64_t>(fraction * static_cast<double>(whole)) : bytes;
  }
};
Result<SizeOrShare> ParseSizeOrShare(std::string_view text);

// "1.5 GiB", "512 MiB", "4 KiB", "17 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace nanokv

#endif  // NANOKV_BASE_HUMAN_SIZE_H_
