// The page keeper: a small process that keeps the object
// store's pages alive across a kvd that dies, for the next kvd to take back.
//
// Why a process: a page's memory lives while a handle, a mapping or an
// exported fd of it is open (backend rule 3; on cuda an exported POSIX fd
// counts as a reference to the allocation). Engines' pages survive a kvd
// crash in the engines that map them; the store's pages are mapped by kvd
// alone, so without a holder outside kvd the store would die with it. The
// page journal says which ids the dead kvd held (so none is granted twice);
// the keeper holds their memory.
//
// How: kvd starts `kvd --role page-keeper` (its own binary, a session of its
// own, stdin/out/err on /dev/null so it never holds a test's or a unit's
// pipes) with one end of a socket pair and a listening socket at
// <run dir>/<ipc>.keeper (kvd's directory: only kvd's uid may connect; the
// keeper checks the peer's uid too). kvd sends it one fd per store page with
// (device, id, generation), and one per page of each host tier (its memfds,
// a kind of their own so a keeper of an older kvd drops them rather than
// handing them back as store pages). On a clean stop kvd says goodbye and the keeper
// exits, dropping the pages (a stop is a stop: the store goes with kvd).
// When the pair closes without that (kill -9, a crash), the keeper waits up
// to the recovery window for the next kvd, hands it every page, and exits
// once that kvd hangs up; nobody coming, it exits and the memory is freed.
#ifndef NANOKV_DAEMON_NODE_PAGE_KEEPER_H_
#define NANOKV_DAEMON_NODE_PAGE_KEEPER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/node/page_types.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// One page a keeper held: the caller owns fd. `host`: a page of the host
// tier under device `device`'s store (a memfd; `id` the tier's own page
// number, no generation), else a store page of the pool.
struct KeptPage {
  int device = 0;
  PageId id = 0;
  uint32_t generation = 0;
  int fd = -1;
  bool host = false;
};

class PageKeeper {
 public:
  // Starts this kvd's keeper, listening at `path` (a stale socket there is
  // replaced: kvd holds the run directory's lock) and waiting `wait_ms`
  // for the next kvd once this one is gone. `exe`: the kvd binary.
  static Result<std::unique_ptr<PageKeeper>> Start(const std::string& exe, const std::string& path,
                                                   uint32_t wait_ms);
  // Closes the pair: without Stop, the keeper waits for the next kvd.
  ~PageKeeper();
  PageKeeper(const PageKeeper&) = delete;
  PageKeeper& operator=(const PageKeeper&) = delete;

  // The keeper holds a copy of `fd` (the caller keeps its own) as page
  // (device, id, generation).
  Status Keep(int device, PageId id, uint32_t generation, int fd);
  // The same for page `id` of device `device`'s host tier (a memfd).
  Status KeepHost(int device, PageId id, int fd);
  // A clean stop: the keeper drops every page and exits (reaped here), and
  // its socket is removed.
  void Stop();
  pid_t pid() const { return pid_; }

  // The pages a dead kvd's keeper at `path` held, now the caller's. Empty
  // when no keeper answers there (none, or it gave up); a keeper of another
  // uid is refused. REQUIRES: this process holds the run directory's lock.
  static std::vector<KeptPage> TakeOver(const std::string& path);

 private:
  PageKeeper(pid_t pid, int pair, std::string path) : pid_(pid), pair_(pair), path_(std::move(path)) {}

  pid_t pid_;
  int pair_;
  std::string path_;
};

// `kvd --role page-keeper --pair FD --listen FD --wait-ms N`: the keeper's
// main (entry/kvd_main.cc). Exit 0 when done, 2 on bad arguments.
int PageKeeperMain(int argc, char** argv);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_PAGE_KEEPER_H_
