// ObjectStore's device puts through v2 slabs (ObjectStore::UseSlabs): a
// slab held per device, each put allocated in it on the host (the cursor is
// this process's memory), its announce record filled, then one launch that
// begins the header, stores the bytes, publishes READY and stamps the record
// (kernels::PutObjectAnnounced), or the backend's copies and a stamp from
// here where no kernel runs. No request to kvd per put: kvd reads the ring.
//
// A spent slab is traded for the one granted ahead, else a fresh one (one
// request) that holds the rest of its batch where that is larger than the
// usual shape, and so is one past half of kvd's slab_ttl, before kvd could
// end it. The slab granted ahead is as large as the largest batch lately.
// The old one is released (kvd reads its ring once more, gives back what was
// never announced) when the last put still writing into it is done: puts in
// flight hold it. A put that fails after its allocation voids its record,
// so kvd reads past it.
#ifndef NANOKV_LIBKV_CLIENT_SLAB_PUTS_H_
#define NANOKV_LIBKV_CLIENT_SLAB_PUTS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "libkv/client/object_transfer.h"
#include "nanokv/object_store.h"

namespace nanokv {

class ObjectStore::SlabPuts {
 public:
  SlabPuts(ObjectStore& store, gpu::Backend& backend) : store_(store), backend_(backend) {}  // no thread until Use
  SlabPuts(const SlabPuts&) = delete;
  SlabPuts& operator=(const SlabPuts&) = delete;
  ~SlabPuts();

  Status Use(int device, const SlabPutOptions& options);
  // Whether a put of `bytes` keyed `key` to preferred_device goes through a
  // slab (else the plan path takes it, and answers its errors).
  bool Serves(std::string_view key, uint64_t bytes, int preferred_device) const;
  // The puts, each through a slab: one status per item. More than one item
  // where the kernels run: kv_put_objects_announced, 32 a launch, one wait.
  std::vector<Status> Put(std::span<const DevicePut> items, int preferred_device, void* stream);
  Status Flush(uint32_t timeout_ms);
  uint64_t grants() const { return grants_.load(std::memory_order_relaxed); }

 private:
  struct Live;  // one granted slab and its ring as kernels reach it
  struct Pending {
    std::shared_ptr<Live> live;
    device::SlabAllocation at{};
    client::ObjectPieces pieces;
  };
  struct Device {
    SlabPutOptions options;
    std::shared_ptr<Live> live;
    std::shared_ptr<Live> next;  // granted ahead, once live is half spent
    bool next_asked = false;
    uint64_t batch_bytes = 0;  // the largest batch's bytes lately (decaying): the next slab's size
  };

  // A slab of `options`' shape, its payload at least `payload_bytes`.
  Result<std::shared_ptr<Live>> Grant(int device, const SlabPutOptions& options, uint64_t payload_bytes = 0);
  // d's slab becomes `fresh`; the old one goes on the retired list and is
  // released by the worker, or by its last put's. Under mu_.
  void Retire(Device& d, std::shared_ptr<Live> fresh);
  // d's slab traded for its next one, granted now where none is ready or
  // it has less than `room_wanted` bytes (then one of that size, where kvd
  // has the room). Under mu_.
  Status Trade(int device, Device& d, uint64_t room_wanted);
  // Asks the worker for d's next slab once live is half spent. Under mu_.
  void MaybeAskNext(int device, Device& d);

  // The worker: grants ahead and releases off the puts' path (a grant maps
  // up to 64 pages and registers the ring: milliseconds).
  void Post(std::function<void()> job);
  void Drain();  // returns once every job posted before has run
  void Work();
  // Allocates the put in its device's slab and fills its record.
  // `room_wanted`: the bytes its batch still has to place, this put's
  // included (a trade's size).
  Result<Pending> Begin(std::string_view key, const void* src, uint64_t bytes, int device, uint64_t room_wanted);
  // A put's start in a slab: room_wanted counts each put's bytes rounded up to it.
  static constexpr uint64_t kPayloadAlignment = 256;
  // After the put's work ran (stored: whether it did): the record stamped
  // (a copy's put), or voided where the put failed.
  Status Finish(Pending& put, Status stored);
  int DeviceFor(int preferred_device) const;  // -1: none; under mu_
  // Put's work for at most half a ring of items: allocated, stored, stamped.
  std::vector<Status> PutChunk(std::span<const DevicePut> items, int device, void* stream);

  ObjectStore& store_;
  gpu::Backend& backend_;
  mutable std::mutex mu_;
  std::map<int, Device> devices_;
  std::vector<std::weak_ptr<Live>> retired_;  // traded, released when their last put is done
  std::chrono::steady_clock::time_point connection_checked_{};
  std::atomic<uint64_t> grants_{0};
  // Announces kvd dropped since the last Flush (a key stored already): Flush answers kAlreadyExists.
  std::shared_ptr<std::atomic<uint64_t>> dropped_ = std::make_shared<std::atomic<uint64_t>>(0);

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<std::function<void()>> jobs_;
  bool working_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace nanokv

#endif  // NANOKV_LIBKV_CLIENT_SLAB_PUTS_H_
