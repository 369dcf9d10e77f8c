#include "daemon/node/segment_publisher.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace nanokv::kvd {

SegmentPublisher::SegmentPublisher(std::unique_ptr<ipc::SegmentWriter> writer,
                                   gpu::Backend& backend, const NodeState& node)
    : writer_(std::move(writer)) {
  for (size_t d = 0; d < node.device_count(); ++d) {
    DeviceLabel label;
    auto info = backend.GetDeviceInfo(node.device_ordinal(d));
    if (info.ok()) {
      label.name = info->name;
      label.bytes = info->total_bytes;
    }
    labels_.push_back(label);
  }
}

void SegmentPublisher::Publish(const NodeState& node) {
  Status published = writer_->Publish([&](ipc::Segment& s) {
    std::vector<DeviceCounts> counts = node.Counts();
    size_t devices = std::min<size_t>(counts.size(), ipc::kMaxDevices);
    s.header.device_count = static_cast<uint32_t>(devices);
    for (size_t d = 0; d < devices; ++d) {
      ipc::DeviceRow& row = s.devices[d];
      row.device = counts[d].device;
      ipc::CopyString(row.name, labels_[d].name);
      row.page_bytes = node.page_bytes();
      row.device_bytes = labels_[d].bytes;
      row.capacity_pages = counts[d].capacity_pages;
      row.created_pages = counts[d].created_pages;
      row.free_pages = counts[d].free_pages;
      row.granted_pages = counts[d].held_pages;
      row.reserve_pages = counts[d].reserve_pages;
      row.held_after_recycle_pages = static_cast<uint32_t>(counts[d].held_after_recycle_pages);
      row.object_pages = 0;  // the object store is not built yet
    }
    std::vector<const Tenant*> tenants = node.Tenants();
    size_t rows = std::min<size_t>(tenants.size(), ipc::kMaxTenants);
    s.header.tenant_count = static_cast<uint32_t>(rows);
    for (size_t i = 0; i < rows; ++i) {
      const Tenant& t = *tenants[i];
      ipc::TenantRow& row = s.tenants[i];
      row = ipc::TenantRow{};
      row.id = t.id;
      row.pid = t.pid;
      row.uid = t.uid;
      ipc::CopyString(row.name, t.name);
      ipc::CopyString(row.group, t.group);
      row.state = static_cast<uint32_t>(t.state == TenantState::kReclaiming
                                            ? ipc::TenantState::kReclaiming
                                            : ipc::TenantState::kAttached);
      row.limit_bytes = t.limit_bytes;
      row.used_bytes = node.UsedBytes(t);
      row.reserve_bytes = node.ReserveBytes(t);
      for (size_t d = 0; d < devices; ++d) row.used_pages[d] = t.used_pages[d];
      row.attach_unix_ns = t.attach_unix_ns;
      row.last_activity_unix_ns = t.last_activity_unix_ns;
    }
    // Instance rows belong to the controller, which publishes them itself.
  });
  if (!published.ok()) spdlog::warn("kvd: segment publish: {}", published.ToString());
}

void SegmentPublisher::PublishInstances(const std::vector<ipc::InstanceRow>& rows) {
  Status published = writer_->Publish([&](ipc::Segment& s) {
    size_t count = std::min<size_t>(rows.size(), ipc::kMaxInstances);  // config allows no more
    s.header.instance_count = static_cast<uint32_t>(count);
    std::copy_n(rows.begin(), count, s.instances);
  });
  if (!published.ok()) spdlog::warn("kvd: segment publish (instances): {}", published.ToString());
}

void SegmentPublisher::Remove() {
  Status removed = writer_->Remove();
  if (!removed.ok()) spdlog::warn("kvd: segment remove: {}", removed.ToString());
}

}  // namespace nanokv::kvd
