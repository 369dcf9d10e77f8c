#include "ipc/master/master_auth.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "ipc/master/token.h"

namespace nanokv::master {
namespace {

// The two labels keep a master's proof from ever serving as a caller's
// credential, or the other way round.
constexpr std::string_view kMasterLabel = "nanokv master proof v2";
constexpr std::string_view kCallerLabel = "nanokv caller credential v2";

std::string Mac(std::string_view token, std::string_view label, std::string_view nonce, std::string_view ticket) {
  std::string message;
  message.reserve(label.size() + 1 + nonce.size() + ticket.size());
  message.append(label).push_back('\0');
  message.append(nonce).append(ticket);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &length);
  return std::string(reinterpret_cast<const char*>(out), length);
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// `hex` of exactly 2*n lower-case digits into n bytes; false otherwise.
bool Unhex(std::string_view hex, size_t n, std::string* out) {
  if (hex.size() != 2 * n) return false;
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    int hi = HexDigit(hex[2 * i]);
    int lo = HexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<char>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

std::string NewNonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    // No randomness is no authentication: never go on with a guessable nonce.
    std::abort();
  }
  return nonce;
}

HelloAnswer AnswerHello(std::string_view token, std::string_view nonce) {
  HelloAnswer answer;
  answer.ticket = NewNonce();
  answer.proof = Mac(token, kMasterLabel, nonce, answer.ticket);
  return answer;
}

Result<std::string> AcceptHello(std::string_view token, std::string_view nonce, std::string_view ticket,
                                std::string_view proof) {
  if (ticket.size() != kNonceBytes || proof.size() != kProofBytes) {
    return Status::InvalidArgument("the master's hello answer has a ticket of " + std::to_string(ticket.size()) +
                                   " bytes and a proof of " + std::to_string(proof.size()) + " (want " +
                                   std::to_string(kNonceBytes) + " and " + std::to_string(kProofBytes) + ")");
  }
  if (!TokensEqual(proof, Mac(token, kMasterLabel, nonce, ticket))) {
    return Status::PermissionDenied(
        "it did not prove that it holds the cluster token (token_file): not a master of this cluster");
  }
  return Hex(nonce) + "." + Hex(ticket) + "." + Hex(Mac(token, kCallerLabel, nonce, ticket));
}

Status CheckCredential(std::string_view token, std::string_view credential) {
  std::string nonce, ticket, mac;
  const bool parsed = credential.size() == kCredentialChars && credential[2 * kNonceBytes] == '.' &&
                      credential[4 * kNonceBytes + 1] == '.' &&
                      Unhex(credential.substr(0, 2 * kNonceBytes), kNonceBytes, &nonce) &&
                      Unhex(credential.substr(2 * kNonceBytes + 1, 2 * kNonceBytes), kNonceBytes, &ticket) &&
                      Unhex(credential.substr(4 * kNonceBytes + 2), kProofBytes, &mac);
  if (!parsed) {
    return Status::PermissionDenied("the call's credential (" + std::string(kCredentialKey) + ") is malformed");
  }
  if (!TokensEqual(mac, Mac(token, kCallerLabel, nonce, ticket))) {
    return Status::PermissionDenied("the call's credential was not made with this master's cluster token (token_file)");
  }
  return Status::OK();
}

std::string DataPathKey(std::string_view token) {
  if (token.empty()) return std::string();
  return Hex(Mac(token, "nanokv data path key v2", "", ""));
}

}  // namespace nanokv::master
