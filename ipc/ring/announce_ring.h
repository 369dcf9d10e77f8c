// kvd's side of a v2 slab's announce ring (nanokv/slab_layout.h): the
// memory, a sealed memfd kvd makes and the producer maps (and registers with
// its GPU), and the records read in order, each checked against the slab
// kvd granted before kvd believes a word of it. The producer writes the
// records (nanokv/device/slab.h: the fields, then the stamp with release);
// everything in them is hostile input. A record that breaks a rule poisons
// the ring: kvd stops reading it and takes the slab back; what was
// announced before stands.
//
// Stamps: the record at ring position `at` ever is stamped at + 1. A record
// still holding the last lap's stamp (or 0 in the first lap) is not written
// yet; any other stamp is a scribble.
#ifndef NANOKV_IPC_RING_ANNOUNCE_RING_H_
#define NANOKV_IPC_RING_ANNOUNCE_RING_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nanokv/slab_layout.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

// What kvd granted: every announced object must lie inside it.
struct SlabBounds {
  uint64_t payload_bytes = 0;
  uint32_t header_slots = 0;
};

// One object a producer announced, checked against its slab.
struct AnnouncedObject {
  uint32_t header_slot = 0;
  uint64_t payload_offset = 0;  // within the slab's payload
  uint64_t bytes = 0;
  uint64_t key_hash = 0;
  uint32_t epoch = 0;
  std::string key;
};

class AnnounceRing {
 public:
  static constexpr uint32_t kMinRecords = 2;
  static constexpr uint32_t kMaxRecords = 1u << 16;  // 20 MiB of records at most

  // kvd: a ring of `records` records (a power of two) for a slab of
  // `bounds`, in a sealed memfd, mapped; *fd gets the memfd (kvd sends it
  // to the producer, then closes it).
  static Result<AnnounceRing> Create(uint32_t records, const SlabBounds& bounds, int* fd);
  // The producer's mapping of the memfd kvd sent: kProtocolError when its
  // size, seals, magic or version are not a ring's. Such a ring only writes.
  static Result<AnnounceRing> Attach(int fd);
  // The bytes of a ring of `records` records.
  static size_t FileBytes(uint32_t records);

  AnnounceRing() = default;
  AnnounceRing(AnnounceRing&& other) noexcept;
  AnnounceRing& operator=(AnnounceRing&& other) noexcept;
  AnnounceRing(const AnnounceRing&) = delete;
  AnnounceRing& operator=(const AnnounceRing&) = delete;
  ~AnnounceRing();

  // What nanokv/device/slab.h's functions take.
  device::AnnounceRingHeader* header() const { return static_cast<device::AnnounceRingHeader*>(base_); }
  device::AnnounceRecord* records() const;
  uint32_t record_count() const { return records_; }

  // kvd: the objects announced since the last poll, at most `max` records
  // read (void ones are read past), in ring order; `consumed` is then
  // published for the producer. kProtocolError naming the record and the
  // rule once one breaks a rule; the ring then stays poisoned.
  // publish false: `consumed` is left for Publish, once the caller has
  // dealt with the objects (so a drop it notes is seen with it).
  Result<std::vector<AnnouncedObject>> Poll(size_t max, bool publish = true);
  void Publish();  // `consumed` = the records read, for the producer
  // Records read, ever.
  uint64_t consumed() const { return next_; }
  // kvd: one announce read was dropped (its key was stored already); the
  // header's `dropped` tells the producer.
  void NoteDropped();
  const Status& poisoned() const { return poisoned_; }

 private:
  AnnounceRing(void* base, size_t bytes, uint32_t records);
  // Checks one record the producer stamped; the object, or why not.
  Result<AnnouncedObject> Check(const device::AnnounceRecord& record, uint64_t at);
  void Unmap();

  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t records_ = 0;
  SlabBounds bounds_;
  uint64_t next_ = 0;                    // kvd's own count of records read
  uint64_t dropped_ = 0;                 // kvd's own count of announces dropped
  std::map<uint64_t, uint64_t> ranges_;  // payload announced: offset -> end
  std::vector<bool> slots_;              // header slots announced
  Status poisoned_;
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_RING_ANNOUNCE_RING_H_
