#include "kvctl/top.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "kvctl/discovery.h"
#include "kvctl/terminal.h"
#include "kvctl/top_frame.h"

namespace nanokv::kvctl {
namespace {

// The name top starts on: the one asked for, else the environment's.
std::string InitialName(const TopOptions& options) {
  if (!options.ipc_name.empty()) return options.ipc_name;
  for (const char* variable : {"NANOKV_IPC_NAME", "KVCACHED_IPC_NAME"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0') return value;
  }
  return "";
}

// Re-reads every segment and points `selected` at `*name`: if `*name` is
// empty or gone and was not asked for, at the first live kvd.
void Refresh(TopModel* model, std::string* name, bool name_asked) {
  model->now_unix_ns = NowUnixNs();
  auto kvds = DiscoverKvds(model->now_unix_ns);
  model->message = kvds.ok() ? "" : kvds.status().ToString();
  model->kvds = kvds.ok() ? std::move(kvds).value() : std::vector<Kvd>{};
  model->selected = -1;
  for (size_t i = 0; i < model->kvds.size(); ++i) {
    if (model->kvds[i].ipc_name == *name) model->selected = static_cast<int>(i);
  }
  if (model->selected < 0 && !name_asked) {
    for (size_t i = 0; i < model->kvds.size(); ++i) {
      if (model->kvds[i].state == KvdState::kLive) {
        model->selected = static_cast<int>(i);
        break;
      }
    }
    if (model->selected < 0 && !model->kvds.empty()) model->selected = 0;
  }
  if (model->selected >= 0) *name = model->kvds[static_cast<size_t>(model->selected)].ipc_name;
  model->wanted = model->selected < 0 ? *name : "";
}

Status RunOnce(TopModel* model, std::string* name, bool name_asked, const TopOptions& options) {
  Refresh(model, name, name_asked);
  if (name_asked && model->selected < 0) {
    // Not among the segments found: ReadKvd says why (none of that name, or
    // not a segment this kvctl reads), naming those that exist.
    auto kvd = ReadKvd(*name, model->now_unix_ns);
    return kvd.ok() ? Status::NotFound("no kvd named '" + *name + "'") : kvd.status();
  }
  int columns = 100;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) columns = ws.ws_col;
  const bool colour = UseColour(options.colour, STDOUT_FILENO);
  for (const std::string& line : RenderTop(*model, columns, 0, colour)) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  return Status::OK();
}

}  // namespace

Status RunTop(const TopOptions& options) {
  TopModel model;
  model.sort = options.sort;
  model.interval = options.interval;
  std::string name = InitialName(options);
  const bool name_asked = !name.empty();
  if (options.once) return RunOnce(&model, &name, name_asked, options);

  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<Terminal> terminal, Terminal::Enter(STDIN_FILENO, STDOUT_FILENO));
  const bool colour = UseColour(options.colour, STDOUT_FILENO);
  while (true) {
    Refresh(&model, &name, name_asked);
    Terminal::Size size = terminal->size();
    std::string frame = "\033[H";
    std::vector<std::string> lines = RenderTop(model, size.columns, size.rows, colour);
    for (size_t i = 0; i < lines.size(); ++i) {
      frame += lines[i];
      frame += "\033[K";  // the rest of the row: what a longer line drew there before
      if (i + 1 < lines.size()) frame += "\n";  // no newline on the last: never scroll
    }
    frame += "\033[J";  // the rows below
    NANOKV_RETURN_IF_ERROR(terminal->Write(frame));

    NANOKV_ASSIGN_OR_RETURN(Terminal::Event event, terminal->Wait(options.interval));
    if (event.kind == Terminal::EventKind::kQuit) break;
    if (event.kind != Terminal::EventKind::kKey) continue;
    switch (event.key) {
      case 'q':
      case 'Q':
      case 3:  // Ctrl-C, should the terminal deliver it as a byte
        return Status::OK();
      case 's':
      case 'S':
        model.sort = NextSortKey(model.sort);
        break;
      case 'n':
      case '\t':
      case 'p':
        if (!model.kvds.empty()) {
          const int count = static_cast<int>(model.kvds.size());
          const int step = event.key == 'p' ? count - 1 : 1;
          const int at = model.selected < 0 ? 0 : (model.selected + step) % count;
          name = model.kvds[static_cast<size_t>(at)].ipc_name;
        }
        break;
      default:  // r, space and anything else: redraw now
        break;
    }
  }
  return Status::OK();
}

}  // namespace nanokv::kvctl
