// ASSERT_OK / EXPECT_OK for Status-returning calls: on failure they print the
// expression and the whole Status (code, call, driver error name, message).
// They copy the Status, so `ASSERT_OK(Call().status())` is safe: the Result
// the reference would point into dies at the end of the statement.
#ifndef NANOKV_TESTS_UTIL_STATUS_MATCHERS_H_
#define NANOKV_TESTS_UTIL_STATUS_MATCHERS_H_

#include <gtest/gtest.h>

#include "nanokv/status.h"

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const ::nanokv::Status s_ = (expr);                     \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                     \
  do {                                                      \
    const ::nanokv::Status s_ = (expr);                     \
    EXPECT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)

#endif  // NANOKV_TESTS_UTIL_STATUS_MATCHERS_H_
