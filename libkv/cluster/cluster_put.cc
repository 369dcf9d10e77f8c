#include "libkv/cluster/cluster_put.h"

#include <algorithm>
#include <future>
#include <map>

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

// A large batch is opened in chunks of about this many bytes, each chunk's
// copies enqueued as soon as its plans come while the next chunk is being
// opened: the GPU moves one chunk while the master and the owner kvd plan
// the next (a plan costs the master and kvd about as much per object as the
// copy of a 1 MiB object takes the GPU). At most kMaxChunks round trips.
constexpr uint64_t kChunkBytes = uint64_t{32} << 20;
constexpr size_t kMaxChunks = 8;

}  // namespace

void PutBatch::Start(void* stream) {
  uint64_t total = 0;
  for (const WriteRequest& open : opens_) total += open.bytes_total;
  const size_t chunks = std::clamp<size_t>(static_cast<size_t>(total / kChunkBytes), 1,
                                           std::min(kMaxChunks, std::max<size_t>(opens_.size(), 1)));
  const size_t per_chunk = (opens_.size() + chunks - 1) / std::max<size_t>(chunks, 1);
  plans_.assign(opens_.size(), Status::Internal("not opened"));
  auto open = [this, per_chunk](size_t first) {
    const size_t last = std::min(opens_.size(), first + per_chunk);
    return client_.BatchOpenForWrite(std::vector<WriteRequest>(opens_.begin() + static_cast<ptrdiff_t>(first),
                                                               opens_.begin() + static_cast<ptrdiff_t>(last)));
  };
  if (opens_.empty()) return;
  // One open ahead: the next chunk's round trip runs while this one's
  // copies are enqueued.
  std::future<std::vector<Result<ClusterPlan>>> next = std::async(std::launch::async, open, size_t{0});
  for (size_t first = 0; first < opens_.size(); first += per_chunk) {
    std::vector<Result<ClusterPlan>> opened = next.get();
    if (first + per_chunk < opens_.size()) next = std::async(std::launch::async, open, first + per_chunk);
    for (size_t k = 0; k < opened.size(); ++k) plans_[first + k] = std::move(opened[k]);
    WriteOnThisHost(first, opened.size(), stream);
  }
}

void PutBatch::WriteOnThisHost(size_t first, size_t count, void* stream) {
  // Device bytes: one WritePlansFromDevice per store, every store's stores
  // enqueued before any waits.
  struct StoreWrites {
    std::vector<ObjectStore::PlanWrite> writes;
    std::vector<size_t> items;
  };
  std::map<ObjectStore*, StoreWrites> by_store;
  for (size_t i = first; i < first + count; ++i) {
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
    std::vector<Status> commits = client_.BatchCommit(to_commit, /*published_on_device=*/device_);
    for (size_t k = 0; k < commits.size(); ++k) out[committed_items[k]] = commits[k];
  }
  return out;
}

}  // namespace nanokv::cluster
