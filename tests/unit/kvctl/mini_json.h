// A strict little JSON reader for tests of kvctl's --json output: it accepts
// exactly RFC 8259 (no trailing commas, no comments, no bare control
// characters in strings) and keeps each number's text, so 64-bit values
// (nanosecond times, byte counts) read back exactly.
#ifndef NANOKV_TESTS_UNIT_KVCTL_MINI_JSON_H_
#define NANOKV_TESTS_UNIT_KVCTL_MINI_JSON_H_

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanokv::testing {

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;  // a string's value, or a number's digits
  std::vector<Json> items;
  std::map<std::string, Json> members;

  bool has(const std::string& key) const { return members.count(key) != 0; }
  const Json& operator[](const std::string& key) const {
    static const Json null;
    auto it = members.find(key);
    return it == members.end() ? null : it->second;
  }
  const Json& operator[](size_t i) const { return items.at(i); }
  uint64_t u64() const { return std::strtoull(text.c_str(), nullptr, 10); }
  int64_t i64() const { return std::strtoll(text.c_str(), nullptr, 10); }
  double number() const { return std::strtod(text.c_str(), nullptr); }
  const std::string& str() const { return text; }
};

class JsonParser {
 public:
  // The value `text` holds, or nullopt if it is not exactly one JSON value
  // (surrounding whitespace allowed).
  static std::optional<Json> Parse(std::string_view text) {
    JsonParser parser(text);
    Json value;
    parser.Space();
    if (!parser.Value(&value)) return std::nullopt;
    parser.Space();
    if (parser.at_ != text.size()) return std::nullopt;
    return value;
  }

 private:
  explicit JsonParser(std::string_view text) : s_(text) {}

  bool Eat(char c) {
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void Space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\r' || s_[at_] == '\t')) ++at_;
  }
  bool Word(std::string_view word) {
    if (s_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool Value(Json* out) {
    if (at_ >= s_.size() || ++depth_ > 64) return false;
    bool ok = false;
    char c = s_[at_];
    if (c == '{') {
      ok = Object(out);
    } else if (c == '[') {
      ok = Array(out);
    } else if (c == '"') {
      out->type = Json::Type::kString;
      ok = String(&out->text);
    } else if (c == 't' || c == 'f') {
      out->type = Json::Type::kBool;
      out->boolean = c == 't';
      ok = Word(c == 't' ? "true" : "false");
    } else if (c == 'n') {
      ok = Word("null");
    } else {
      ok = Number(out);
    }
    --depth_;
    return ok;
  }
  bool Object(Json* out) {
    out->type = Json::Type::kObject;
    Eat('{');
    Space();
    if (Eat('}')) return true;
    while (true) {
      std::string key;
      Space();
      if (!String(&key)) return false;
      Space();
      if (!Eat(':')) return false;
      Space();
      Json value;
      if (!Value(&value)) return false;
      if (out->members.count(key)) return false;  // duplicate keys: our writer never makes them
      out->members[key] = std::move(value);
      Space();
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
    }
  }
  bool Array(Json* out) {
    out->type = Json::Type::kArray;
    Eat('[');
    Space();
    if (Eat(']')) return true;
    while (true) {
      Space();
      Json value;
      if (!Value(&value)) return false;
      out->items.push_back(std::move(value));
      Space();
      if (Eat(']')) return true;
      if (!Eat(',')) return false;
    }
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (at_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[at_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (at_ >= s_.size()) return false;
      char e = s_[at_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          if (at_ + 4 > s_.size()) return false;
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            char h = s_[at_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
            else return false;
          }
          if (code >= 0x80) return false;  // our writer escapes only ASCII controls
          *out += static_cast<char>(code);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool Number(Json* out) {
    out->type = Json::Type::kNumber;
    size_t start = at_;
    Eat('-');
    if (Eat('0')) {
    } else if (at_ < s_.size() && s_[at_] >= '1' && s_[at_] <= '9') {
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
    } else {
      return false;
    }
    if (Eat('.')) {
      size_t digits = at_;
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
      if (at_ == digits) return false;
    }
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      size_t digits = at_;
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
      if (at_ == digits) return false;
    }
    out->text = std::string(s_.substr(start, at_ - start));
    return true;
  }

  std::string_view s_;
  size_t at_ = 0;
  int depth_ = 0;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_KVCTL_MINI_JSON_H_
