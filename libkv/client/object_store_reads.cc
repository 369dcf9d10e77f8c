// ObjectStore's batch get (nanokv/object_store.h; ARCHITECTURE.md, "Reads
// without a lease"): locations from the read cache, else from kvd in as few
// requests as the keys need, every load enqueued on one stream and waited
// for once; a copy read without a lease stands when kvd's read table still
// names its epoch after the wait, else it is read again under a lease.
#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clocks.h"
#include "ipc/wire/object_codec.h"
#include "libkv/client/object_store_impl.h"
#include "libkv/client/object_transfer.h"
#include "libkv/client/read_cache.h"
#include "nanokv/object_store.h"

namespace nanokv {
namespace {

using DeviceGet = ObjectStore::DeviceGet;

// One batch get's state: what is enqueued, the leases it holds, the
// copies to check, and what to read again.
class DeviceReads {
 public:
  DeviceReads(ObjectStore::Impl& impl, std::span<const DeviceGet> items, void* stream)
      : impl_(impl), items_(items), stream_(stream), out_(items.size(), Status::Internal("not read")) {}

  std::vector<Result<uint64_t>> Run() {
    table_ = impl_.ReadTable();
    std::vector<size_t> ask;
    // Found here (kept or listed) a chunk at a time, each chunk's loads
    // enqueued before the next is looked up: the GPU copies one while the
    // next is found (~1-2 us an object of host work on a GPU host, which
    // before this all ran ahead of the first copy; BENCHMARKS.md
    // 2026-11-29, sixth session). Small chunks first, so the GPU starts soon.
    for (size_t first = 0, chunk = 8; first < items_.size(); first += chunk, chunk = std::min<size_t>(chunk * 2, 32)) {
      FindHere(first, std::min(items_.size(), first + chunk), ask);
    }
    KeepLocations();  // while the GPU copies the last chunks
    Locate(ask, /*unleased=*/table_ != nullptr);
    Settle();
    // Copies the table did not vouch for (the object moved or went, or kvd
    // did): read again, leased.
    std::vector<size_t> again = std::move(again_);
    again_.clear();
    Locate(again, /*unleased=*/false);
    Settle();
    TellKvdOfKeptReads();
    return std::move(out_);
  }

 private:
  // Items [first, end): loads enqueued for those whose location this
  // process knows (the read cache) or finds (kvd's directory); the rest
  // appended to `ask`.
  void FindHere(size_t first, size_t end, std::vector<size_t>& ask) {
    std::vector<std::shared_ptr<const client::CachedRead>> kept;  // alive until the loads are enqueued
    std::vector<Load> loads;
    const uint64_t now = SteadyNowNs();
    // Kept until the next Settle, as Locate's: the loads point into it.
    std::vector<client::ObjectPieces>& listed = located_.emplace_back();
    listed.reserve(end - first);
    const bool directory = table_ != nullptr && table_->has_directory() && impl_.read_cache().enabled();
    for (size_t i = first; i < end; ++i) {
      auto found = table_ != nullptr ? impl_.read_cache().Find(items_[i].key, now) : nullptr;
      if (found != nullptr) {
        if (Fits(i, found->pieces.bytes)) {
          loads.push_back({i, &found->pieces, nullptr, found->check, /*leased=*/false, /*untold=*/false});
          kept.push_back(std::move(found));
        }
        continue;
      }
      // Never read here: kvd's directory may list it (its pages mapped here
      // by reads before), else kvd is asked.
      auto copy = directory ? table_->Find(items_[i].key, ObjectSlab::KeyHash(items_[i].key)) : std::nullopt;
      auto pieces = copy ? impl_.ListedPieces(*copy) : std::nullopt;
      if (!pieces) {
        ask.push_back(i);
      } else if (Fits(i, copy->bytes)) {
        listed.push_back(std::move(*pieces));
        loads.push_back({i,
                         &listed.back(),
                         &listed.back(),
                         {copy->device, copy->read_entry, copy->epoch},
                         /*leased=*/false,
                         /*untold=*/true});
      }
    }
    Enqueue(loads);
  }

