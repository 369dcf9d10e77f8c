// kvd's start-up part in bringing the object store back after a crash:
// the dead kvd's object journal and the pages its page
// keeper held, taken before NodeState is made, and this kvd's own journal
// and keeper once its store exists (daemon/objects/object_journal.h,
// daemon/node/page_keeper.h, docs/ARCHITECTURE.md "The object store").
#ifndef NANOKV_DAEMON_STORE_RESTART_H_
#define NANOKV_DAEMON_STORE_RESTART_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/node/node_state.h"
#include "daemon/node/page_journal.h"
#include "daemon/node/page_keeper.h"
#include "daemon/objects/object_index.h"

namespace nanokv::kvd {

// What a dead kvd left of its store: its object journal and its pages, from
// its keeper (fds now ours, put in `restart`). Store pages the page journal
// (`recovery`) lists that no keeper handed back are dropped from it, so
// their ids are not held back for nobody. Without a store now, the pages
// are closed (their memory goes) and the old journal removed.
// REQUIRES: the run directory's lock is held.
StoreRestart TakeOverStore(const std::string& run_dir, const std::string& ipc_name, bool store_enabled,
                           std::optional<Recovery>* recovery);

// This kvd's object journal and keeper for `store` (failing either only
// costs the objects a crash: logged). The keeper stops (drops the pages)
// when the returned handle goes: a clean stop or a failed start.
struct KeeperStop {
  void operator()(PageKeeper* keeper) const;
};
std::unique_ptr<PageKeeper, KeeperStop> KeepStore(ObjectIndex& store, NodeState& node, const std::string& run_dir,
                                                  const std::string& ipc_name, uint32_t wait_ms);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_STORE_RESTART_H_
