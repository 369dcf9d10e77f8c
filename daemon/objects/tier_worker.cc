#include "daemon/objects/tier_worker.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "base/clocks.h"

namespace nanokv::kvd {

std::unique_ptr<TierWorker> TierWorker::Start(ObjectIndex& index) {
  std::unique_ptr<TierWorker> worker(new TierWorker(index));
  worker->thread_ = std::thread([w = worker.get()] { w->Run(); });
  index.SetTierKick([w = worker.get()] { w->Kick(); });
  return worker;
}

TierWorker::~TierWorker() {
  index_.SetTierKick(nullptr);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void TierWorker::Kick() {
  // Called with the index's lock held: only this worker's own lock here,
  // which Run never holds while it calls the index.
  {
    std::lock_guard lock(mu_);
    kicked_ = true;
  }
  wake_.notify_one();
}

void TierWorker::Run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return kicked_ || stop_; });
      if (stop_) return;
      kicked_ = false;
    }
    const size_t moved = index_.RunTierWork(SteadyNowNs());
    if (moved > 0) spdlog::debug("object store: tier worker moved {} object(s)", moved);
  }
}

}  // namespace nanokv::kvd
