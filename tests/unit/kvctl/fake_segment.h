// Made-up kvd snapshots for kvctl's view tests: two devices of 2 MiB pages,
// tenants and instances with the figures a test names. No kvd and no
// /dev/shm involved.
#ifndef NANOKV_TESTS_UNIT_KVCTL_FAKE_SEGMENT_H_
#define NANOKV_TESTS_UNIT_KVCTL_FAKE_SEGMENT_H_

#include <memory>
#include <string>

#include "ipc/segment/layout.h"
#include "kvctl/discovery.h"

namespace nanokv::testing {

inline constexpr uint64_t kFakePage = 2u << 20;
inline constexpr uint64_t kFakeNow = 1'700'000'000'000'000'000ull;

struct FakeTenant {
  std::string name;
  std::string group = "default";
  int32_t pid = 100;
  uint64_t limit_pages = 16;
  uint32_t pages_dev0 = 0;
  uint32_t pages_dev1 = 0;
  uint32_t reserve_pages = 0;  // of its pages, kept mapped ahead (its engine's word)
  ipc::TenantState state = ipc::TenantState::kAttached;
  uint64_t idle_seconds = 3;
};

// A kvd with 2 devices of 64 pages each (16 created ahead of use).
inline kvctl::Kvd FakeKvd(const std::string& ipc, std::initializer_list<FakeTenant> tenants,
                          kvctl::KvdState state = kvctl::KvdState::kLive) {
  kvctl::Kvd kvd;
  kvd.ipc_name = ipc;
  kvd.state = state;
  kvd.snapshot.emplace();
  kvd.snapshot->kvd_alive = state != kvctl::KvdState::kStale;
  ipc::Segment& s = kvd.snapshot->segment;
  std::memset(&s, 0, sizeof(s));
  s.header.magic = ipc::kSegmentMagic;
  s.header.layout_version = ipc::kSegmentLayoutVersion;
  s.header.total_bytes = sizeof(ipc::Segment);
  s.header.kvd_pid = 4242;
  s.header.start_unix_ns = kFakeNow - 60'000'000'000ull;
  s.header.update_unix_ns = kFakeNow - 200'000'000ull;
  s.header.publish_count = 77;
  ipc::CopyString(s.header.ipc_name, ipc);
  ipc::CopyString(s.header.backend, "host");
  s.header.page_bytes = kFakePage;
  s.header.device_count = 2;
  for (uint32_t d = 0; d < 2; ++d) {
    ipc::DeviceRow& row = s.devices[d];
    row.device = static_cast<int32_t>(d);
    ipc::CopyString(row.name, "Fake GPU " + std::to_string(d));
    row.page_bytes = kFakePage;
    row.device_bytes = 128 * kFakePage;
    row.capacity_pages = 64;
    row.reserve_pages = 4;
  }
  uint32_t i = 0;
  for (const FakeTenant& t : tenants) {
    ipc::TenantRow& row = s.tenants[i];
    row.id = i + 1;
    row.pid = t.pid;
    ipc::CopyString(row.name, t.name);
    ipc::CopyString(row.group, t.group);
    row.state = static_cast<uint32_t>(t.state);
    row.limit_bytes = t.limit_pages * kFakePage;
    row.used_pages[0] = t.pages_dev0;
    row.used_pages[1] = t.pages_dev1;
    row.used_bytes = uint64_t{t.pages_dev0 + t.pages_dev1} * kFakePage;
    row.reserve_bytes = uint64_t{t.reserve_pages} * kFakePage;
    row.attach_unix_ns = kFakeNow - 30'000'000'000ull;
    row.last_activity_unix_ns = kFakeNow - t.idle_seconds * 1'000'000'000ull;
    s.devices[0].granted_pages += t.pages_dev0;
    s.devices[1].granted_pages += t.pages_dev1;
    ++i;
  }
  s.header.tenant_count = i;
  for (uint32_t d = 0; d < 2; ++d) {
    s.devices[d].created_pages = s.devices[d].granted_pages + 4;
    s.devices[d].free_pages = 4;
  }
  return kvd;
}

struct FakeInstance {
  std::string name;
  int32_t pid = 0;
  ipc::InstanceState state = ipc::InstanceState::kRunning;
  int32_t exit_code = 0;
  uint32_t restarts = 0;
  uint64_t age_seconds = 5;  // since it entered `state`
};

// Adds instance rows (as kvd's controller publishes them) to a FakeKvd.
inline void AddInstances(kvctl::Kvd& kvd, std::initializer_list<FakeInstance> instances) {
  ipc::Segment& s = kvd.snapshot->segment;
  for (const FakeInstance& instance : instances) {
    ipc::InstanceRow& row = s.instances[s.header.instance_count++];
    ipc::CopyString(row.name, instance.name);
    row.pid = instance.pid;
    row.state = static_cast<uint32_t>(instance.state);
    row.exit_code = instance.exit_code;
    row.restarts = instance.restarts;
    row.since_unix_ns = kFakeNow - instance.age_seconds * 1'000'000'000ull;
  }
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_KVCTL_FAKE_SEGMENT_H_
