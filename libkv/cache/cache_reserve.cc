// KVCache's reserve: blocks taken ahead with their page groups mapped, so
// an allocation that fits in it is a hot grant: no request to kvd, no
// driver call, no allocator search. Frees refill it for nothing
// (their pages are still mapped); a background thread refills the rest
// with one grant when it runs low. Why the reserve holds blocks and not
// pages: a page is of use only mapped where a block will live (mapping it
// elsewhere is a driver call), and only the cache knows where that is.
#include <algorithm>
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "libkv/cache/kv_cache_impl.h"

namespace nanokv {
namespace {

// How stale kvctl's RESERVE for this cache may be: the thread reports a
// change at once after its own refills, else at most this often.
constexpr auto kReportEvery = std::chrono::seconds(1);

}  // namespace

KVCache::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  refill_cv_.notify_all();
  if (refill_thread_.joinable()) refill_thread_.join();
  // Even with kvd gone: the client's total drops, so a reconnect does not
  // report a reserve that no longer exists.
  if (reported_reserve_bytes_ != 0) {
    Status told = client_.AdjustReserve(g_.config.device,
                                        -static_cast<int64_t>(reported_reserve_bytes_));
    if (!told.ok()) spdlog::debug("nanokv: KVCache: reporting its reserve gone: {}", told.ToString());
  }
}

Result<std::vector<cache::BlockRun>> KVCache::Impl::TakeReserveLocked(size_t count) {
  std::vector<cache::BlockRun> runs;
  size_t left = count;
  while (left > 0 && !reserve_.empty()) {
    cache::BlockRun& front = reserve_.front();
    if (front.count <= left) {
      runs.push_back(front);
      left -= front.count;
      reserve_.pop_front();
      continue;
    }
    const auto part = static_cast<uint32_t>(left);
    NANOKV_RETURN_IF_ERROR(blocks_.Split(front, part));  // a bug of ours if it fails
    runs.push_back({front.first, part});
    front = {front.first + part, front.count - part};
    left = 0;
  }
  reserve_blocks_ -= count - left;
  ++reserve_hits_;
  return runs;
}

void KVCache::Impl::KeepInReserveLocked(std::vector<cache::BlockRun>* runs) {
  const size_t high = g_.config.reserve_high_blocks;
  auto rest_end = runs->begin();
  for (auto it = runs->begin(); it != runs->end(); ++it) {
    if (reserve_blocks_ + it->count > high) {
      *rest_end++ = *it;  // stays in `runs`, to be freed
      continue;
    }
    reserve_.push_back(*it);
    reserve_blocks_ += it->count;
  }
  runs->erase(rest_end, runs->end());
}

Result<size_t> KVCache::Impl::DropReserveLocked(size_t max_pages) {
  refill_blocked_ = true;  // kvd wants pages back: no grant until blocks come free
  size_t pages = 0;
  Status first_error;
  while (pages < max_pages && !reserve_.empty()) {
    const cache::BlockRun run = reserve_.back();
    reserve_.pop_back();
    reserve_blocks_ -= run.count;
    const std::vector<uint32_t> now_free = FreeRunsLocked({run});
    Status unmapped = UnmapGroupsLocked(now_free);
    if (!unmapped.ok() && first_error.ok()) first_error = unmapped;
    pages += now_free.size() * pages_per_group();
  }
  if (!first_error.ok()) return first_error;
  return pages;
}

bool KVCache::Impl::ReserveWantsRefillLocked() const {
  const size_t high = g_.config.reserve_high_blocks;
  if (high == 0 || refill_blocked_ || reserve_blocks_ >= high) return false;
  // Below the low mark, or empty; never while kvd asks for pages back.
  return reserve_blocks_ < std::max<size_t>(g_.config.reserve_low_blocks, 1) &&
         client_.pending_reclaim_pages() == 0;
}

void KVCache::Impl::RefillLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    refill_cv_.wait_for(lock, kReportEvery,
                        [&] { return stopping_ || ReserveWantsRefillLocked(); });
    if (stopping_) return;
    if (ReserveWantsRefillLocked()) RefillLocked();
    // What kvctl shows; sent without the lock, so allocations go on.
    const uint64_t now = reserve_blocks_ * block_bytes();
    if (now == reported_reserve_bytes_) continue;
    const auto delta = static_cast<int64_t>(now) - static_cast<int64_t>(reported_reserve_bytes_);
    reported_reserve_bytes_ = now;
    lock.unlock();
    Status told = client_.AdjustReserve(g_.config.device, delta);
    if (!told.ok()) spdlog::debug("nanokv: KVCache: reporting its reserve: {}", told.ToString());
    lock.lock();
  }
}

void KVCache::Impl::RefillLocked() {
  const size_t want =
      std::min(g_.config.reserve_high_blocks - reserve_blocks_, blocks_.free_blocks());
  if (want == 0) {
    refill_blocked_ = true;  // every block is in use: a free unblocks
    return;
  }
  Result<std::vector<cache::BlockRun>> runs = TakeFreshBlocksLocked(want);
  if (!runs.ok()) {
    // Over the limit, the device full, kvd gone: wait for a free rather
    // than ask again at once.
    ++reserve_refill_failures_;
    refill_blocked_ = true;
    spdlog::debug("nanokv: KVCache: refilling the reserve with {} blocks: {}", want,
                  runs.status().ToString());
    return;
  }
  for (cache::BlockRun run : *runs) reserve_.push_back(run);
  reserve_blocks_ += want;
  ++reserve_refills_;
}

}  // namespace nanokv
