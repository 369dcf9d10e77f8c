// Words and small types shared by the page pool (daemon/node/page_pool.h).
//
// Glossary (the same words mean the same things in every allocator):
//   page      one VMM physical allocation of page_bytes bytes (2 MiB by
//             default, always a multiple of the device's granularity), made by
//             gpu::Backend::CreatePage. The unit the pool grants.
//   page id   a dense index into one device's pool, in [0, capacity_pages).
//             An id names a slot, not memory: Recycle puts a fresh physical
//             page under the same id.
//   block     a KV block: block_size tokens of every kv head, in every layer
//             of K and V (block_allocator.h hands out runs of block ids;
//             libkv/cache/ places them in pages).
//   OS page   a 4 KiB page of the operating system. Never called just "page".
//   grant     a page handed out by Allocate and not yet given back by Free.
//   group     a tenant group (kvd's word): the tenants that may see each
//             other's bytes. Every grant is to a group; a freed page stays on
//             its group's free list, its bytes intact, until the group takes
//             it again or another group needs it, and then only recycled.
//   reserve   pages created ahead of demand and kept free, so a grant never
//             waits on CreatePage (~18 us on an H200).
#ifndef NANOKV_DAEMON_NODE_PAGE_TYPES_H_
#define NANOKV_DAEMON_NODE_PAGE_TYPES_H_

#include <atomic>
#include <cstdint>
#include <thread>

namespace nanokv::kvd {

using PageId = uint32_t;
using GroupId = uint32_t;  // kvd's tenant group index

inline constexpr PageId kNoPage = UINT32_MAX;
inline constexpr GroupId kNoGroup = UINT32_MAX;

// The words for pages recycled away from engines that still hold them, in
// messages for people. The signal to ask again is data, never these words:
// such a refusal carries Hint::kRetryAfterForget (nanokv/status.h), which
// kvd sends as wire Error.retry_after_forget.
inline constexpr char kHeldAfterRecycle[] = "held after recycle";

// A test-and-test-and-set spinlock for critical sections of a few dozen
// instructions (push/pop on a free stack). Why not std::mutex: uncontended,
// both cost one atomic RMW to lock, but this one unlocks with a plain release
// store where glibc's mutex needs a second RMW. bench/page_pool_bench measures
// both in the same run (floor_spinlock vs floor_mutex). On an H200 host (16
// cores, 2026-11-22) a pop + push pair took 20 ns under this lock and 49 ns
// under std::mutex on one thread; with 4 to 16 threads doing nothing but
// pairs, std::mutex gave 1.1-1.5x more throughput (sleeping waiters stop
// fighting over the cache line), and both were bound by moving that line
// between cores (~250 ns a pair at 2 threads). Grants are a small part of a
// request, so the uncontended case wins; if contention ever shows, the cure
// is fewer trips to the shared stack (batched grants, per-thread caches), not
// another lock.
// It spins on a plain load (no cache-line ping-pong while the lock is held)
// and yields after kSpinsBeforeYield tries, so a holder that got preempted
// (more threads than cores) gets the core back instead of being starved.
// Never hold it across a syscall, a driver call or anything that allocates.
// Meets the Lockable requirements, so std::lock_guard works with it.
class SpinLock {
 public:
  void lock() {
    // Uncontended: one exchange, and the spinning stays out of line.
    if (!locked_.exchange(true, std::memory_order_acquire)) [[likely]] return;
    LockContended();
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 64;

  [[gnu::noinline]] void LockContended() {
    for (;;) {
      int spins = 0;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          CpuRelax();
        } else {
          std::this_thread::yield();
          spins = 0;
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  static void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();  // frees the pipeline for the sibling hyperthread
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

  std::atomic<bool> locked_{false};
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_PAGE_TYPES_H_
