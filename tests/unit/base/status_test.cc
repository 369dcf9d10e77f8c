#include "nanokv/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace nanokv {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  NANOKV_ASSIGN_OR_RETURN(int half, Half(x));
  NANOKV_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  NANOKV_RETURN_IF_ERROR(Half(x).status());
  return Status::OK();
}

TEST(Status, OkIsCheapAndEmpty) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), Code::kOk);
  EXPECT_EQ(ok.ToString(), "OK");
  EXPECT_TRUE(Status(Code::kOk, "ignored").ok());
}

TEST(Status, CarriesCallAndDriverErrorName) {
  Status s(Code::kOutOfMemory, "device 0, 2097152 bytes", "cuMemCreate",
           "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.call(), "cuMemCreate");
  EXPECT_EQ(s.error_name(), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(s.ToString(),
            "OutOfMemory: cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY: device 0, 2097152 bytes");
  Status copy = s;
  EXPECT_EQ(copy.ToString(), s.ToString());
}

TEST(Status, AHintIsDataThatCopiesKeep) {
  EXPECT_EQ(Status::OK().hint(), Hint::kNone);
  Status plain = Status::ResourceExhausted("device 0 is full");
  EXPECT_EQ(plain.hint(), Hint::kNone);
  Status hinted = Status::ResourceExhausted("device 0 is full").WithHint(Hint::kRetryAfterForget);
  EXPECT_EQ(hinted.hint(), Hint::kRetryAfterForget);
  EXPECT_EQ(hinted.ToString(), plain.ToString()) << "a hint is for code, not for the message";
  Status copy = hinted;
  EXPECT_EQ(copy.hint(), Hint::kRetryAfterForget);
  Result<int> result = copy;
  EXPECT_EQ(result.status().hint(), Hint::kRetryAfterForget);
  EXPECT_TRUE(Status::OK().WithHint(Hint::kRetryAfterForget).ok()) << "OK stays OK";
}

TEST(Status, FromErrnoMapsCodes) {
  EXPECT_EQ(Status::FromErrno("mmap", ENOMEM).code(), Code::kOutOfMemory);
  EXPECT_EQ(Status::FromErrno("open", EACCES).code(), Code::kPermissionDenied);
  Status s = Status::FromErrno("sendmsg", EPIPE, "to kvd");
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_EQ(s.error_name(), "EPIPE");
  EXPECT_NE(s.message().find("to kvd"), std::string_view::npos);
}

TEST(Result, PropagatesThroughMacros) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> odd = Quarter(6);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(odd.status().message(), "3 is odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_FALSE(CheckEven(5).ok());
  Result<int> bad = Status::OK();  // a misuse still yields an error, not a value
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace nanokv
