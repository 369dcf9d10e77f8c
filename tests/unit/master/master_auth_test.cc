// The Hello that proves a master holds the cluster token, and the credential
// a caller's calls then carry (ipc/master/master_auth.h).
#include "ipc/master/master_auth.h"

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace nanokv::master {
namespace {

TEST(MasterAuth, AMasterWithTheTokenProvesItAndTheCredentialPasses) {
  const std::string nonce = NewNonce();
  ASSERT_EQ(nonce.size(), kNonceBytes);
  EXPECT_NE(nonce, NewNonce());
  HelloAnswer answer = AnswerHello("secret", nonce);
  auto credential = AcceptHello("secret", nonce, answer.ticket, answer.proof);
  ASSERT_TRUE(credential.ok()) << credential.status().ToString();
  EXPECT_EQ(credential->size(), kCredentialChars);
  EXPECT_EQ(credential->find("secret"), std::string::npos) << "the token never travels";
  EXPECT_OK(CheckCredential("secret", *credential));
  EXPECT_EQ(CheckCredential("secreT", *credential).code(), Code::kPermissionDenied);
}

TEST(MasterAuth, AnImpostorCannotProveTheToken) {
  const std::string nonce = NewNonce();
  HelloAnswer other = AnswerHello("another cluster's", nonce);
  Status refused = AcceptHello("secret", nonce, other.ticket, other.proof).status();
  EXPECT_EQ(refused.code(), Code::kPermissionDenied);
  EXPECT_NE(refused.ToString().find("not a master of this cluster"), std::string::npos) << refused.ToString();
  // A proof replayed from another caller's Hello (another nonce) is refused too.
  HelloAnswer replayed = AnswerHello("secret", NewNonce());
  EXPECT_EQ(AcceptHello("secret", nonce, replayed.ticket, replayed.proof).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(AcceptHello("secret", nonce, "", "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(AcceptHello("secret", nonce, other.ticket, other.proof + "x").status().code(), Code::kInvalidArgument);
}

TEST(MasterAuth, AMastersProofIsNoCredential) {
  // The labels differ: a caller cannot turn what a master said into a
  // credential of its own.
  const std::string nonce = NewNonce();
  HelloAnswer answer = AnswerHello("secret", nonce);
  auto hex = [](const std::string& bytes) {
    std::string out;
    for (unsigned char c : bytes) {
      out += "0123456789abcdef"[c >> 4];
      out += "0123456789abcdef"[c & 15];
    }
    return out;
  };
  const std::string forged = hex(nonce) + "." + hex(answer.ticket) + "." + hex(answer.proof);
  ASSERT_EQ(forged.size(), kCredentialChars);
  EXPECT_EQ(CheckCredential("secret", forged).code(), Code::kPermissionDenied);
}

TEST(MasterAuth, MalformedCredentialsAreRefusedByName) {
  for (const std::string& bad : {std::string(), std::string("secret"), std::string(kCredentialChars, 'a'),
                                 std::string(kCredentialChars, '.'), std::string(4096, 'f')}) {
    Status s = CheckCredential("secret", bad);
    EXPECT_EQ(s.code(), Code::kPermissionDenied) << bad.size();
    EXPECT_NE(s.ToString().find(kCredentialKey), std::string::npos) << s.ToString();
  }
}

TEST(MasterAuth, TheDataPathKeyIsMadeFromTheTokenAndIsNotIt) {
  EXPECT_EQ(DataPathKey(""), "");
  const std::string key = DataPathKey("secret");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, DataPathKey("secret"));
  EXPECT_NE(key, DataPathKey("secreT"));
  EXPECT_EQ(key.find("secret"), std::string::npos);
}

}  // namespace
}  // namespace nanokv::master
