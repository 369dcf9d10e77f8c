// ClusterClient's device bytes (nanokv/cluster_client.h): a request's KV
// put and got as one batch, the stream-ordered put, and the single calls
// over them. On this host every copy is written and read by the GPU through
// its kvd's store (the kernels, enqueued on one stream); other hosts' over
// UCX through pinned staging.
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "libkv/client/object_transfer.h"
#include "libkv/cluster/cluster_client_impl.h"
#include "libkv/cluster/cluster_put.h"
#include "libkv/cluster/cluster_slab_puts.h"
#include "nanokv/cluster_client.h"

namespace nanokv {
namespace {

using cluster::OnThisHost;

// Whether the local kvd's answer leaves the master to ask: the object is
// not there (or not READY there, or that kvd is gone); any other answer,
// a success or the caller's own fault, is the item's.
bool AskMaster(const Status& local) {
  return local.code() == Code::kNotFound || local.code() == Code::kFailedPrecondition ||
         local.code() == Code::kUnavailable;
}

std::vector<cluster::PutBytes> SourcesOf(const std::vector<DevicePut>& items, gpu::Backend* backend,
                                         std::vector<WriteRequest>* opens) {
  std::vector<cluster::PutBytes> sources;
  for (const DevicePut& item : items) {
    opens->push_back({item.key, item.bytes, item.options});
    sources.push_back({{}, item.src, backend});
  }
  return sources;
}

// A stream-ordered put: the batch, the event after its device work, and
// its outcome once the committer thread has finished it.
class StreamPut final : public PendingPuts {
 public:
  StreamPut(std::unique_ptr<cluster::PutBatch> batch, client::StreamEvent event)
      : batch_(std::move(batch)), event_(std::move(event)) {}
  ~StreamPut() override { (void)Wait(); }

  std::vector<Status> Wait() override {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return done_; });
    return outcome_;
  }
  bool Done() const override {
    std::lock_guard lock(mu_);
    return done_;
  }
  void* event() const override { return event_.handle(); }

  // On the committer's thread: once the stream ran past the copies, the
  // rest of the batch; a fault of the device work fails every item.
  void Finish() {
    Status ran = event_.Wait();
    std::vector<Status> outcome = batch_->Finish(ran);
    std::lock_guard lock(mu_);
    outcome_ = std::move(outcome);
    done_ = true;
    done_cv_.notify_all();
  }

 private:
  std::unique_ptr<cluster::PutBatch> batch_;
  client::StreamEvent event_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;               // GUARDED_BY(mu_)
  std::vector<Status> outcome_;     // GUARDED_BY(mu_)
};

}  // namespace

std::vector<Status> ClusterClient::BatchPutFromDevice(const std::vector<DevicePut>& items, void* stream) {
  auto backend = impl_->DeviceBackend();
  if (!backend.ok()) return std::vector<Status>(items.size(), backend.status());
  for (const DevicePut& item : items) {
    if (item.src == nullptr) {
      return std::vector<Status>(items.size(),
                                 Status::InvalidArgument("put from device of '" + item.key + "': null source"));
    }
  }
  // Those a slab of this node's store takes ask nobody; the rest are planned by the master.
  std::vector<Status> out(items.size());
  const std::vector<size_t> planned = cluster::PutThroughSlabs(*impl_, items, stream, out);
  if (planned.empty()) return out;
  std::vector<DevicePut> rest;
  rest.reserve(planned.size());
  for (size_t i : planned) rest.push_back(items[i]);
  std::vector<WriteRequest> opens;
  std::vector<cluster::PutBytes> sources = SourcesOf(rest, *backend, &opens);
  cluster::PutBatch batch(*this, *impl_, std::move(opens), std::move(sources));
  batch.Start(stream);
  std::vector<Status> done = batch.Finish(client::FinishTransfers(**backend, stream));
  for (size_t k = 0; k < planned.size(); ++k) out[planned[k]] = std::move(done[k]);
  return out;
}

Result<std::unique_ptr<PendingPuts>> ClusterClient::PutFromDeviceAsync(const std::vector<DevicePut>& items,
                                                                       void* stream) {
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  for (const DevicePut& item : items) {
    if (item.src == nullptr) return Status::InvalidArgument("put from device of '" + item.key + "': null source");
  }
  std::vector<WriteRequest> opens;
  std::vector<cluster::PutBytes> sources = SourcesOf(items, backend, &opens);
  auto batch = std::make_unique<cluster::PutBatch>(*this, *impl_, std::move(opens), std::move(sources));
  batch->Start(stream);
  Result<client::StreamEvent> event = client::StreamEvent::Record(*backend, stream);
  if (!event.ok()) {
    // The work is queued but cannot be waited on apart: wait here instead.
    batch->Finish(client::FinishTransfers(*backend, stream));
    return event.status();
  }
  auto pending = std::make_shared<StreamPut>(std::move(batch), std::move(*event));
  impl_->committer().Post([pending] { pending->Finish(); });
  // The caller's handle; the committer keeps its own until it finished.
  struct Handle final : PendingPuts {
    explicit Handle(std::shared_ptr<StreamPut> shared) : put(std::move(shared)) {}
    // The caller's sources stay in use until the batch is finished (the
    // committer may still copy them to another host): wait for it here,
    // not only in StreamPut's destructor, which the committer may run last.
    ~Handle() override { (void)put->Wait(); }
    std::vector<Status> Wait() override { return put->Wait(); }
    bool Done() const override { return put->Done(); }
    void* event() const override { return put->event(); }
    std::shared_ptr<StreamPut> put;
  };
  return std::unique_ptr<PendingPuts>(new Handle(std::move(pending)));
}

