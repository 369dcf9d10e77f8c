// How ObjectStore::PutFromDevice / GetToDevice move an object's bytes between
// a caller's device buffer and the object's pages mapped in this process:
// with the kernels (kv_store_pages + kv_commit_ready, kv_load_pages) where
// this build has them and the backend is one they run on, else with the
// backend's device-to-device copy (the host backend; a build without nvcc).
#ifndef NANOKV_LIBKV_CLIENT_OBJECT_TRANSFER_H_
#define NANOKV_LIBKV_CLIENT_OBJECT_TRANSFER_H_

#include <cstdint>
#include <span>
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
  // A v2 slab's put (slab_puts.h): the announce record's stamp as the
  // kernels reach it, stamped with announce_value after READY. Only where
  // StoreObject launches kernels; a copy's put is stamped by its caller.
  uint64_t* announce_stamp = nullptr;
  uint64_t announce_value = 0;
  // In kvd's host tier (mapped read-only here, no header): loaded by the
  // backend's host-to-device copies, a segment per page, never a kernel.
  bool host_tier = false;
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
// wait false (a batch, a stream-ordered put): returns once the kernels are
// enqueued on `stream`, which must then not be nullptr (a nullptr stream
// always waits: its device is the one chosen per call); the copies wait
// either way.
Result<bool> StoreObject(gpu::Backend& backend, const void* src, const ObjectPieces& object, void* stream,
                         bool wait = true);
// The object's pages -> dst; returns once the bytes are there (wait as above).
Status LoadObject(gpu::Backend& backend, void* dst, const ObjectPieces& object, void* stream, bool wait = true);
// A host-tier object's pages -> dst by the backend's host-to-device
// copies, one per page; returns once the bytes are there.
Status LoadFromHostTier(gpu::Backend& backend, void* dst, const ObjectPieces& object);
// Several objects' loads (a batch get): with the kernels, those whose
// object and destination share devices in one launch per 128; else each as
// LoadObject. One status per item; wait as above.
struct LoadItem {
  void* dst = nullptr;
  const ObjectPieces* object = nullptr;
};
std::vector<Status> LoadObjects(gpu::Backend& backend, std::span<const LoadItem> items, void* stream, bool wait);
// Several slab puts' stores (each object's announce_stamp set): with the
// kernels, those whose object and source share devices in one launch per 32
// (kv_put_objects_announced), then one wait per group; one status per item.
// Only where TransfersUseKernelsOn holds for every object.
struct StoreItem {
  const void* src = nullptr;
  const ObjectPieces* object = nullptr;
};
std::vector<Status> StoreAnnouncedWithKernels(std::span<const StoreItem> items, void* stream);
// Separate copies between buffers devices reach (src[i] -> dst[i]): with
// the kernels (kv_copy_many) in one launch per 128 on `stream`, else the
// backend's device-to-device copies, which are done when this returns.
// The scatter and gather of objects laid out unlike the caller's memory (a
// prefix chunk of every layer's K and V). wait as above.
Status CopyMany(gpu::Backend& backend, std::span<const kernels::Copy> copies, void* stream, bool wait);
// This process's ordinal of the device `buffer` is on, where the kernels'
// runtime can tell; else `fallback` (the host backend's buffers).
int BufferDevice(const gpu::Backend& backend, const void* buffer, int fallback);
// Waits for the transfers enqueued on `stream` without waiting (a no-op
// where transfers copy).
Status FinishTransfers(const gpu::Backend& backend, void* stream);

// A batch's stores spread over several streams forked from the caller's
// (kernels::ForkStreams): a put into a peer GPU's pages waits out its
// header's atomics across NVLink, which objects on other streams overlap.
// Where transfers copy, the stream is null or the batch is one item, every
// item takes the caller's stream. Join before anything the caller enqueues
// after the batch, or waits on, may depend on it.
class StreamFan {
 public:
  // A fork that failed (kInternal) leaves the fan on the caller's stream.
  static StreamFan Fork(const gpu::Backend& backend, void* stream, size_t items);
  // The moved-from fan joins nothing.
  StreamFan(StreamFan&& other) noexcept : stream_(other.stream_), ways_(other.ways_) {
    for (int i = 0; i < ways_; ++i) forked_[i] = other.forked_[i];
    other.ways_ = 0;
  }
  StreamFan(const StreamFan&) = delete;
  StreamFan& operator=(const StreamFan&) = delete;
  ~StreamFan();  // joins if Join was not called (its error then logged)

  void* StreamFor(size_t item) const { return ways_ == 0 ? stream_ : forked_[item % ways_]; }
  // The caller's stream waits for every forked stream's work.
  Status Join();

 private:
  explicit StreamFan(void* stream) : stream_(stream) {}
  void* stream_ = nullptr;
  int ways_ = 0;  // 0: not forked
  void* forked_[kernels::kMaxFanStreams] = {};
};

// A point in a stream's transfers for another thread to wait on: an event
// the kernels' runtime recorded on the stream, or none where transfers copy
// (they were done when their call returned). Move-only.
class StreamEvent {
 public:
  StreamEvent() = default;
  static Result<StreamEvent> Record(const gpu::Backend& backend, void* stream);
  StreamEvent(StreamEvent&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  StreamEvent& operator=(StreamEvent&& other) noexcept;
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  ~StreamEvent();
  // Returns once the stream has run past the point (a fault there is its error).
  Status Wait() const;
  void* handle() const { return event_; }  // a cudaEvent_t, or nullptr

 private:
  void* event_ = nullptr;
};

// The kernels' half (object_transfer_kernels.cc, or _absent.cc without nvcc).
bool KernelsBuilt();
bool KernelsFitDevice(int device);  // the answer kept per device
Status StoreWithKernels(const void* src, const ObjectPieces& object, void* stream, bool wait);
Status LoadWithKernels(void* dst, const ObjectPieces& object, void* stream, bool wait);
std::vector<Status> LoadManyWithKernels(std::span<const LoadItem> items, void* stream, bool wait);
Status SynchronizeKernels(void* stream);
Status CopyManyWithKernels(std::span<const kernels::Copy> copies, void* stream, bool wait);
Result<int> KernelPointerDevice(const void* pointer);
Result<void*> RegisterForKernels(void* host, size_t bytes);  // kernels::RegisterHostMapped
void UnregisterForKernels(void* host);
Result<void*> RecordKernelEvent(void* stream);
Status WaitKernelEvent(void* event);
void DestroyKernelEvent(void* event);
Status ForkKernelStreams(void* stream, int ways, void** forked);
Status JoinKernelStreams(void* stream, void* const* forked, int ways);

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_OBJECT_TRANSFER_H_
