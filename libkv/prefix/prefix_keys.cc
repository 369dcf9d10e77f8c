// SHA-256 through OpenSSL's libcrypto (the master's auth links it already).
#include "libkv/prefix/prefix_keys.h"

#include <openssl/evp.h>

#include <array>
#include <cstring>

namespace nanokv::prefix {
namespace {

using Digest = std::array<unsigned char, 32>;

// One EVP digest context, freed on scope exit (the SHA256_* calls are
// deprecated in OpenSSL 3).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { Reset(); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Reset() { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  void Update(const void* data, size_t n) { EVP_DigestUpdate(ctx_, data, n); }
  void Final(unsigned char* out) {
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, out, &n);
  }

 private:
  EVP_MD_CTX* ctx_;
};

void AddU32(Sha256* ctx, uint32_t v) {
  const unsigned char le[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                               static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
  ctx->Update(le, sizeof(le));
}

void AddU64(Sha256* ctx, uint64_t v) {
  AddU32(ctx, static_cast<uint32_t>(v));
  AddU32(ctx, static_cast<uint32_t>(v >> 32));
}

void AddField(Sha256* ctx, const std::string& field) {
  AddU32(ctx, static_cast<uint32_t>(field.size()));
  ctx->Update(field.data(), field.size());
}

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace

std::string ChainSeed(const PrefixNamespace& space, const PrefixLayout& layout, uint32_t chunk_tokens) {
  Sha256 ctx;
  static constexpr char kVersion[] = "nanokv.prefix.v1";
  ctx.Update(kVersion, sizeof(kVersion));  // with its NUL
  AddField(&ctx, space.model);
  AddField(&ctx, space.dtype);
  AddField(&ctx, space.layout);
  AddField(&ctx, space.salt);
  AddU32(&ctx, chunk_tokens);
  AddU32(&ctx, layout.layers);
  AddU32(&ctx, layout.planes_per_layer);
  AddU64(&ctx, layout.token_bytes);
  Digest seed;
  ctx.Final(seed.data());
  return std::string(reinterpret_cast<const char*>(seed.data()), seed.size());
}

std::vector<std::string> ChainKeys(const std::string& seed, std::span<const int32_t> tokens, uint32_t chunk_tokens) {
  std::vector<std::string> keys;
  const size_t chunks = tokens.size() / chunk_tokens;
  keys.reserve(chunks);
  Digest previous;
  std::memcpy(previous.data(), seed.data(), previous.size());
  std::vector<unsigned char> le(size_t{chunk_tokens} * 4);
  Sha256 ctx;
  for (size_t c = 0; c < chunks; ++c) {
    for (uint32_t i = 0; i < chunk_tokens; ++i) {
      const auto v = static_cast<uint32_t>(tokens[c * chunk_tokens + i]);
      le[4 * i] = static_cast<unsigned char>(v);
      le[4 * i + 1] = static_cast<unsigned char>(v >> 8);
      le[4 * i + 2] = static_cast<unsigned char>(v >> 16);
      le[4 * i + 3] = static_cast<unsigned char>(v >> 24);
    }
    ctx.Reset();
    ctx.Update(previous.data(), previous.size());
    ctx.Update(le.data(), le.size());
    ctx.Final(previous.data());
    keys.push_back(Hex(previous.data(), previous.size()));
  }
  return keys;
}

}  // namespace nanokv::prefix
