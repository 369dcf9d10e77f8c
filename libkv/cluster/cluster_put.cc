#include "libkv/cluster/cluster_put.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <span>
#include <string_view>
#include <unordered_set>

#include <spdlog/spdlog.h>

namespace nanokv::cluster {
Status NoDataPath(const std::string& key, const std::string& node) {
  return Status::FailedPrecondition("nanokv cluster: the copy of '" + key + "' is on node " + node +
                                    ", which has no data path (master.data_address in its kvd config)");
}

Status CheckDeviceRange(gpu::Backend& backend, const void* at, uint64_t bytes) {
  if (bytes == 0) return Status::OK();
  std::byte probe[1];
  const auto* first = static_cast<const std::byte*>(at);
  NANOKV_RETURN_IF_ERROR(backend.Copy(probe, first, 1, gpu::CopyKind::kDeviceToHost));
  return backend.Copy(probe, first + bytes - 1, 1, gpu::CopyKind::kDeviceToHost);
}

PutBatch::PutBatch(ClusterClient& client, ClusterClient::Impl& impl, std::vector<WriteRequest> opens,
                   std::vector<PutBytes> sources)
    : client_(client), impl_(impl), opens_(std::move(opens)), sources_(std::move(sources)),
      copied_(opens_.size()) {
  for (const PutBytes& source : sources_) device_ = device_ || source.device != nullptr;
}

namespace {

// A large batch is opened in chunks, each chunk's copies enqueued as soon as
// its plans come while the later chunks are being opened. The chunks double
// (1/16 of the items, then 1/8, 1/4, ...: the last takes the rest): the
// first is small so the GPU starts early, and few chunks keep the round
// trips few, since the opens, not the copies, bound a batch of 8 MiB objects
// on two H200s (a plan costs the master and kvd ~16 us an object and a
// round trip 250-350 us, against ~25 us for an 8 MiB copy over NVLink;
// eight equal chunks took 8.3 ms to enqueue 1 GiB, docs/BENCHMARKS.md).
// A batch under kChunkBytes is one open.
constexpr uint64_t kChunkBytes = uint64_t{32} << 20;
constexpr size_t kFirstChunkShare = 16;

// The chunks' first items, then the item count.
std::vector<size_t> ChunkStarts(size_t items, uint64_t total_bytes) {
  std::vector<size_t> starts = {0};
  if (total_bytes >= kChunkBytes && items >= 4) {
    size_t at = 0;
    // A chunk is cut while more than two of it are left; the last takes
    // the rest.
    for (size_t size = std::max<size_t>(1, items / kFirstChunkShare); items - at > 2 * size; size *= 2) {
      at += size;
      starts.push_back(at);
    }
  }
  starts.push_back(items);
  return starts;
}

int64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void PutBatch::Start(void* stream) {
  plans_.assign(opens_.size(), Status::Internal("not opened"));
  // A key named twice: the first is put, the others refused here, so which
  // one wins never depends on which chunk the master heard first.
  std::vector<size_t> items;
  std::unordered_set<std::string_view> keys;
  uint64_t total = 0;
  for (size_t i = 0; i < opens_.size(); ++i) {
    if (!keys.insert(opens_[i].key).second) {
      plans_[i] =
          Status::AlreadyExists("nanokv cluster: the batch names '" + opens_[i].key + "' twice; its first item is put");
      continue;
    }
    items.push_back(i);
    total += opens_[i].bytes_total;
  }
  if (items.empty()) return;
  const std::vector<size_t> starts = ChunkStarts(items.size(), total);
  auto open = [this, &items](size_t first, size_t last) {
    std::vector<WriteRequest> chunk;
    for (size_t k = first; k < last; ++k) chunk.push_back(opens_[items[k]]);
    return client_.BatchOpenForWrite(chunk);
  };
  // Every chunk's open at once (a handful): the master and the owner kvd
  // take them in order, so the small first chunk comes back first, and the
  // round trips overlap each other as well as the copies.
  const auto began = std::chrono::steady_clock::now();
  std::vector<std::future<std::vector<Result<ClusterPlan>>>> chunks;
  for (size_t c = 0; c + 1 < starts.size(); ++c) {
    chunks.push_back(std::async(std::launch::async, open, starts[c], starts[c + 1]));
  }
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::vector<Result<ClusterPlan>> opened = chunks[c].get();
    const int64_t opened_us = MicrosSince(began);
    for (size_t k = 0; k < opened.size(); ++k) plans_[items[starts[c] + k]] = std::move(opened[k]);
    WriteOnThisHost(std::span<const size_t>(items).subspan(starts[c], opened.size()), stream);
    spdlog::debug("nanokv cluster: put batch chunk {} of {}: {} item(s) opened at {} us, enqueued at {} us", c + 1,
                  chunks.size(), opened.size(), opened_us, MicrosSince(began));
  }
}

void PutBatch::WriteOnThisHost(std::span<const size_t> items, void* stream) {
  // Device bytes: one WritePlansFromDevice per store, every store's stores
  // enqueued before any waits.
  struct StoreWrites {
    std::vector<ObjectStore::PlanWrite> writes;
    std::vector<size_t> items;
  };
  std::map<ObjectStore*, StoreWrites> by_store;
  for (size_t i : items) {
    if (!plans_[i].ok()) continue;
    for (const ReplicaPlan& replica : plans_[i]->replicas) {
      if (!OnThisHost(replica)) continue;
      auto store = impl_.StoreOf(replica);
      if (!store.ok()) {
        copied_[i] = store.status();
        break;
      }
      if (sources_[i].device == nullptr) {
        copied_[i] = (*store)->CopyIn(replica.plan, sources_[i].host);
        if (!copied_[i].ok()) break;
        continue;
      }
      StoreWrites& to = by_store[*store];
      to.writes.push_back({&replica.plan, sources_[i].device});
      to.items.push_back(i);
    }
  }
  for (auto& [store, to] : by_store) {
    std::vector<Status> written = store->WritePlansFromDevice(to.writes, stream, /*wait=*/false);
    for (size_t k = 0; k < written.size(); ++k) {
      if (copied_[to.items[k]].ok() && !written[k].ok()) copied_[to.items[k]] = written[k];
    }
  }
}

std::vector<Status> PutBatch::Finish(const Status& device_work) {
  if (!device_work.ok()) {
    for (Status& copied : copied_) {
      if (copied.ok()) copied = device_work;
    }
  }
  std::vector<RemotePut> remote;
  std::vector<size_t> remote_items;
  for (size_t i = 0; i < opens_.size(); ++i) {
    if (!plans_[i].ok() || !copied_[i].ok()) continue;
    for (const ReplicaPlan& replica : plans_[i]->replicas) {
      if (OnThisHost(replica)) continue;
      if (replica.data_address.empty()) {
        copied_[i] = NoDataPath(opens_[i].key, replica.node_id);
        break;
      }
      if (sources_[i].device != nullptr) {
        copied_[i] = CheckDeviceRange(*sources_[i].backend, sources_[i].device, opens_[i].bytes_total);
        if (!copied_[i].ok()) break;
      }
      remote.push_back({replica.node_id, replica.data_address, replica.plan, sources_[i]});
      remote_items.push_back(i);
    }
  }
  if (!remote.empty()) {
    std::vector<Status> sent = impl_.remote().Put(remote);
    for (size_t k = 0; k < sent.size(); ++k) {
      if (copied_[remote_items[k]].ok() && !sent[k].ok()) copied_[remote_items[k]] = sent[k];
    }
  }
  std::vector<Status> out(opens_.size());
  std::vector<ClusterPlan> to_commit, to_revoke;
  std::vector<size_t> committed_items;
  for (size_t i = 0; i < opens_.size(); ++i) {
    if (!plans_[i].ok()) {
      out[i] = plans_[i].status();
    } else if (copied_[i].ok()) {
      to_commit.push_back(*plans_[i]);
      committed_items.push_back(i);
    } else {
      out[i] = copied_[i];
      to_revoke.push_back(*plans_[i]);
    }
  }
  if (!to_revoke.empty()) client_.BatchRevoke(to_revoke);  // the failure is what the caller hears
  if (!to_commit.empty()) {
    const auto began = std::chrono::steady_clock::now();
    std::vector<Status> commits = client_.BatchCommit(to_commit, /*published_on_device=*/device_);
    spdlog::debug("nanokv cluster: put batch: {} item(s) committed in {} us", to_commit.size(), MicrosSince(began));
    for (size_t k = 0; k < commits.size(); ++k) out[committed_items[k]] = commits[k];
  }
  return out;
}

}  // namespace nanokv::cluster
