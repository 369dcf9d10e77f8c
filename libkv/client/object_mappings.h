// The object store client's view of kvd's store pages (each holds one
// owner's objects, daemon/objects/owned_space.h):
// per device of kvd, two virtual ranges the size of its store range, so an
// object is contiguous at its offset in either.
//
//   read range   every page a reader touched, mapped read-only from fds kvd
//                gives readers (on host they cannot write either)
//   write range  only pages of plans opened here (WRITING, from an open here or
//                the master), mapped read-write from fds kvd gives only for the
//                asker's open plans; on host unmapped once no plan open here
//                covers the page (Commit, Revoke, ClosePlan); on cuda and hip
//                kept for the next plan (ClosePlan says why)
//
// Why two ranges and not one mapping whose access changes: a page may hold
// a READY object another thread is reading and a plan this process writes;
// switching one mapping to another fd would fault that reader mid-copy.
//
// Threads: none of its own; the caller serializes every call (the store's
// call_mu_). The backend must outlive it.
#ifndef NANOKV_LIBKV_CLIENT_OBJECT_MAPPINGS_H_
#define NANOKV_LIBKV_CLIENT_OBJECT_MAPPINGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/backend.h"
#include "nanokv/object_types.h"
#include "nanokv/status.h"

namespace nanokv::client {

class ObjectMappings {
 public:
  // Asks kvd for one fd per page id of kvd's device `device`: fds that write
  // when `writing` is the plan being written (kvd lends them only to its
  // writer, for its pages), else fds that read. The caller owns them.
  using FetchFds = std::function<Result<std::vector<int>>(int device, const std::vector<uint32_t>& page_ids,
                                                          const ObjectPlan* writing)>;

  // `access_devices`: local ordinals given access to every page besides the
  // page's own device. `backend` must outlive this.
  ObjectMappings(gpu::Backend& backend, std::vector<int> access_devices)
      : backend_(backend), access_devices_(std::move(access_devices)) {}
  // Unmaps every page, releases kept handles, frees the ranges.
  ~ObjectMappings();
  ObjectMappings(const ObjectMappings&) = delete;
  ObjectMappings& operator=(const ObjectMappings&) = delete;

  // Maps the plan's header and payload pages not mapped yet in the range the
  // plan's state says (WRITING or RESERVED: the write range) and returns that
  // range's base. `local_device`: this process's ordinal of plan.device.
  Result<uintptr_t> Map(const ObjectPlan& plan, int local_device, const FetchFds& fetch);
  // The read range's address of bytes [offset, offset + bytes) of kvd's
  // device `device` where every page of them is mapped here already, else
  // 0: what a location found with no plan can be read through.
  uintptr_t MappedForRead(int device, uint64_t offset, uint64_t bytes) const;
  // The plan (key, epoch) is committed or revoked: on host, its write-range
  // pages that no other plan open here covers are unmapped. The caller's writes through
  // them are done (it commits after them). Unknown plans are ignored.
  void ClosePlan(std::string_view key, uint32_t epoch);

  // The devices a page of `device` (a local ordinal) is given access to.
  std::vector<int> AccessOf(int device) const;
  size_t mapped_pages() const;

 private:
  struct DeviceMap {
    uintptr_t base = 0;
    uint64_t bytes = 0;
    uint64_t page_bytes = 0;
    std::vector<bool> mapped;       // by page index in the store range
    std::vector<uint32_t> writers;  // write range: plans open here per page
    // Write range: each page's handle, kept once imported, so the next plan
    // on the page maps it again without asking kvd. Keeping it grants nothing
    // new: a write fd kvd gave cannot be taken back anyway (Security).
    std::vector<gpu::PageHandle> handles;
  };
  struct OpenPlan {
    int device = 0;
    std::vector<uint64_t> pages;  // indexes counted in writers
  };

  Result<DeviceMap*> RangeFor(const ObjectPlan& plan, bool write);
  void Claim(const ObjectPlan& plan, DeviceMap& map);
  Status MapFd(DeviceMap& map, int device, uint64_t index, int fd, bool write);
  Status MapHandle(DeviceMap& map, int device, uint64_t index, gpu::PageHandle handle, bool write);
  void UnmapOne(DeviceMap& map, uint64_t index);

  gpu::Backend& backend_;  // must remain live while this exists
  std::vector<int> access_devices_;
  std::map<int, DeviceMap> read_;   // by kvd's ordinal
  std::map<int, DeviceMap> write_;  // by kvd's ordinal
  std::map<std::pair<std::string, uint32_t>, OpenPlan> open_plans_;  // (key, epoch)
  bool warned_read_only_ = false;
};

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_OBJECT_MAPPINGS_H_
