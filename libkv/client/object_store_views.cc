// ObjectStore's views (nanokv/object_store.h, ObjectView): a READY object's
// pages mapped read-only here under a held lease, which the view ends when
// it goes. The view keeps the store's Impl (its connection and mappings)
// alive, so it may outlive the ObjectStore.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "libkv/client/object_store_impl.h"
#include "nanokv/object_store.h"

namespace nanokv {

struct ObjectView::Holder {
  std::shared_ptr<ObjectStore::Impl> store;
  std::string key;
  uint64_t lease_id = 0;

  ~Holder() {
    if (store == nullptr || lease_id == 0) return;
    store->ReleaseBatch({&lease_id, 1});
  }
};

ObjectView::ObjectView() = default;
ObjectView::ObjectView(std::unique_ptr<Holder> holder, const void* data, uint64_t bytes, int device)
    : holder_(std::move(holder)), data_(data), bytes_(bytes), device_(device) {}
ObjectView::ObjectView(ObjectView&&) noexcept = default;
ObjectView& ObjectView::operator=(ObjectView&&) noexcept = default;
ObjectView::~ObjectView() = default;

void ObjectView::ReleaseAll(std::span<ObjectView> views) {
  std::map<ObjectStore::Impl*, std::vector<uint64_t>> leases;  // by the store they came from
  std::vector<std::unique_ptr<Holder>> holders;                // kept until the releases are sent
  for (ObjectView& view : views) {
    if (view.holder_ == nullptr) continue;
    if (view.holder_->store != nullptr && view.holder_->lease_id != 0) {
      leases[view.holder_->store.get()].push_back(std::exchange(view.holder_->lease_id, 0));
    }
    holders.push_back(std::move(view.holder_));
    view = ObjectView();
  }
  for (const auto& [store, ids] : leases) store->ReleaseBatch(ids);
}

const std::string& ObjectView::key() const {
  static const std::string none;
  return holder_ != nullptr ? holder_->key : none;
}

std::vector<Result<ObjectView>> ObjectStore::BatchView(std::span<const std::string> keys) {
  std::vector<std::string_view> names(keys.begin(), keys.end());
  std::vector<Result<LeasedPlan>> leased = impl_->LeaseBatch(names, /*hold=*/true);
  std::vector<Result<ObjectView>> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!leased[i].ok()) {
      out.push_back(leased[i].status());
      continue;
    }
    auto holder = std::make_unique<ObjectView::Holder>();
    holder->store = impl_;
    holder->key = keys[i];
    holder->lease_id = leased[i]->lease_id;
    const ObjectPlan& plan = leased[i]->plan;
    if (plan.tier == ObjectTier::kHost) {
      // A view is the object's device pages; the get queued its promotion.
      out.push_back(Status::Unavailable("view of " + keys[i] +
                                        ": it is in the host tier; kvd is moving it back into the store, ask again"));
      continue;
    }
    // A READY plan maps into the read range, read-only (ObjectMappings).
    Result<void*> data = impl_->Pointer(plan, /*header=*/false, /*begin=*/false);
    Result<int> device = data.ok() ? impl_->LocalDevice(plan.device) : Result<int>(data.status());
    if (!device.ok()) {
      out.push_back(device.status());  // the holder's going ends the lease
      continue;
    }
    out.push_back(ObjectView(std::move(holder), *data, plan.bytes_total, *device));
  }
  return out;
}

Result<ObjectView> ObjectStore::View(std::string_view key) {
  std::string name(key);
  return std::move(BatchView({&name, 1})[0]);
}

}  // namespace nanokv
