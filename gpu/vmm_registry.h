// The record every backend keeps of what it made through the driver: the
// pages it holds, the ranges it reserved and the mappings it made in them,
// each with the devices given access. Internal to gpu/; no driver header.
//
// Why a record at all: misuse must get the contract's error (backend.h) before
// the driver sees it. A stale handle or a copy into a mapping without access
// can crash the driver or leave a sticky error that poisons the context, and
// kvd serves many engines. The host backend keeps the same record of ranges
// and mappings (its pages are memfds it tracks itself) so that it refuses
// exactly what CUDA refuses. One class, so the three cannot drift.
//
// Words as in backend.h (page, range, mapping, access). A *span* is any byte
// run [address, address+bytes) a copy touches.
//
// Invariants (CheckInvariants() verifies them; vmm_registry_test calls it
// after each step):
//   1. Ranges have a non-zero size and granularity and do not overlap.
//   2. Every mapping has a non-zero size and page, lies wholly inside one
//      range, and overlaps no other mapping.
//   3. Every page held has at least one reference and a non-zero size.
//   4. A mapping's device is below kMaxDevices (one bit of an access mask
//      each); a new mapping has no access (backend.h rule 1).
// Nothing ties a mapping to a page held: a mapping outlives the handle it
// was made from (backend.h rule 3).
//
// Threads: the registry takes no lock. Every method REQUIRES the owner's
// mutex, which the owner holds around these calls anyway (it also guards what
// the owner keeps beside the record: the host's fds and memory accounting)
// and drops around driver calls. The claim/undo pairs below (ClaimMapping and
// DropMapping, TakeRange and AddRange, TakeMappings and RestoreMappings) let
// it record a change first, call the driver unlocked, and undo on failure.
#ifndef NANOKV_GPU_VMM_REGISTRY_H_
#define NANOKV_GPU_VMM_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::gpu {

// Argument checks every backend makes, with the same messages everywhere.
// kInvalidArgument unless `size` is a non-zero multiple of `granularity`.
Status CheckMultipleOfGranularity(const char* call, size_t size, size_t granularity);
// The same for `size`, and `address` non-zero and a multiple of `granularity`.
Status CheckAlignedToGranularity(const char* call, uintptr_t address, size_t size,
                                 size_t granularity);
// ReserveRange's alignment: 0 (the granularity) or a power of two.
Status CheckReserveAlignment(size_t alignment);
// "0x7f0000000000": how every backend message shows an address.
std::string Hex(uintptr_t value);

class VmmRegistry {
 public:
  static constexpr int kMaxDevices = 64;  // access is a bit mask per mapping

  struct Page {
    int device = 0;
    size_t size = 0;
    int references = 0;  // a driver may hand back a handle we hold for an import
  };
  struct Range {
    size_t size = 0;
    size_t granularity = 0;  // the device's when reserved; mappings align to it
  };
  struct Mapping {
    size_t size = 0;
    uint64_t page = 0;    // the handle value it was made from (may be released since)
    int device = 0;       // the page's
    uint64_t access = 0;  // bit d: device d may read (and write, unless read_only)
    bool read_only = false;  // Access::kReadOnly: writes fault
  };
  // What Map asks for, checked by ClaimMapping.
  struct MapRequest {
    uintptr_t address = 0;
    size_t size = 0;
    uint64_t page = 0;       // handle value
    int device = 0;          // the page's
    size_t page_bytes = 0;    // a page is mapped whole: size must equal it
    size_t granularity = 0;  // the page's device's: address and size align to it
  };
  // Mappings taken out by TakeMappings, to be given back on a driver failure.
  using TakenMappings = std::vector<std::pair<uintptr_t, Mapping>>;

  VmmRegistry() = default;
  VmmRegistry(const VmmRegistry&) = delete;
  VmmRegistry& operator=(const VmmRegistry&) = delete;

  // --- pages (the driver backends; the host's handles are never handed back
  // twice, so it keeps its own table of fds) ---

  // Counts one more reference to `page`. False, counting nothing, when the
  // page is held with another size: an import that named the wrong size.
  [[nodiscard]] bool AddPageReference(uint64_t page, int device, size_t size);
  // kNotFound ("<call>: no page handle 0x..") for a handle not held.
  Result<const Page*> FindPage(PageHandle page, const char* call) const;
  // Drops one reference (the record goes with the last) and returns the
  // page's device, for the context that releases it. kNotFound as FindPage.
  Result<int> DropPageReference(PageHandle page, const char* call);

