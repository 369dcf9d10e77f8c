#include "master/index/key_arena.h"

#include <cassert>
#include <cstring>

namespace nanokv::master {

KeyArena::Ref KeyArena::Add(std::string_view key) {
  assert(!key.empty() && key.size() <= kMaxKeyBytes);
  const size_t bytes = RecordBytes(key.size());
  const size_t klass = bytes / 8;
  Ref ref;
  if (free_[klass] != kNone) {
    ref = free_[klass];
    std::memcpy(&free_[klass], At(ref), sizeof(Ref));  // a free record holds the next
  } else {
    if (used_in_last_ + bytes > kChunkBytes) {
      chunks_.push_back(std::make_unique<char[]>(kChunkBytes));
      used_in_last_ = 0;
    }
    ref = (static_cast<Ref>(chunks_.size() - 1) << 20) | used_in_last_;
    used_in_last_ += bytes;
  }
  char* record = At(ref);
  const uint16_t length = static_cast<uint16_t>(key.size());
  std::memcpy(record, &length, sizeof(length));
  std::memcpy(record + sizeof(length), key.data(), key.size());
  live_bytes_ += bytes;
  return ref;
}

std::string_view KeyArena::Get(Ref ref) const {
  const char* record = At(ref);
  uint16_t length = 0;
  std::memcpy(&length, record, sizeof(length));
  return {record + sizeof(length), length};
}

void KeyArena::Free(Ref ref) {
  char* record = At(ref);
  uint16_t length = 0;
  std::memcpy(&length, record, sizeof(length));
  const size_t bytes = RecordBytes(length);
  const size_t klass = bytes / 8;
  std::memcpy(record, &free_[klass], sizeof(Ref));
  free_[klass] = ref;
  live_bytes_ -= bytes;
}

}  // namespace nanokv::master
