// Helpers shared by the segment tests: a segment whose every field comes from
// one counter (so a torn copy is detectable), and a forked child that is
// reaped even when a test fails early.
#ifndef NANOKV_TESTS_UNIT_IPC_SEGMENT_TEST_UTIL_H_
#define NANOKV_TESTS_UNIT_IPC_SEGMENT_TEST_UTIL_H_

#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "ipc/segment/layout.h"
#include "nanokv/status.h"
#include "tests/util/status_matchers.h"

namespace nanokv::ipc {

// Every field of every row is a function of one counter `c`, so a copy that
// mixes two publishes differs from what FillFromCounter(its publish_count)
// writes. Sets the counts and rows [0, count); leaves rows past them alone.
inline void FillFromCounter(Segment& s, uint64_t c) {
  s.header.device_count = static_cast<uint32_t>(1 + c % kMaxDevices);
  s.header.tenant_count = static_cast<uint32_t>(kMaxTenants - c % 7);
  s.header.instance_count = static_cast<uint32_t>(c % (kMaxInstances + 1));
  for (uint32_t i = 0; i < s.header.device_count; ++i) {
    DeviceRow& d = s.devices[i];
    d.device = static_cast<int32_t>(i);
    std::snprintf(d.name, sizeof(d.name), "dev-%llu-%u", static_cast<unsigned long long>(c), i);
    d.page_bytes = c + i;
    d.device_bytes = c * 3 + i;
    d.capacity_pages = c * 5 + i;
    d.created_pages = d.free_pages = d.granted_pages = c * 7 + i;
    d.reserve_pages = d.object_pages = c ^ i;
  }
  for (uint32_t i = 0; i < s.header.tenant_count; ++i) {
    TenantRow& t = s.tenants[i];
    t.id = static_cast<uint32_t>(c + i);
    t.pid = static_cast<int32_t>(c * 2 + i);
    t.uid = static_cast<uint32_t>(c ^ i);
    std::snprintf(t.name, sizeof(t.name), "tenant-%llu-%u", static_cast<unsigned long long>(c), i);
    CopyString(t.group, t.name);
    t.state = static_cast<uint32_t>(1 + (c + i) % 4);
    t.limit_bytes = c << 20;
    t.used_bytes = (c << 10) + i;
    for (uint32_t p = 0; p < kMaxDevices; ++p) t.used_pages[p] = static_cast<uint32_t>(c + p + i);
    t.attach_unix_ns = c;
    t.last_activity_unix_ns = c + i;
  }
  for (uint32_t i = 0; i < s.header.instance_count; ++i) {
    InstanceRow& r = s.instances[i];
    std::snprintf(r.name, sizeof(r.name), "engine-%llu-%u", static_cast<unsigned long long>(c), i);
    r.pid = static_cast<int32_t>(c + i);
    r.state = static_cast<uint32_t>(1 + (c + i) % 5);
    r.exit_code = static_cast<int32_t>(c % 3);
    r.restarts = static_cast<uint32_t>(c);
    r.since_unix_ns = c * 11 + i;
  }
}

// True iff `got` is exactly what publish number c = got.header.publish_count
// wrote: rows [0, count) from that c, every row past its count zero. Before
// the first publish (c = 0) the segment holds no rows at all.
inline bool Consistent(const Segment& got) {
  auto expected = std::make_unique<Segment>();
  const uint64_t c = got.header.publish_count;
  if (c > 0) FillFromCounter(*expected, c);
  const SegmentHeader& h = expected->header;
  return h.device_count == got.header.device_count && h.tenant_count == got.header.tenant_count &&
         h.instance_count == got.header.instance_count &&
         std::memcmp(expected->devices, got.devices, sizeof(got.devices)) == 0 &&
         std::memcmp(expected->tenants, got.tenants, sizeof(got.tenants)) == 0 &&
         std::memcmp(expected->instances, got.instances, sizeof(got.instances)) == 0;
}

// A forked child, killed and reaped if the test leaves early.
struct Child {
  pid_t pid = -1;
  int Wait() {
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid) pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

}  // namespace nanokv::ipc

#endif  // NANOKV_TESTS_UNIT_IPC_SEGMENT_TEST_UTIL_H_
