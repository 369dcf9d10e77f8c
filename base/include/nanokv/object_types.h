// The records of the object store that kvd and engines both speak: where an
// object lives (ObjectPlan, what kvd's index answers to an open or a locate
// and what an ObjectStore hands its caller) and one object as kvctl lists it
// (ObjectEntry). The wire's messages of the same names carry them between
// the two (ipc/proto/nanokv.proto); the words device code shares as well
// (states, pins, the header, the key rules) are in nanokv/object_header.h.
#ifndef NANOKV_OBJECT_TYPES_H_
#define NANOKV_OBJECT_TYPES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanokv/object_header.h"

namespace nanokv {

// The part of an object's payload inside one store page: what a producer or
// reader maps.
struct ObjectSpan {
  uint32_t page_id = 0;  // the pool's page id on the object's device
  uint32_t offset = 0;   // bytes into the page
  uint32_t length = 0;
};

// Which memory a plan's pages are: the device's store (GPU pages, with a
// header) or the host tier under it (kvd's sealed host memfds, no header:
// read with a plain copy; ARCHITECTURE.md, "The host tier").
enum class ObjectTier : uint8_t { kGpu = 0, kHost = 1 };
inline constexpr uint32_t kLastObjectTier = 1;

// Where an object lives on its device. Offsets are bytes into the device's
// *store range*: its store pages back to back, the header arena first, so
// the page of range offset x is number x / page_bytes.
struct ObjectPlan {
  std::string key;
  uint64_t key_hash = 0;        // xxhash64(key), seed 0 (ObjectHeader::key_hash)
  int device = 0;
  // The device's uuid (gpu::DeviceInfo::uuid), so a process under another
  // device mask finds its own ordinal for it; empty when kvd sent none.
  std::string device_uuid;
  uint64_t header_offset = 0;   // the object's ObjectHeader
  uint64_t payload_offset = 0;  // ObjectHeader::payload_base
  std::vector<ObjectSpan> spans;  // in order; their lengths add up to bytes_total
  uint64_t page_bytes = 0;
  uint32_t n_pages = 0;         // spans.size()
  uint64_t bytes_total = 0;
  // What Commit and Revoke must name. Epochs of one header slot grow with
  // each object it holds (EpochIsNewer), so the producer's header write (a
  // CAS of {state, epoch} from an older epoch only) fails for a writer
  // stalled past write_timeout whose slot has been given on.
  uint32_t epoch = 0;
  ObjectState state = ObjectState::kFree;  // WRITING from an open, READY from a locate
  uint64_t store_bytes = 0;     // the size of the device's store range
  uint32_t header_page = 0;     // the page holding the header
  // What a plan the cluster master ordered carries for its writer to show
  // kvd for write fds of its pages (kvd cannot tell which process the master
  // gave it to); 0 for a plan opened over kvd's socket (its uid's) or a locate's.
  uint64_t write_secret = 0;
  // kHost: spans name the host tier's pages (0.. in its range order),
  // offsets are into the host tier (store_bytes its size), and there is no
  // header (header_offset and header_page 0). Only READY plans are.
  ObjectTier tier = ObjectTier::kGpu;
  // A READY copy in the store located for a reader: its entry in kvd's read
  // table plus one (0: none). A reader may copy it out without a lease and
  // keep the copy if the entry still holds `epoch` afterwards.
  uint32_t read_entry = 0;
};

// The header a producer writes for `plan` before its payload (state
// WRITING; nanokv/object_header.h says in which order). `now_ns`: the steady
// clock, for last_access.
inline ObjectHeader WritingHeaderOf(const ObjectPlan& plan, std::uint64_t now_ns) {
  ObjectHeader header{};
  header.key_hash = plan.key_hash;
  header.n_pages = plan.n_pages;
  header.page_bytes = static_cast<std::uint32_t>(plan.page_bytes);
  header.payload_base = plan.payload_offset;
  header.bytes_total = plan.bytes_total;
  header.state = static_cast<std::uint32_t>(ObjectState::kWriting);
  header.epoch = plan.epoch;
  header.last_access = now_ns;
  return header;
}

// One object as kvctl lists it; times are relative to kvd's answer.
struct ObjectEntry {
  std::string key;
  uint64_t bytes_total = 0;
  int device = 0;
  ObjectState state = ObjectState::kFree;
  uint32_t epoch = 0;
  uint64_t age_ms = 0;          // since its open
  uint64_t idle_ms = 0;         // since it was last committed, located or leased
  uint32_t leases = 0;          // active read leases
  uint64_t lease_ms = 0;        // until the last of them ends; UINT64_MAX: one is held (a view)
  ObjectPin pin = ObjectPin::kNone;
  bool host_tier = false;  // in the host tier under its device's store
};

// The key rule of nanokv/object_header.h.
constexpr bool ValidObjectKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxObjectKeyBytes) return false;
  for (char c : key) {
    if (!IsObjectKeyByte(c)) return false;
  }
  return true;
}

}  // namespace nanokv

#endif  // NANOKV_OBJECT_TYPES_H_
