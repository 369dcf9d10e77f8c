#include "ipc/wire/codec.h"

#include <gtest/gtest.h>

namespace nanokv::wire {
namespace {

std::vector<std::byte> Raw(const Message& m) {
  std::vector<std::byte> out(m.ByteSizeLong());
  m.SerializeToArray(out.data(), static_cast<int>(out.size()));
  return out;
}

Status DecodeRaw(const Message& m) {
  Message out;
  return Decode(Raw(m), &out);
}

TEST(Codec, RoundTripsAValidGrant) {
  Message m;
  m.set_request_id(42);
  m.mutable_grant()->set_device(1);
  m.mutable_grant()->set_pages(8);
  Message out;
  ASSERT_TRUE(Decode(Encode(m), &out).ok());
  EXPECT_EQ(out.request_id(), 42u);
  EXPECT_EQ(out.grant().pages(), 8u);
  EXPECT_EQ(out.version(), kWireVersion);
}

TEST(Codec, RejectsWhatIsNotAMessage) {
  Message out;
  EXPECT_EQ(Decode({}, &out).code(), Code::kProtocolError);
  std::vector<std::byte> garbage(37, std::byte{0xff});
  EXPECT_EQ(Decode(garbage, &out).code(), Code::kProtocolError);
  Message truncated;
  truncated.set_version(kWireVersion);
  truncated.mutable_attach()->set_tenant("engine-with-a-long-name");
  auto bytes = Raw(truncated);
  bytes.resize(bytes.size() - 5);
  EXPECT_EQ(Decode(bytes, &out).code(), Code::kProtocolError);
}

TEST(Codec, RejectsOtherVersionsAndEmptyBodies) {
  Message m;
  m.mutable_detach();
  m.set_version(kWireVersion + 1);
  Status s = DecodeRaw(m);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("incompatible nanokv versions: the peer speaks wire version"),
            std::string_view::npos) << s.ToString();
  Message no_body;
  no_body.set_version(kWireVersion);
  EXPECT_NE(DecodeRaw(no_body).message().find("no body"), std::string_view::npos);
}

TEST(Codec, RejectsOutOfRangeFields) {
  auto with = [](auto fill) {
    Message m;
    m.set_version(kWireVersion);
    fill(m);
    return DecodeRaw(m);
  };
  EXPECT_FALSE(with([](Message& m) { m.mutable_grant()->set_pages(0); }).ok());
  EXPECT_FALSE(with([](Message& m) { m.mutable_grant()->set_pages(kMaxPagesPerRequest + 1); }).ok());
  EXPECT_FALSE(with([](Message& m) {
                 m.mutable_grant()->set_device(-1);
                 m.mutable_grant()->set_pages(1);
               }).ok());
  EXPECT_FALSE(with([](Message& m) {
                 m.mutable_grant()->set_device(kMaxDevices);
                 m.mutable_grant()->set_pages(1);
               }).ok());
  EXPECT_FALSE(with([](Message& m) { m.mutable_attach()->set_tenant(""); }).ok());
  EXPECT_FALSE(with([](Message& m) { m.mutable_attach()->set_tenant(std::string(64, 'a')); }).ok());
  EXPECT_FALSE(with([](Message& m) { m.mutable_attach()->set_tenant("bad\nname"); }).ok());
  EXPECT_FALSE(with([](Message& m) {
                 m.mutable_attach()->set_tenant("ok");
                 m.mutable_attach()->set_limit_fraction(1.5);
               }).ok());
  EXPECT_FALSE(with([](Message& m) {
                 for (uint32_t i = 0; i <= kMaxPagesPerRequest; ++i) m.mutable_return_pages()->add_page_ids(i);
               }).ok());
  EXPECT_FALSE(with([](Message& m) { m.mutable_share()->set_device(0); }).ok());
  EXPECT_TRUE(with([](Message& m) { m.mutable_attach()->set_tenant("vllm-0@node:a.b"); }).ok());
  // kvctl's evict names a tenant (any byte count: 0 means all it holds).
  EXPECT_FALSE(with([](Message& m) { m.mutable_evict()->set_bytes(1); }).ok()) << "no tenant";
  EXPECT_FALSE(with([](Message& m) { m.mutable_evict()->set_tenant("bad name"); }).ok());
  EXPECT_TRUE(with([](Message& m) {
                m.mutable_evict()->set_tenant("engine-1");
                m.mutable_evict()->set_bytes(UINT64_MAX);
              }).ok());
  EXPECT_TRUE(with([](Message& m) { m.mutable_evict_reply()->set_pages_requested(3); }).ok());
}

TEST(Codec, ErrorRepliesCarryTheStatus) {
  Message reply = ErrorReply(7, Status::ResourceExhausted("over the limit"));
  Message out;
  ASSERT_TRUE(Decode(Encode(reply), &out).ok());
  EXPECT_EQ(out.request_id(), 7u);
  Status s = StatusFromError(out.error());
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_EQ(s.ToString(), "ResourceExhausted: kvd: over the limit") << "the code is said once";
  // A status naming a call and its error (a driver's, an errno's) keeps them.
  Message driver = ErrorReply(8, Status(Code::kOutOfMemory, "device 0", "cuMemCreate", "CUDA_ERROR_OUT_OF_MEMORY"));
  ASSERT_TRUE(Decode(Encode(driver), &out).ok());
  EXPECT_EQ(StatusFromError(out.error()).ToString(),
            "OutOfMemory: kvd: cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY: device 0");
  Error bogus;
  bogus.set_code(999);
  EXPECT_EQ(StatusFromError(bogus).code(), Code::kInternal);
  Error ok_code;
  ok_code.set_code(0);
  EXPECT_FALSE(StatusFromError(ok_code).ok()) << "an Error never means OK";
}

// The signal to ask again crosses the wire as a field, whatever the words.
TEST(Codec, TheRetryAfterForgetHintCrossesAsAField) {
  Message reply = ErrorReply(9, Status::ResourceExhausted("no room now").WithHint(Hint::kRetryAfterForget));
  EXPECT_TRUE(reply.error().retry_after_forget());
  Message out;
  ASSERT_TRUE(Decode(Encode(reply), &out).ok());
  EXPECT_EQ(StatusFromError(out.error()).hint(), Hint::kRetryAfterForget);
  Message plain = ErrorReply(10, Status::ResourceExhausted("pages held after recycle"));
  EXPECT_FALSE(plain.error().retry_after_forget()) << "words are not the signal";
  EXPECT_EQ(StatusFromError(plain.error()).hint(), Hint::kNone);
}

}  // namespace
}  // namespace nanokv::wire
