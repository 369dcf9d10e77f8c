// The object store's index on the real host backend, the fixture its tests
// share (object_index_test.cc, object_index_trust_test.cc): a node of two
// devices, a store of 6 pages per device, and bytes moved as a producer and
// a reader move them (PutByPlan, GetUnderLease).
#ifndef NANOKV_TESTS_UNIT_DAEMON_OBJECT_STORE_FIXTURE_H_
#define NANOKV_TESTS_UNIT_DAEMON_OBJECT_STORE_FIXTURE_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/objects/object_index.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {

inline constexpr size_t kPage = 2u << 20;
inline constexpr uint64_t kMiB = 1u << 20;
inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint32_t kHolder = 1000;  // a client's uid

inline std::vector<std::byte> Pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = std::byte(static_cast<uint8_t>(seed + i * 7 + i / 251));
  return out;
}

class ObjectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = gpu::MakeHostBackend({.devices = 2, .granularity = kPage, .device_bytes = 64 * kPage});
    NodeOptions options;
    for (int d = 0; d < 2; ++d) {
      PagePoolConfig pool;
      pool.device = d;
      pool.page_bytes = kPage;
      pool.capacity_bytes = 16 * kPage;
      pool.reserve_pages = 2;
      options.pools.push_back(pool);
    }
    auto node = NodeState::Create(*backend_, options);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    node_ = std::move(node).value();
    // 6 pages: 1 of headers, 5 (10 MiB) of payload per device.
    config_.size = SizeOrShare{6 * kPage, 0};
    config_.high_watermark = 0.9;
    config_.low_watermark = 0.5;
    config_.lease_ttl = std::chrono::milliseconds(100);
    config_.write_timeout = std::chrono::milliseconds(1000);
  }

  void Open() {
    auto store = ObjectIndex::Create(*backend_, *node_, config_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    Check();
  }

  void Check() { ASSERT_OK(store_->CheckInvariants(*node_)); }

  // A write fd's ask for `plan`'s page `id` by `uid`, showing `secret`.
  Status Lend(const ObjectPlan& plan, PageId id, uint32_t uid, uint64_t secret = 0) {
    return store_->LendWritablePage(plan.device, id, {uid, plan.key, plan.epoch, secret});
  }

  // A producer's put, as libkv's copy path makes it: open; the header
  // (WRITING at the plan's epoch), the payload and READY through the backend;
  // commit (revoke when a copy fails). kvd writes none of it.
  Status PutByPlan(const std::string& key, std::span<const std::byte> bytes, int device,
                   uint64_t now_ns, uint32_t owner = ObjectIndex::kOperator) {
    NANOKV_ASSIGN_OR_RETURN(ObjectPlan plan, store_->OpenForWrite(key, bytes.size(), device, now_ns, owner));
    NANOKV_ASSIGN_OR_RETURN(uintptr_t base, store_->StoreBase(plan.device));
    Status copied = WriteHeader(plan, ObjectState::kWriting, now_ns);
    if (copied.ok()) {
      copied = backend_->Copy(reinterpret_cast<void*>(base + plan.payload_offset), bytes.data(), bytes.size(),
                              gpu::CopyKind::kHostToDevice);
    }
    if (copied.ok()) copied = WriteHeader(plan, ObjectState::kReady, now_ns);
    if (!copied.ok()) {
      (void)store_->Revoke(key, plan.epoch, now_ns, owner);
      return copied;
    }
    return store_->Commit(key, plan.epoch, now_ns, owner);
  }

  // The plan's header on its device as a producer leaves it in `state`.
  Status WriteHeader(const ObjectPlan& plan, ObjectState state, uint64_t now_ns) {
    NANOKV_ASSIGN_OR_RETURN(uintptr_t base, store_->StoreBase(plan.device));
    ObjectHeader header = WritingHeaderOf(plan, now_ns);
    header.state = static_cast<uint32_t>(state);
    return backend_->Copy(reinterpret_cast<void*>(base + plan.header_offset), &header, sizeof(header),
                          gpu::CopyKind::kHostToDevice);
  }

  ObjectHeader HeaderOnDevice(const ObjectPlan& plan) {
    ObjectHeader header{};
    auto base = store_->StoreBase(plan.device);
    if (base.ok()) std::memcpy(&header, reinterpret_cast<const void*>(*base + plan.header_offset), sizeof(header));
    return header;
  }

  // A reader's get: a lease first (the object can be neither removed nor
  // evicted while it copies), then the copy, then the release.
  Result<std::vector<std::byte>> GetUnderLease(const std::string& key, uint64_t now_ns) {
    NANOKV_ASSIGN_OR_RETURN(LeaseExpiry lease, store_->AcquireLease(key, kHolder, now_ns));
    Result<std::vector<std::byte>> got = CopyOut(key, now_ns);
    Status released = store_->ReleaseLease(key, lease.id, now_ns);
    if (got.ok() && !released.ok()) return released;
    return got;
  }

  // REQUIRES: `key` is leased.
  Result<std::vector<std::byte>> CopyOut(const std::string& key, uint64_t now_ns) {
    NANOKV_ASSIGN_OR_RETURN(ObjectPlan plan, store_->GetLocation(key, now_ns));
    if (plan.tier == ObjectTier::kHost) return CopyOutOfHostTier(plan);
    NANOKV_ASSIGN_OR_RETURN(uintptr_t base, store_->StoreBase(plan.device));
    std::vector<std::byte> out(plan.bytes_total);
    NANOKV_RETURN_IF_ERROR(backend_->Copy(out.data(), reinterpret_cast<const void*>(base + plan.payload_offset),
                                          out.size(), gpu::CopyKind::kDeviceToHost));
    return out;
  }

  // As an engine reads a host-tier plan: each span's page by the read-only
  // fd kvd hands out, mapped PROT_READ (a writable shared map is refused).
  Result<std::vector<std::byte>> CopyOutOfHostTier(const ObjectPlan& plan) {
    std::vector<std::byte> out;
    for (const ObjectSpan& span : plan.spans) {
      NANOKV_ASSIGN_OR_RETURN(int fd, store_->HostTierReadOnlyFd(plan.device, span.page_id));
      void* writable = mmap(nullptr, plan.page_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (writable != MAP_FAILED) {
        munmap(writable, plan.page_bytes);
        close(fd);
        return Status::Internal("a host tier page mapped writable by a reader");
      }
      void* page = mmap(nullptr, plan.page_bytes, PROT_READ, MAP_SHARED, fd, 0);
      close(fd);
      if (page == MAP_FAILED) return Status::Internal("mapping a host tier page failed");
      const auto* at = static_cast<const std::byte*>(page) + span.offset;
      out.insert(out.end(), at, at + span.length);
      munmap(page, plan.page_bytes);
    }
    return out;
  }

  bool Has(const std::string& key) {
    for (const auto& info : store_->List(0)) {
      if (info.key == key) return true;
    }
    return false;
  }

  // Puts `count` objects of `bytes`, keys prefix0.., at times 1, 2, ... ms.
  void PutMany(const std::string& prefix, int count, uint64_t bytes, uint64_t t0 = 1) {
    for (int i = 0; i < count; ++i) {
      ASSERT_OK(PutByPlan(prefix + std::to_string(i), Pattern(bytes, uint8_t(i)), 0, (t0 + i) * kMs));
    }
  }

  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<NodeState> node_;
  ObjectStoreConfig config_;
  std::unique_ptr<ObjectIndex> store_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_TESTS_UNIT_DAEMON_OBJECT_STORE_FIXTURE_H_
