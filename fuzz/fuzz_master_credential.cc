// libFuzzer target: bytes -> what a caller or an impostor can send in the
// master's Hello (ipc/master/master_auth.h). A caller's credential (metadata
// any client writes) and a master's answer (what an impostor on the port
// writes) are hostile: any bytes are refused cleanly, none passes without the
// token; a real Hello's credential passes, and with any one byte changed it
// does not.
// Input: a mode byte, then the bytes that mode reads.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ipc/master/master_auth.h"

namespace {

namespace master = nanokv::master;

constexpr std::string_view kToken = "fuzzed-cluster-token";

void Require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:  // a caller's credential, as any client may write it
      Require(!master::CheckCredential(kToken, input).ok());
      break;
    case 1: {  // a master's answer to our Hello, as an impostor may write it
      const std::string nonce = master::NewNonce();
      const size_t split = input.empty() ? 0 : static_cast<uint8_t>(input[0]) % (input.size() + 1);
      auto credential = master::AcceptHello(kToken, nonce, input.substr(0, split), input.substr(split));
      Require(!credential.ok());
      break;
    }
    default: {  // a real Hello, then one byte of its credential changed
      const std::string nonce = master::NewNonce();
      master::HelloAnswer answer = master::AnswerHello(kToken, nonce);
      auto credential = master::AcceptHello(kToken, nonce, answer.ticket, answer.proof);
      Require(credential.ok() && master::CheckCredential(kToken, *credential).ok());
      Require(!master::CheckCredential("another token", *credential).ok());
      if (input.size() >= 2) {
        std::string changed = *credential;
        const size_t at = static_cast<uint8_t>(input[0]) % changed.size();
        if (changed[at] != input[1]) {
          changed[at] = input[1];
          Require(!master::CheckCredential(kToken, changed).ok());
        }
      }
      break;
    }
  }
  return 0;
}
