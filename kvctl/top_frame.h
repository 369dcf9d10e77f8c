// One frame of `kvctl top`, as lines of text: a title, a bar per device
// (used, created ahead, not yet created), a line per instance kvd runs (when
// it runs any) and a bar per tenant (used out of its limit), sorted. A pure
// function of the snapshots, the size and the time, so tests check frames
// without a terminal; top.cc puts them on screen.
#ifndef NANOKV_KVCTL_TOP_FRAME_H_
#define NANOKV_KVCTL_TOP_FRAME_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kvctl/discovery.h"
#include "kvctl/figures.h"

namespace nanokv::kvctl {

struct TopModel {
  std::vector<Kvd> kvds;    // every kvd on the node
  int selected = -1;        // index into kvds of the one shown; -1: none
  std::string wanted;       // the IPC name asked for, when it is not (yet) there
  std::string message;      // an error to show, if any
  SortKey sort = SortKey::kUsed;
  std::chrono::milliseconds interval{1000};
  uint64_t now_unix_ns = 0;
};

// At most `rows` lines (0: as many as needed), none wider than `columns`
// visible characters. Colour, if on, is SGR sequences around pieces.
std::vector<std::string> RenderTop(const TopModel& model, int columns, int rows, bool colour);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_TOP_FRAME_H_