  struct Load {
    size_t item;
    const client::ObjectPieces* pieces;
    client::ObjectPieces* owned;  // the same, ours to move into the cache; null for a kept one
    client::ReadCheck check;  // read_entry 0: none
    bool leased;
    bool untold;  // found in kvd's directory: kvd has not seen the read
  };
  struct Checked {
    size_t item;
    client::ReadCheck check;
    bool leased;
  };

  // Whether item i can take `bytes` (else its answer is set).
  bool Fits(size_t i, uint64_t bytes) {
    const DeviceGet& item = items_[i];
    if (item.dst == nullptr) {
      out_[i] = Status::InvalidArgument("get of " + std::string(item.key) + " to a null address");
      return false;
    }
    if (bytes > item.capacity) {
      out_[i] = Status::InvalidArgument("object " + std::string(item.key) + " holds " + std::to_string(bytes) +
                                        " bytes, the destination " + std::to_string(item.capacity));
      return false;
    }
    return true;
  }

  // Enqueues the loads; the locations new here wait in to_keep_ for
  // KeepLocations.
  void Enqueue(const std::vector<Load>& loads) {
    if (loads.empty()) return;
    std::vector<client::LoadItem> items;
    for (const Load& load : loads) items.push_back({items_[load.item].dst, load.pieces});
    std::vector<Status> loaded = client::LoadObjects(impl_.backend(), items, stream_, /*wait=*/false);
    for (size_t k = 0; k < loads.size(); ++k) {
      const Load& load = loads[k];
      if (!loaded[k].ok()) {
        out_[load.item] = loaded[k];
        continue;
      }
      out_[load.item] = load.pieces->bytes;
      loading_.push_back(load.item);
      if (load.check.read_entry == 0) continue;
      checked_.push_back({load.item, load.check, load.leased});
      if (load.owned) to_keep_.push_back(load);  // the launch holds nothing of its pieces
    }
  }

  // The new locations enqueued go into the read cache, after the launches
  // (their host work would otherwise slow the feeding of the GPU) and before
  // the wait. A kept location is only ever a hint: every copy from one is
  // checked, and one that fails its check is erased. A read from the
  // directory reaches kvd's eviction order as one from a kept location
  // does (TellKvdOfKeptReads).
  void KeepLocations() {
    const uint64_t now = SteadyNowNs();
    for (const Load& load : to_keep_) {
      impl_.read_cache().Put(items_[load.item].key, {std::move(*load.owned), load.check}, load.untold ? now : 0);
    }
    to_keep_.clear();
  }

  // Asks kvd where `which` are, up to kMaxObjectBatch keys a request (fewer
  // where long keys fill one), each chunk's loads enqueued before the next
  // is asked for: the GPU copies one while kvd answers the next. A request
  // costs more than a chunk's copies at a GPU's speed (BENCHMARKS.md,
  // 2026-11-29 fourth session), so chunks are as large as a request takes.
  void Locate(const std::vector<size_t>& which, bool unleased) {
    constexpr size_t kHeldLeases = 256;  // then waited for and released: never max_leases a batch
    const size_t chunk = wire::kMaxObjectBatch;
    for (size_t first = 0; first < which.size(); first += chunk) {
      if (leases_.size() + chunk > kHeldLeases) Settle();
      const size_t count = std::min(which.size() - first, chunk);
      std::vector<std::string_view> keys;
      for (size_t k = first; k < first + count; ++k) keys.push_back(items_[which[k]].key);
      std::vector<Result<LeasedPlan>> located = impl_.LeaseBatch(keys, /*hold=*/false, unleased);
      // Kept until the next Settle: the loads and the checks point into it.
      std::vector<client::ObjectPieces>& pieces = located_.emplace_back();
      pieces.reserve(count);
      std::vector<Load> loads;
      for (size_t k = 0; k < count; ++k) {
        const size_t i = which[first + k];
        if (!located[k].ok()) {
          out_[i] = located[k].status();
          continue;
        }
        const ObjectPlan& plan = located[k]->plan;
        const bool leased = located[k]->lease_id != 0;
        if (leased) leases_.push_back(located[k]->lease_id);
        if (!Fits(i, plan.bytes_total)) continue;
        auto mapped = impl_.Pieces(plan, /*with_header=*/false);
        if (!mapped.ok()) {
          out_[i] = mapped.status();
          continue;
        }
        pieces.push_back(std::move(*mapped));
        // A leased copy's entry is kept as well: it serves the next read.
        loads.push_back(
            {i, &pieces.back(), &pieces.back(), {plan.device, plan.read_entry, plan.epoch}, leased, /*untold=*/false});
      }
      Enqueue(loads);
      KeepLocations();
    }
  }

