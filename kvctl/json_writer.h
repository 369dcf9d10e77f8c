// A small JSON writer for kvctl's --json output: compact, one document per
// call site, strings escaped per RFC 8259. No JSON library is among our
// dependencies and kvctl only ever writes JSON, so this is all it needs.
//
// Text from the segment is another process's bytes: String() escapes every
// control character and replaces bytes that are not valid UTF-8 with U+FFFD,
// so the output is always valid JSON, whatever a segment holds.
#ifndef NANOKV_KVCTL_JSON_WRITER_H_
#define NANOKV_KVCTL_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanokv::kvctl {

class JsonWriter {
 public:
  JsonWriter& BeginObject() { return Open('{'); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray() { return Open('['); }
  JsonWriter& EndArray() { return Close(']'); }
  // REQUIRES: inside an object, and the previous key has its value.
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Int(int64_t value);
  // A finite value with up to `decimals` places; NaN and infinities as null.
  JsonWriter& Double(double value, int decimals = 1);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // Key(key) then the value.
  JsonWriter& Field(std::string_view key, std::string_view value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, const char* value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, uint64_t value) { return Key(key).Uint(value); }
  JsonWriter& Field(std::string_view key, uint32_t value) { return Key(key).Uint(value); }
  JsonWriter& Field(std::string_view key, int64_t value) { return Key(key).Int(value); }
  JsonWriter& Field(std::string_view key, int32_t value) { return Key(key).Int(value); }
  JsonWriter& Field(std::string_view key, bool value) { return Key(key).Bool(value); }

  // The document so far. Complete once every Begin has its End.
  const std::string& str() const { return out_; }

 private:
  JsonWriter& Open(char bracket);
  JsonWriter& Close(char bracket);
  void BeforeValue();

  std::string out_;
  // One entry per open container: true until its first member is written.
  std::vector<bool> first_;
  bool after_key_ = false;
};

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view text);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_JSON_WRITER_H_
