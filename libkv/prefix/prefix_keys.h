// The prefix cache's key chain: SHA-256 over the namespace and layout (the
// seed), then over each chunk's tokens after the previous chunk's digest, so
// a chunk's key stands for every token before and in it. Stable across
// processes, runs and machines (tokens hashed as little-endian int32).
#ifndef NANOKV_LIBKV_PREFIX_PREFIX_KEYS_H_
#define NANOKV_LIBKV_PREFIX_PREFIX_KEYS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nanokv/prefix_cache.h"

namespace nanokv::prefix {

// The chain's seed (32 raw bytes): every namespace field length-prefixed, so
// ("ab", "c") and ("a", "bc") differ, then chunk_tokens and the layout.
std::string ChainSeed(const PrefixNamespace& space, const PrefixLayout& layout, uint32_t chunk_tokens);

// The hex digest of each full chunk of `tokens`, in order.
std::vector<std::string> ChainKeys(const std::string& seed, std::span<const int32_t> tokens, uint32_t chunk_tokens);

}  // namespace nanokv::prefix

#endif  // NANOKV_LIBKV_PREFIX_PREFIX_KEYS_H_
