// A virtual KV tensor: a reserved device address range whose pages are mapped
// on demand with pages kvd grants. The range never moves, so kernels and
// framework tensors built over data() stay valid while pages come and go;
// an index names the page slot at data() + index * page_bytes().
//
//   ***********************************************************************
//   * An engine unmaps only after its stream work on the range has        *
//   * finished (synchronize the streams that use these pages before       *
//   * Unmap/Shrink): unmapping memory a kernel still reads is undefined   *
//   * behaviour on a GPU. The same holds for destroying the tensor.       *
//   ***********************************************************************
//
// Cost: Map grants all the pages it needs in one request, imports only pages
// this process has never seen (the Client's import cache), then maps each
// page and sets access once per contiguous run. All methods are thread-safe
// (one lock per tensor); data() and the geometry need no lock.
#ifndef NANOKV_KV_TENSOR_H_
#define NANOKV_KV_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "nanokv/client.h"
#include "nanokv/status.h"

namespace nanokv {
namespace client {
struct ImportedPage;  // libkv/client/page_cache.h
}  // namespace client

class KVTensor {
 public:
  // Reserves `bytes` of address space, rounded up to whole pages, for pages
  // of `device`; nothing is mapped yet. `client` must remain live while the
  // tensor exists. kInvalidArgument for 0 bytes or a device kvd does not serve.
  static Result<std::unique_ptr<KVTensor>> Create(Client& client, int device, size_t bytes);

  KVTensor(const KVTensor&) = delete;
  KVTensor& operator=(const KVTensor&) = delete;
  // Unmaps every page, returns the pages to kvd (errors only logged: kvd may
  // be gone) and frees the range. See the warning above.
  ~KVTensor();

  // The device pointer kernels use. Only mapped pages may be touched.
  void* data() const { return reinterpret_cast<void*>(base_); }
  int device() const { return device_; }
  size_t page_bytes() const { return page_bytes_; }
  size_t page_count() const { return slots_.size(); }
  // The reserved size: page_count() * page_bytes().
  size_t size_bytes() const { return slots_.size() * page_bytes_; }

  size_t mapped_pages() const;
  bool is_mapped(size_t index) const;
  // kvd's id of the page mapped at `index`; nullopt when none is.
  std::optional<uint32_t> page_id(size_t index) const;
  // The number of mapped pages from index 0 up to the first unmapped one:
  // where Grow maps next.
  size_t mapped_prefix() const;

  // Maps pages at every unmapped index in [first, first + count): one grant
  // request for all of them (split only beyond kvd's 4096 pages per request),
  // then Map each page and SetAccess for this tensor's device. All or
  // nothing: on any failure this call's mappings are undone and its pages
  // returned. kInvalidArgument when the range leaves the tensor.
  Status Map(size_t first, size_t count);
  // Maps pages another tenant of the same group holds, by kvd page id, at
  // indices index, index + 1, ...: how engines of one group share KV bytes
  // without a copy. The pages live on `device` (which may differ from this
  // tensor's: access is given to this tensor's device). All or nothing;
  // kFailedPrecondition if one of those indices is mapped already.
  Status MapShared(size_t index, int device, std::span<const uint32_t> ids);
  // Unmaps every mapped index in [first, first + count) (one Unmap per page:
  // each page is its own mapping) and returns the pages to kvd in one
  // request. The pages are unmapped here even if the return fails (kvd
  // gone); the error is returned.
  Status Unmap(size_t first, size_t count);
  // Map(mapped_prefix(), pages) and Unmap(mapped_prefix() - pages, pages).
  Status Grow(size_t pages);
  Status Shrink(size_t pages);

 private:
  struct Slot {
    bool mapped = false;
    int device = -1;  // the page's device (MapShared may differ from device_)
    uint32_t id = 0;
  };

  KVTensor(Client& client, int device, uintptr_t base, size_t page_bytes, size_t pages);
  uintptr_t Address(size_t index) const { return base_ + index * page_bytes_; }
  Status CheckRange(size_t first, size_t count) const;
  // REQUIRES (all *Locked): mu_ held.
  Status MapLocked(size_t first, size_t count);
  Status UnmapLocked(size_t first, size_t count);
  size_t MappedPrefixLocked() const;
  // Maps pages[i] at indices[i] and sets access over each contiguous run.
  // All or nothing: on failure unmaps what it mapped and returns every page.
  Status PlaceLocked(const std::vector<size_t>& indices, int page_device,
                     const std::vector<client::ImportedPage>& pages);
  // Gives pages back to kvd, split into requests kvd accepts.
  Status ReturnLocked(int page_device, const std::vector<uint32_t>& ids);

  Client& client_;  // must remain live while the tensor exists
  const int device_;
  const uintptr_t base_;
  const size_t page_bytes_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // guarded by mu_ (its size is fixed)
  size_t mapped_ = 0;        // guarded by mu_
};

}  // namespace nanokv

#endif  // NANOKV_KV_TENSOR_H_
