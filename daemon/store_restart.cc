#include "daemon/store_restart.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/naming.h"
#include "daemon/objects/object_journal.h"

namespace nanokv::kvd {

using ipc::KeeperPathIn;
using ipc::ObjectJournalPathIn;

StoreRestart TakeOverStore(const std::string& run_dir, const std::string& ipc_name, bool store_enabled,
                           std::optional<Recovery>* recovery) {
  StoreRestart restart;
  std::vector<KeptPage> kept = PageKeeper::TakeOver(KeeperPathIn(run_dir, ipc_name));
  std::optional<JournaledStores> previous = ObjectJournal::TakeOver(ObjectJournalPathIn(run_dir, ipc_name));
  if (!store_enabled) {
    for (const KeptPage& page : kept) close(page.fd);
    if (!kept.empty() || previous) {
      spdlog::info("kvd: no object store configured: the previous kvd's store ({} pages) is dropped", kept.size());
    }
    kept.clear();
    unlink(ObjectJournalPathIn(run_dir, ipc_name).c_str());
  } else if (!kept.empty() || previous) {
    spdlog::info("kvd: the previous kvd's object store: {} pages back from its keeper, {} objects in its journal",
                 kept.size(), previous ? previous->object_count() : 0);
  }
  std::set<std::tuple<int, PageId, uint32_t>> back;
  for (const KeptPage& page : kept) {
    if (page.host) {
      // A host tier's memfd: no pool page, nothing in the page journal.
      auto [at, fresh] = restart.host_pages[page.device].emplace(page.id, page.fd);
      if (!fresh) close(page.fd);  // a page twice: the first is kept
      continue;
    }
    back.insert({page.device, page.id, page.generation});
    restart.pages[page.device].push_back({page.id, page.generation, page.fd});
  }
  if (previous) restart.previous = std::move(*previous);
  if (recovery->has_value()) {
    size_t dropped = 0;
    for (Recovery::Device& device : (*recovery)->devices) {
      auto gone = std::remove_if(device.pages.begin(), device.pages.end(), [&](const RecoveredPage& page) {
        return page.kvd_owned && !back.contains({device.device, page.id, page.generation});
      });
      dropped += static_cast<size_t>(device.pages.end() - gone);
      device.pages.erase(gone, device.pages.end());
    }
    if (dropped > 0) spdlog::info("kvd: {} object store pages of the previous kvd did not come back", dropped);
  }
  return restart;
}

void KeeperStop::operator()(PageKeeper* keeper) const {
  keeper->Stop();
  delete keeper;
}

std::unique_ptr<PageKeeper, KeeperStop> KeepStore(ObjectIndex& store, NodeState& node, const std::string& run_dir,
                                                  const std::string& ipc_name, uint32_t wait_ms) {
  Status journal = store.StartJournal(ObjectJournalPathIn(run_dir, ipc_name));
  if (!journal.ok()) {
    spdlog::warn("kvd: object journal: {}: the store's objects will not survive a kvd crash", journal.ToString());
    return nullptr;
  }
  auto keeper = PageKeeper::Start("/proc/self/exe", KeeperPathIn(run_dir, ipc_name), wait_ms);
  if (!keeper.ok()) {
    spdlog::warn("kvd: {}: the store's objects will not survive a kvd crash", keeper.status().ToString());
    return nullptr;
  }
  std::unique_ptr<PageKeeper, KeeperStop> kept(keeper->release());
  for (const auto& [device, id] : store.StorePages()) {
    auto fd = node.PageFd(device, id);
    Status sent = fd.ok() ? kept->Keep(device, id, node.PageGeneration(device, id), *fd) : fd.status();
    if (fd.ok()) close(*fd);
    if (!sent.ok()) {
      spdlog::warn("kvd: page keeper: page {} of device {}: {}: the store's objects will not survive a kvd crash",
                   id, device, sent.ToString());
      return nullptr;  // stops it: a store kept in part is not recovered anyway
    }
  }
  for (const auto& [device, id, fd] : store.HostTierPages()) {
    Status sent = kept->KeepHost(device, id, fd);
    if (!sent.ok()) {
      spdlog::warn(
          "kvd: page keeper: host tier page {} of device {}: {}: the store's objects will not survive a "
          "kvd crash",
          id, device, sent.ToString());
      return nullptr;
    }
  }
  return kept;
}

}  // namespace nanokv::kvd
