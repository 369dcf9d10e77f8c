// The test's own record of who holds which pages, kept from what each call
// answered (grant, share, return, detach, an engine killed), and compared with
// the rows kvd publishes. kvd's counters checked against each other (free +
// granted == created) cannot see a page kvd forgot or counted twice; checked
// against this independent record, they can: a tenant's used pages per
// device, and each device's held pages counted once however many share them.
#ifndef NANOKV_TESTS_INTEGRATION_PAGE_LEDGER_H_
#define NANOKV_TESTS_INTEGRATION_PAGE_LEDGER_H_

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ipc/segment/segment_reader.h"
#include "nanokv/client.h"

namespace nanokv::testing {

class PageLedger {
 public:
  // A tenant kvd will list from now on, holding nothing yet.
  void Attach(const std::string& tenant, const std::string& group);
  // The tenant became a holder of these pages of `device` (a grant or a share
  // answered OK). A page held by a tenant of another group is recorded as a
  // conflict: kvd gave one page to two groups (invariant 2).
  void Hold(const std::string& tenant, int device, std::span<const GrantedPage> pages);
  void Hold(const std::string& tenant, int device, std::span<const uint32_t> ids);
  // The tenant gave these pages back (a return answered OK).
  void Release(const std::string& tenant, int device, std::span<const uint32_t> ids);
  // The tenant detached or its process died: it holds nothing, kvd lists it no more.
  void Drop(const std::string& tenant);

  // The ids `tenant` holds on `device`, ascending.
  std::vector<uint32_t> Held(const std::string& tenant, int device) const;
  // Pages of `device` held by anyone, each counted once.
  size_t HeldPages(int device) const;
  // The highest page id ever recorded: tests use it to show they reached high ids.
  uint32_t highest_id() const { return highest_id_; }

  // Empty when `s` agrees with the ledger on every tenant row (present, group,
  // used pages per device, used bytes) and every device's granted pages, and
  // lists no tenant the ledger does not know (but those in `others`, e.g.
  // engine processes a test does not track page by page, whose rows are then
  // checked only for presence and whose pages `others_pages` counts per
  // device), and no device made more pages than its capacity holds beside
  // those held after recycle. Else one line per difference.
  std::string Diff(const ipc::Snapshot& s, const std::set<std::string>& others = {},
                   const std::map<int, uint64_t>& others_pages = {}) const;

 private:
  struct Holder {
    std::string group;
    std::map<int, std::set<uint32_t>> pages;  // device -> ids
  };
  std::map<std::string, Holder> tenants_;
  std::vector<std::string> conflicts_;
  uint32_t highest_id_ = 0;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_PAGE_LEDGER_H_
