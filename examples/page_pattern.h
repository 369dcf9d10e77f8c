// The bytes the example engine writes into a page: one 64-bit word per
// position, derived from a tag (seed and page index), so any overwrite by
// another holder shows. Shared with the integration tests that check them.
#ifndef NANOKV_EXAMPLES_PAGE_PATTERN_H_
#define NANOKV_EXAMPLES_PAGE_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nanokv::examples {

inline uint64_t PageTag(uint32_t seed, size_t index) { return (uint64_t{seed} << 32) | index; }

inline std::vector<uint64_t> PageWords(size_t page_bytes, uint64_t tag) {
  std::vector<uint64_t> words(page_bytes / sizeof(uint64_t));
  for (size_t i = 0; i < words.size(); ++i) words[i] = tag * 0x9E3779B97F4A7C15ull + i;
  return words;
}

}  // namespace nanokv::examples

#endif  // NANOKV_EXAMPLES_PAGE_PATTERN_H_