  // What was read from kept locations, told to kvd a second after the first:
  // an unleased location of each (kvd's eviction order sees it read), the
  // answers dropped, what kvd leased anyway (moved to the host tier since)
  // released. After this get's copies, so they never wait for it.
  void TellKvdOfKeptReads() {
    constexpr uint64_t kInterval = 1'000'000'000;
    std::vector<std::string> keys = impl_.read_cache().TakeReadsIfDue(SteadyNowNs(), kInterval);
    if (keys.empty()) return;
    std::vector<std::string_view> names(keys.begin(), keys.end());
    std::vector<uint64_t> leased;
    for (const Result<LeasedPlan>& told : impl_.LeaseBatch(names, /*hold=*/false, /*unleased=*/true)) {
      if (told.ok() && told->lease_id != 0) leased.push_back(told->lease_id);
    }
    if (!leased.empty()) impl_.ReleaseBatch(leased);
  }

  // Waits for what is enqueued; a copy read without a lease that the table
  // does not vouch for is read again (its kept location erased); releases
  // the leases.
  void Settle() {
    KeepLocations();  // before located_, which they point into, goes
    Status finished = client::FinishTransfers(impl_.backend(), stream_);
    if (!finished.ok()) {
      for (size_t i : loading_) out_[i] = finished;
    } else if (!checked_.empty()) {
      // The copies are done: an entry still at its epoch now means the
      // space was the object's all through them. A kvd gone since may have
      // been replaced by one that does not write this table.
      const bool connected = impl_.Connected();
      for (Checked& c : checked_) {
        const bool holds =
            table_ != nullptr && connected && table_->Holds(c.check.kvd_device, c.check.read_entry, c.check.epoch);
        if (holds) continue;
        impl_.read_cache().Erase(items_[c.item].key);
        if (!c.leased) again_.push_back(c.item);
      }
    }
    impl_.ReleaseBatch(leases_);
    leases_.clear();
    loading_.clear();
    checked_.clear();
    located_.clear();
  }

  ObjectStore::Impl& impl_;
  std::span<const DeviceGet> items_;
  void* stream_;
  const client::ReadTableView* table_ = nullptr;
  std::vector<Result<uint64_t>> out_;
  std::vector<uint64_t> leases_;  // held until the next Settle
  std::vector<size_t> loading_;   // items whose load was enqueued, answered after the wait
  std::vector<Checked> checked_;  // their copies to check against the read table
  std::deque<std::vector<client::ObjectPieces>> located_;  // the plans kvd answered, mapped
  std::vector<size_t> again_;     // copies the table did not vouch for
  std::vector<Load> to_keep_;     // enqueued, their locations not in the read cache yet
};

}  // namespace

std::optional<client::ObjectPieces> ObjectStore::Impl::ListedPieces(const client::ListedCopy& copy) {
  std::lock_guard lock(call_mu_);
  const uintptr_t at = mappings_->MappedForRead(copy.device, copy.payload_offset, copy.bytes);
  if (at == 0) return std::nullopt;
  auto local = LocalDeviceLocked(copy.device);
  if (!local.ok()) return std::nullopt;
  client::ObjectPieces pieces;
  pieces.device = *local;
  pieces.bytes = copy.bytes;
  pieces.epoch = copy.epoch;
  pieces.access = AccessOf(*local);
  pieces.payload = reinterpret_cast<void*>(at);
  pieces.segments.push_back({pieces.payload, copy.bytes});
  return pieces;
}

std::vector<Result<uint64_t>> ObjectStore::BatchGetToDevice(std::span<const DeviceGet> items, void* stream) {
  return DeviceReads(*impl_, items, stream).Run();
}

}  // namespace nanokv
