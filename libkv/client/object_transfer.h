// How ObjectStore::PutFromDevice / GetToDevice move an object's bytes between
// a caller's device buffer and the object's pages mapped in this process:
// with the kernels (kv_store_pages + kv_commit_ready, kv_load_pages) where
// this build has them and the backend is one they run on, else with the
// backend's device-to-device copy (the host backend; a build without nvcc).
#ifndef NANOKV_LIBKV_CLIENT_OBJECT_TRANSFER_H_
#define NANOKV_LIBKV_CLIENT_OBJECT_TRANSFER_H_

#include <cstdint>
#include <vector>

#include "kernels/kv_kernels.h"
#include "nanokv/object_header.h"
#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::client {

// One object as mapped here.
struct ObjectPieces {
  int device = 0;                           // the object's
  std::vector<kernels::Segment> segments;   // its spans, end to end: one segment
  void* payload = nullptr;                  // contiguous: segments back to back
  uint64_t bytes = 0;
  ObjectHeader* header = nullptr;
  uint32_t epoch = 0;
  ObjectHeader writing{};                   // the header to begin with (WritingHeaderOf)
  std::vector<int> access;                  // devices that reach the pages here
};

// Whether Store/Load below launch kernels on `backend` (else they copy).
bool TransfersUseKernels(const gpu::Backend& backend);
// Whether they do for an object on `device`: the kernels also need an image
// for its architecture; where none fits, the copy serves, with one warning
// per process.
bool TransfersUseKernelsOn(const gpu::Backend& backend, int device);

// The producer's header writes by copy, where no kernel makes them (Put's
// host bytes, the plan API, the host backend): the whole header WRITING at
// its epoch, and after the payload the 4-byte READY. Plain synchronous
// copies, not the kernels' CAS: a process stalled past write_timeout between
// them can still overwrite the slot's next header (the kernel path cannot).
Status BeginByCopy(gpu::Backend& backend, ObjectHeader* at, const ObjectHeader& writing);
Status PublishByCopy(gpu::Backend& backend, ObjectHeader* at);

// The header begun, src -> the object's pages, then READY published on the
// device after the last byte (kernels: kv_begin_write, kv_store_pages,
// kv_commit_ready on one stream; else the backend's copies); returns once
// all of it has run, answering whether READY is on the device now. stream: a
// cudaStream_t of a device in object.access (else kInvalidArgument, nothing
// launched), or nullptr: the calling thread's current device when it is in
// object.access (a producer on GPU a pushing into GPU b's pages), else the
// object's device for the call.
Result<bool> StoreObject(gpu::Backend& backend, const void* src, const ObjectPieces& object, void* stream);
// The object's pages -> dst; returns once the bytes are there.
Status LoadObject(gpu::Backend& backend, void* dst, const ObjectPieces& object, void* stream);

// The kernels' half (object_transfer_kernels.cc, or _absent.cc without nvcc).
bool KernelsBuilt();
bool KernelsFitDevice(int device);  // the answer kept per device
Status StoreWithKernels(const void* src, const ObjectPieces& object, void* stream);
Status LoadWithKernels(void* dst, const ObjectPieces& object, void* stream);

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_OBJECT_TRANSFER_H_
