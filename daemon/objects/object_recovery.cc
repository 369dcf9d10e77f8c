#include "daemon/objects/object_recovery.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {
namespace {

constexpr size_t kReasonsKept = 8;

// Why the header at `object`'s slot does not vouch for it; nullopt if it does.
std::optional<std::string> HeaderFault(const JournaledObject& object, const JournaledStore& store,
                                       uint64_t page_bytes, std::span<const std::vector<std::byte>> header_pages) {
  const uint32_t ordinal = object.slot / store.slots_per_page;
  const uint64_t at = uint64_t{object.slot % store.slots_per_page} * sizeof(ObjectHeader);
  if (ordinal >= header_pages.size() || header_pages[ordinal].size() != page_bytes ||
      at + sizeof(ObjectHeader) > page_bytes) {
    return "its header page was not read";
  }
  ObjectHeader header;
  std::memcpy(&header, header_pages[ordinal].data() + at, sizeof(header));
  if (header.state != static_cast<uint32_t>(ObjectState::kReady)) {
    return std::string("its header is ") + ObjectStateName(static_cast<ObjectState>(header.state)) + ", not READY";
  }
  if (header.epoch != object.epoch) {
    return "its header is at epoch " + std::to_string(header.epoch) + ", not " + std::to_string(object.epoch);
  }
  const uint64_t first = object.payload_offset / page_bytes;
  const uint64_t pages = (object.payload_offset + object.bytes_total - 1) / page_bytes - first + 1;
  if (header.key_hash != KeyHash(object.key) || header.payload_base != object.payload_offset ||
      header.bytes_total != object.bytes_total || header.page_bytes != page_bytes || header.n_pages != pages) {
    return std::string("its header's key hash, payload range, size or pages disagree with kvd's record");
  }
  return std::nullopt;
}

}  // namespace

RecoveredStore ScanStore(const JournaledStore& store, uint64_t page_bytes,
                         std::span<const std::vector<std::byte>> header_pages, bool host_tier_back) {
  RecoveredStore out;
  out.reclaimed = store.bad_records;
  out.last_epoch = store.last_epoch;
  std::vector<const JournaledObject*> order;
  for (const JournaledObject& object : store.objects) order.push_back(&object);
  // Creation order; of one object's two records (a move cut by the kill),
  // the host tier's first: it needs no header to vouch for it.
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    if (a->seq != b->seq) return a->seq < b->seq;
    return a->tier == Tier::kHost && b->tier != Tier::kHost;
  });

  std::unordered_set<uint64_t> header_index(store.header_pages.begin(), store.header_pages.end());
  std::unordered_map<std::string, const JournaledObject*> keys;  // key -> its record taken
  std::map<uint64_t, uint64_t> host_ranges;                      // the host tier's, offset -> end
  std::set<std::pair<std::string, uint64_t>> twins;              // store records: (key, creation order)
  for (const JournaledObject* object : order) {
    if (object->tier == Tier::kGpu) twins.insert({object->key, object->seq});
  }
  std::unordered_set<uint32_t> slots;
  std::map<uint64_t, uint64_t> ranges;                    // offset -> end (rounded), accepted
  std::unordered_map<uint64_t, uint32_t> page_owner;      // payload page index -> owner
  std::unordered_map<uint32_t, uint32_t> header_owner;    // header ordinal -> owner
  auto why = [&](const JournaledObject& object, const std::string& fault) {
    if (out.reasons.size() < kReasonsKept) out.reasons.push_back("'" + object.key.substr(0, 80) + "': " + fault);
  };
  for (const JournaledObject* object : order) {
    if (EpochIsNewer(object->epoch, out.last_epoch)) out.last_epoch = object->epoch;
    const uint64_t offset = object->payload_offset;
    const uint64_t end = (offset + object->bytes_total + kPayloadAlignment - 1) & ~(kPayloadAlignment - 1);
    const uint64_t first = offset / page_bytes, last = (offset + object->bytes_total - 1) / page_bytes;
    const uint32_t ordinal = object->slot / store.slots_per_page;
    const bool host = object->tier == Tier::kHost;
    if (auto taken = keys.find(object->key);
        taken != keys.end() && taken->second->seq == object->seq && taken->second->tier != object->tier) {
      ++out.moves_cut;  // the other half of a move: the object is back once, in the tier taken
      why(*object, std::string("a move cut by the restart: kept in the ") + std::string(TierName(taken->second->tier)) +
                       " tier only");
      continue;
    }
    if (host && !host_tier_back) {
      // A move cut by the kill: its store record (next) brings it back.
      if (twins.contains({object->key, object->seq})) continue;
      ++out.host_dropped;
      if (out.dropped.size() < kReasonsKept) out.dropped.push_back(object->key.substr(0, 80));
      continue;
    }
    std::optional<std::string> fault;
    if (offset % kPayloadAlignment != 0) fault = "its payload is not 256-byte aligned";
    if (!fault && (keys.contains(object->key) || (!host && slots.contains(object->slot)))) {
      fault = "its key or header slot came back already";
    }
    std::map<uint64_t, uint64_t>& taken_ranges = host ? host_ranges : ranges;
    if (!fault) {
      auto after = taken_ranges.lower_bound(end);
      if (after != taken_ranges.begin() && std::prev(after)->second > offset) fault = "its payload overlaps another's";
    }
    if (host) {
      if (fault) {
        ++out.reclaimed;
        why(*object, *fault + " (host tier)");
        continue;
      }
      keys.emplace(object->key, object);
      host_ranges.emplace(offset, end);
      out.bytes += object->bytes_total;
      out.objects.push_back(*object);
      continue;
    }
    for (uint64_t p = first; !fault && p <= last; ++p) {
      if (header_index.contains(p)) {
        fault = "its payload lies in a header page";
      } else if (auto owner = page_owner.find(p); owner != page_owner.end() && owner->second != object->owner) {
        fault = "its payload page " + std::to_string(p) + " holds another owner's object";
      }
    }
    if (!fault) {
      auto owner = header_owner.find(ordinal);
      if (owner != header_owner.end() && owner->second != object->owner) {
        fault = "its header page holds another owner's headers";
      }
    }
    if (fault) {
      ++out.reclaimed;
      why(*object, *fault);
      continue;
    }
    keys.emplace(object->key, object);
    slots.insert(object->slot);
    ranges.emplace(offset, end);
    for (uint64_t p = first; p <= last; ++p) page_owner.emplace(p, object->owner);
    header_owner.emplace(ordinal, object->owner);
    std::optional<std::string> header = object->committed ? HeaderFault(*object, store, page_bytes, header_pages)
                                                           : std::optional<std::string>("never committed");
    if (header) {
      why(*object, *header + ": held until write_timeout");
      out.writes.push_back(*object);
      continue;
    }
    out.bytes += object->bytes_total;
    out.objects.push_back(*object);
  }
  return out;
}

}  // namespace nanokv::kvd