Status ClusterClient::PutFromDevice(std::string_view key, const void* src, uint64_t bytes,
                                    const WriteOptions& options) {
  return BatchPutFromDevice({{std::string(key), src, bytes, options}})[0];
}

std::vector<Result<uint64_t>> ClusterClient::BatchGetToDevice(const std::vector<DeviceGet>& items, void* stream) {
  std::vector<Result<uint64_t>> out(items.size(), Status::Internal("not got"));
  auto backend = impl_->DeviceBackend();
  if (!backend.ok()) return std::vector<Result<uint64_t>>(items.size(), backend.status());
  // What each store of this host loads: every load on `stream`, one wait.
  auto load = [&](ObjectStore& store, const std::vector<size_t>& which) {
    std::vector<ObjectStore::DeviceGet> gets;
    for (size_t i : which) gets.push_back({items[i].key, items[i].dst, items[i].capacity});
    std::vector<Result<uint64_t>> got = store.BatchGetToDevice(gets, stream);
    for (size_t k = 0; k < which.size(); ++k) out[which[k]] = std::move(got[k]);
  };
  // This node's copies first, with no question to the master.
  std::vector<size_t> all(items.size());
  for (size_t i = 0; i < items.size(); ++i) all[i] = i;
  auto local = impl_->Local();
  if (local.ok()) load(**local, all);
  std::vector<size_t> ask;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!local.ok() || (!out[i].ok() && AskMaster(out[i].status()))) ask.push_back(i);
  }
  if (ask.empty()) return out;
  std::vector<std::string> keys;
  for (size_t i : ask) keys.push_back(items[i].key);
  std::vector<Result<ObjectLocation>> locations = BatchGetLocation(keys);
  std::map<ObjectStore*, std::vector<size_t>> by_store;
  std::vector<cluster::RemoteGetInto> remote;
  std::vector<size_t> remote_items;
  std::map<size_t, const ObjectLocation*> where;
  for (size_t k = 0; k < ask.size(); ++k) {
    const size_t i = ask[k];
    if (!locations[k].ok()) {
      out[i] = locations[k].status();
      continue;
    }
    where[i] = &*locations[k];
    if (items[i].dst == nullptr) {
      out[i] = Status::InvalidArgument("get to device of '" + items[i].key + "': null destination");
      continue;
    }
    if (locations[k]->bytes_total > items[i].capacity) {
      out[i] = cluster::NoRoom(items[i].key, locations[k]->bytes_total, items[i].capacity);
      continue;
    }
    const Replica& nearest = locations[k]->replicas.front();
    if (OnThisHost(nearest)) {
      auto store = impl_->StoreOf(nearest);
      if (store.ok()) by_store[*store].push_back(i);
      else out[i] = store.status();
      continue;
    }
    if (nearest.data_address.empty()) {
      out[i] = cluster::NoDataPath(items[i].key, nearest.node_id);
      continue;
    }
    Status reachable = cluster::CheckDeviceRange(**backend, items[i].dst, items[i].capacity);
    if (!reachable.ok()) {
      out[i] = reachable;
      continue;
    }
    remote.push_back({{nearest.node_id, nearest.data_address, items[i].key},
                      {nullptr, items[i].dst, *backend, items[i].capacity}});
    remote_items.push_back(i);
  }
  for (auto& [store, which] : by_store) load(*store, which);
  if (!remote.empty()) {
    std::vector<Result<uint64_t>> got = impl_->remote().GetInto(remote);
    for (size_t k = 0; k < got.size(); ++k) out[remote_items[k]] = std::move(got[k]);
  }
  // A copy whose node went away: the next copies, one at a time.
  for (auto& [i, location] : where) {
    for (size_t r = 1; r < location->replicas.size() && !out[i].ok() &&
                       out[i].status().code() == Code::kUnavailable;
         ++r) {
      const Replica& next = location->replicas[r];
      if (OnThisHost(next)) {
        auto store = impl_->StoreOf(next);
        if (store.ok()) load(**store, {i});
      } else if (!next.data_address.empty()) {
        out[i] = std::move(impl_->remote().GetInto(
            {{{next.node_id, next.data_address, items[i].key}, {nullptr, items[i].dst, *backend, items[i].capacity}}})[0]);
      }
    }
  }
  return out;
}

Result<uint64_t> ClusterClient::GetToDevice(std::string_view key, void* dst, uint64_t capacity) {
  if (dst == nullptr) return Status::InvalidArgument("get to device: null destination");
  return std::move(BatchGetToDevice({{std::string(key), dst, capacity}})[0]);
}

Result<std::string> ClusterClient::DeviceBackendName() {
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  return std::string(backend->name());
}

}  // namespace nanokv
