#include "kvctl/json_writer.h"

#include <gtest/gtest.h>

#include "tests/unit/kvctl/mini_json.h"

namespace nanokv::kvctl {
namespace {

using testing::Json;
using testing::JsonParser;

TEST(JsonWriter, WritesNestedDocumentsWithCommasInTheRightPlaces) {
  JsonWriter json;
  json.BeginObject()
      .Field("name", "kvd-a")
      .Field("pid", int32_t{-1})
      .Field("bytes", uint64_t{18446744073709551615ull})
      .Field("live", true);
  json.Key("share").Double(37.54);
  json.Key("none").Null();
  json.Key("empty").BeginArray().EndArray();
  json.Key("rows").BeginArray();
  json.BeginObject().Field("a", uint32_t{1}).EndObject();
  json.BeginObject().EndObject();
  json.Uint(3);
  json.EndArray().EndObject();
  EXPECT_EQ(json.str(),
            "{\"name\":\"kvd-a\",\"pid\":-1,\"bytes\":18446744073709551615,\"live\":true,"
            "\"share\":37.5,\"none\":null,\"empty\":[],\"rows\":[{\"a\":1},{},3]}");
  auto parsed = JsonParser::Parse(json.str());
  ASSERT_TRUE(parsed);
  EXPECT_EQ((*parsed)["bytes"].u64(), 18446744073709551615ull) << "64-bit values are exact";
}

TEST(JsonWriter, EscapesEverythingJsonRequires) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(JsonQuote(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
  EXPECT_EQ(JsonQuote("\033[31mred"), "\"\\u001b[31mred\"") << "no terminal escape survives";
}

TEST(JsonWriter, KeepsValidUtf8AndReplacesTheRest) {
  EXPECT_EQ(JsonQuote("H\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"), "\"H\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"");
  const std::string replacement = "\xef\xbf\xbd";
  EXPECT_EQ(JsonQuote("\xff"), "\"" + replacement + "\"");
  EXPECT_EQ(JsonQuote("a\xc3"), "\"a" + replacement + "\"") << "a sequence cut short";
  EXPECT_EQ(JsonQuote("\xc0\xaf"), "\"" + replacement + replacement + "\"") << "overlong";
  EXPECT_EQ(JsonQuote("\xed\xa0\x80"), "\"" + replacement + replacement + replacement + "\"") << "a surrogate";
  EXPECT_EQ(JsonQuote("\xf4\x90\x80\x80"), "\"" + replacement + replacement + replacement + replacement + "\"")
      << "past U+10FFFF";
}

TEST(JsonWriter, EveryByteStringBecomesValidJson) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  JsonWriter json;
  json.BeginObject().Field("bytes", all).EndObject();
  auto parsed = JsonParser::Parse(json.str());
  ASSERT_TRUE(parsed) << json.str();
  EXPECT_EQ((*parsed)["bytes"].str().substr(0, 32), all.substr(0, 32));
}

TEST(JsonWriter, NonFiniteNumbersAreNull) {
  JsonWriter json;
  json.BeginArray().Double(1.0 / 0.0).Double(0.0 / 0.0).Double(2.25, 2).EndArray();
  EXPECT_EQ(json.str(), "[null,null,2.25]");
}

}  // namespace
}  // namespace nanokv::kvctl
