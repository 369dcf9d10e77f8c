// libFuzzer target: the two ways a previous kvd's object store reaches a
// restarting kvd. Mode byte 0: the rest is an object
// journal's bytes -> kvd::ObjectJournal::Decode, which must give stores or an
// error Status, never read past the bytes, and accept only records in range
// of their store. Mode 1: the rest is header pages (device memory a producer
// wrote) scanned against records drawn from the same bytes -> ScanStore,
// which must never read outside a page and return only objects it vouched
// for: distinct keys and slots, ranges inside the payload space and apart.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "daemon/objects/object_index.h"
#include "daemon/objects/object_journal.h"
#include "daemon/objects/object_recovery.h"

namespace {

constexpr uint64_t kPage = 4096;  // the smallest page a journal allows: small inputs reach every slot

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_object_journal: %s\n", what);
  std::abort();
}

void CheckStore(const nanokv::kvd::JournaledStore& store, uint64_t page_bytes,
                const std::vector<nanokv::kvd::JournaledObject>& objects) {
  const uint64_t end = uint64_t{store.pages.size()} * page_bytes;
  std::set<std::string> keys;
  std::set<uint32_t> slots;
  for (const auto& o : objects) {
    if (o.payload_offset < uint64_t{store.arena_pages} * page_bytes || o.payload_offset >= end ||
        o.bytes_total == 0 || o.bytes_total > end - o.payload_offset ||
        o.slot >= store.header_pages.size() * uint64_t{store.slots_per_page}) {
      Fail("an object out of its store's range");
    }
    if (!keys.insert(o.key).second || !slots.insert(o.slot).second) Fail("a key or slot twice");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nanokv;
  using namespace nanokv::kvd;
  if (size == 0) return 0;
  std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto stores = ObjectJournal::Decode(rest);
    if (!stores.ok()) return 0;
    for (const JournaledStore& store : stores->devices) {
      for (const auto& o : store.objects) {
        if (!ValidObjectKey(o.key)) Fail("Decode accepted an invalid key");
      }
      // Decode keeps duplicates for the scan to refuse; only the ranges here.
      for (const auto& o : store.objects) CheckStore(store, stores->page_bytes, {o});
    }
    return 0;
  }
  // 8 store pages, 1 arena page + store page 7 as header pages; 64 slots a page.
  JournaledStore store;
  store.arena_pages = 1;
  store.slots_per_page = 64;
  store.max_objects = 128;
  for (uint32_t i = 0; i < 8; ++i) store.pages.push_back(i);
  store.header_pages = {0, 7};
  std::vector<std::vector<std::byte>> headers(2, std::vector<std::byte>(kPage));
  for (size_t h = 0; h < headers.size(); ++h) {
    const size_t from = h * kPage;
    if (from < rest.size()) std::memcpy(headers[h].data(), rest.data() + from, std::min(kPage, rest.size() - from));
  }
  // Records from the first bytes, each made to pass the journal's own checks
  // as kvd's records would; the headers decide the rest.
  for (size_t at = 0; at + 16 <= rest.size() && store.objects.size() < 32; at += 16) {
    uint32_t words[4];
    std::memcpy(words, rest.data() + at, sizeof(words));
    JournaledObject o;
    o.key = "k" + std::to_string(words[0] % 8);
    o.slot = words[1] % 128;
    o.epoch = words[2] | 1;
    o.owner = words[0] % 3;
    o.seq = at;
    o.committed = (words[3] & 1) != 0;
    o.payload_offset = kPage + ((words[3] >> 1) % (6 * kPage / 256)) * 256;
    o.bytes_total = 1 + words[2] % (8 * kPage - o.payload_offset);
    store.objects.push_back(o);
  }
  RecoveredStore found = ScanStore(store, kPage, headers);
  std::vector<JournaledObject> all = found.objects;
  all.insert(all.end(), found.writes.begin(), found.writes.end());
  CheckStore(store, kPage, all);
  std::set<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& o : all) {
    const uint64_t end = (o.payload_offset + o.bytes_total + kPayloadAlignment - 1) & ~(kPayloadAlignment - 1);
    auto next = ranges.lower_bound({o.payload_offset, 0});
    if ((next != ranges.end() && next->first < end) || (next != ranges.begin() && std::prev(next)->second > o.payload_offset)) {
      Fail("two objects overlap");
    }
    ranges.insert({o.payload_offset, end});
  }
  if (all.size() + found.reclaimed != store.objects.size()) Fail("an object neither kept nor reclaimed");
  return 0;
}