  // --- ranges ---

  // Records a reservation the driver just made, or gives back one TakeRange took.
  void AddRange(uintptr_t base, Range range);
  // Takes the reservation out of the record, so a concurrent Map into it
  // fails cleanly; AddRange puts it back if the driver then refuses.
  // kInvalidArgument unless [base, base+size) is one whole reservation;
  // kFailedPrecondition while anything is mapped in it.
  Result<Range> TakeRange(uintptr_t base, size_t size);
  // Whether [address, address+size) lies inside one reservation.
  bool InsideRange(uintptr_t address, size_t size) const;

  // --- mappings ---

  // Records a mapping with no access, before the driver maps it, so a racing
  // Map of the same address fails here; DropMapping undoes it. Errors, in
  // this order: kInvalidArgument for a size other than the page's, a span
  // not aligned to the granularity, or one not inside a range;
  // kFailedPrecondition where it overlaps a mapping.
  Status ClaimMapping(const MapRequest& request);
  void DropMapping(uintptr_t address);
  // The mapping that contains `address`, or null. Valid until the next change.
  const Mapping* FindMapping(uintptr_t address) const;
  // The whole mappings that make up [address, address+size), in order, with
  // no hole. CUDA takes nothing less for unmap or set-access (it answers
  // CUDA_ERROR_INVALID_VALUE for part of a mapping, seen on an H200 with
  // driver 580), so every backend refuses it the same way: kInvalidArgument
  // when the span is not aligned to its range's granularity, starts or ends
  // inside a mapping, or has a hole. Pointers valid until the next change.
  Result<std::vector<const Mapping*>> WholeMappings(const char* call, uintptr_t address,
                                                    size_t size) const;
  // Sets the access of every mapping that starts in [address, address+size).
  // REQUIRES: WholeMappings(address, size) was OK (under this same hold of
  // the lock, or an earlier one: a mapping unmapped since is simply skipped).
  void SetAccess(uintptr_t address, size_t size, uint64_t access, bool read_only = false);
  // WholeMappings, then takes them out of the record, so a racing Unmap fails
  // cleanly; RestoreMappings puts them back if the driver then refuses.
  // ENSURES on success: the result is non-empty.
  Result<TakenMappings> TakeMappings(const char* call, uintptr_t address, size_t size);
  void RestoreMappings(const TakenMappings& taken);

  // --- copies ---

  // What a copy may touch. Memory inside our ranges must be mapped with
  // access: on a GPU a copy there would fault, and a fault is sticky. Memory
  // outside them is the caller's (host memory, or device memory we do not
  // manage) and is not checked. Errors: kInvalidArgument when the span runs
  // past its range or meets a hole, kPermissionDenied at a mapping without
  // access, or, when `write`, at a read-only one (a GPU would fault there).
  // `runner` >= 0: the device that must run the copy (a stream's, which
  // cannot hand it to another): kPermissionDenied unless it has access.
  struct Span {
    bool ours = false;    // inside one of our ranges
    int device = -1;      // the first mapping's page's device
    uint64_t access = 0;  // devices that may access every byte of it
  };
  Result<Span> CheckSpan(const char* call, const void* pointer, size_t bytes, bool write = false,
                         int runner = -1) const;
  // The device to run a copy on, checking the ends `kind` says are device
  // memory (a fill is kHostToDevice with src null): one with access to both
  // ends, preferring an end's own device. -1 when neither end is in our
  // ranges: then the caller's current device runs it. kPermissionDenied when
  // no device below `device_count` may access both ends.
  Result<int> CopyDevice(const char* call, const void* dst, const void* src, size_t bytes,
                         CopyKind kind, int device_count) const;

  // --- teardown and tests ---

  const std::unordered_map<uint64_t, Page>& pages() const { return pages_; }
  const std::map<uintptr_t, Range>& ranges() const { return ranges_; }
  const std::map<uintptr_t, Mapping>& mappings() const { return mappings_; }
  // OK, or kInternal naming the first invariant found broken.
  Status CheckInvariants() const;

 private:
  bool OverlapsMapping(uintptr_t address, size_t size) const;

  std::unordered_map<uint64_t, Page> pages_;  // handle value -> page
  std::map<uintptr_t, Range> ranges_;         // base -> range
  std::map<uintptr_t, Mapping> mappings_;     // address -> mapping
};

}  // namespace nanokv::gpu

#endif  // NANOKV_GPU_VMM_REGISTRY_H_
