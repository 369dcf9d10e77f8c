#include "kvctl/top_frame.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "kvctl/table.h"
#include "kvctl/views.h"
#include "base/human_size.h"
#include "ipc/segment/layout.h"

namespace nanokv::kvctl {
namespace {

constexpr size_t kMinBar = 10;
constexpr size_t kMinNarrowBar = 5;  // a narrower bar tells nothing: left out

// A line built from pieces, each with a tint; cut to a width before painting,
// so escape sequences never count against the width or get cut in half.
class Line {
 public:
  Line& Add(std::string text, Tint tint = Tint::kPlain) {
    pieces_.push_back({Sanitize(text), tint});
    return *this;
  }
  size_t width() const {
    size_t n = 0;
    for (const auto& piece : pieces_) n += piece.text.size();
    return n;
  }
  std::string Render(size_t columns, bool colour) const {
    std::string out;
    size_t left = columns;
    for (const auto& piece : pieces_) {
      if (left == 0) break;
      std::string text = piece.text.substr(0, left);
      left -= text.size();
      out += Paint(text, piece.tint, colour);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }

 private:
  struct Piece {
    std::string text;
    Tint tint;
  };
  std::vector<Piece> pieces_;
};

std::string PadRight(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string PadLeft(std::string text, size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

std::string Clip(std::string text, size_t width) {
  if (text.size() > width) text = text.substr(0, width - 1) + "~";
  return text;
}

size_t Cells(double share, size_t width) {
  if (!(share > 0)) return 0;
  return std::min(width, static_cast<size_t>(std::lround(share * static_cast<double>(width))));
}

std::string ClockText(uint64_t now_unix_ns) {
  time_t seconds = static_cast<time_t>(now_unix_ns / 1'000'000'000);
  tm local{};
  localtime_r(&seconds, &local);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &local);
  return buf;
}

std::string Interval(std::chrono::milliseconds interval) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(interval.count()) / 1000.0);
  return buf;
}

void AddTitle(const TopModel& model, const Kvd* kvd, size_t columns, std::vector<Line>* lines) {
  Line title;
  title.Add("kvctl top", Tint::kBold);
  if (kvd == nullptr) {
    title.Add(model.wanted.empty() ? "  no kvd runs on this node"
                                   : "  no kvd named '" + model.wanted + "' on this node");
  } else {
    title.Add("  kvd '").Add(kvd->ipc_name, Tint::kBold).Add("'");
    if (kvd->snapshot) {
      const ipc::SegmentHeader& header = kvd->snapshot->segment.header;
      title.Add(" (" + std::string(ipc::ReadString(header.backend)) + ", pid " +
                std::to_string(header.kvd_pid) + ")");
    }
    title.Add("  ").Add(KvdStateName(kvd->state), KvdStateTint(kvd->state));
    if (kvd->snapshot) {
      title.Add("  updated " + FormatAge(kvd->snapshot->segment.header.update_unix_ns, model.now_unix_ns));
    }
    if (model.kvds.size() > 1) {
      title.Add("  [" + std::to_string(model.selected + 1) + "/" + std::to_string(model.kvds.size()) + "]");
    }
  }
  std::string clock = ClockText(model.now_unix_ns);
  if (title.width() + 2 + clock.size() <= columns) {
    title.Add(std::string(columns - title.width() - clock.size(), ' ')).Add(clock);
  }
  lines->push_back(std::move(title));
  Line keys;
  keys.Add("q", Tint::kBold).Add(" quit  ").Add("s", Tint::kBold).Add(" sort: ");
  keys.Add(SortKeyName(model.sort), Tint::kBold).Add("  ").Add("r", Tint::kBold).Add(" refresh  ");
  if (model.kvds.size() > 1) keys.Add("n/p", Tint::kBold).Add(" next/previous kvd  ");
  keys.Add("every " + Interval(model.interval), Tint::kDim);
  lines->push_back(std::move(keys));
}

void AddDevices(const ipc::Segment& segment, size_t columns, int rows, bool stale, std::vector<Line>* lines) {
  const uint64_t capacity = CapacityBytes(segment), used = UsedBytes(segment);
  // Whole figures only: in a narrow window the page size goes first, then free.
  const uint32_t tenant_count = segment.header.tenant_count;
  std::vector<std::string> figures = {
      "capacity " + FormatBytes(capacity) + "  used " + FormatBytes(used) + " (" + FormatPercent(used, capacity) + ")",
      "  tenants " + std::to_string(tenant_count) + (tenant_count >= ipc::kMaxTenants ? " (table full)" : ""),
      "  free " + FormatBytes(capacity > used ? capacity - used : 0),
      "  page " + FormatBytes(segment.header.page_bytes)};
  std::string text = figures[0];
  for (size_t i = 1; i < figures.size() && text.size() + figures[i].size() <= columns; ++i) text += figures[i];
  Line summary;
  summary.Add(text, tenant_count >= ipc::kMaxTenants ? Tint::kWarn : Tint::kPlain);
  lines->push_back(std::move(summary));
  lines->emplace_back();
  Line heading;
  heading.Add("DEVICES", Tint::kBold).Add("  # used  + created ahead, free  . not created yet", Tint::kDim);
  lines->push_back(std::move(heading));
  size_t name_width = 4;
  for (uint32_t d = 0; d < segment.header.device_count; ++d) {
    name_width = std::max(name_width, std::min<size_t>(20, ipc::ReadString(segment.devices[d].name).size()));
  }
  // In a short window the devices take at most half the rows left, so the
  // tenants keep theirs (16 devices would fill 80x24); a line says how many more.
  size_t shown = segment.header.device_count;
  if (rows > 0) {
    const size_t left = static_cast<size_t>(rows) > lines->size() ? static_cast<size_t>(rows) - lines->size() : 0;
    const size_t most = std::max<size_t>(2, left / 2);
    if (shown > most) shown = most - 1;
  }
  for (uint32_t d = 0; d < shown; ++d) {
    const ipc::DeviceRow& row = segment.devices[d];
    const uint64_t dev_capacity = DeviceCapacityBytes(row), dev_used = DeviceUsedBytes(row);
    std::string left = PadLeft(std::to_string(row.device), 3) + " " +
                       PadRight(Clip(std::string(ipc::ReadString(row.name)), name_width), name_width) + " [";
    std::string right = "] " + PadLeft(FormatBytes(dev_used), 10) + " / " +
                        PadRight(FormatBytes(dev_capacity), 10) + " " +
                        PadLeft(FormatPercent(dev_used, dev_capacity), 6);
    const std::string reserve = "  reserve " + FormatBytes(row.reserve_pages * row.page_bytes);
    // The reserve is the first to go in a narrow window, the figures never.
    if (left.size() + right.size() + reserve.size() + kMinBar <= columns) right += reserve;
    if (row.held_after_recycle_pages > 0) {
      // Memory engines keep after a recycle: why USED exceeds what is granted.
      const std::string held = "  held after recycle " +
                               FormatBytes(uint64_t{row.held_after_recycle_pages} * row.page_bytes);
      if (left.size() + right.size() + held.size() + kMinBar <= columns) right += held;
    }
    size_t bar = columns > left.size() + right.size() + kMinBar ? columns - left.size() - right.size()
                                                                 : kMinBar;
    const double share = Share(dev_used, dev_capacity);
    size_t used_cells = Cells(share, bar);
    size_t created_cells = std::max(used_cells, Cells(Share(row.created_pages, row.capacity_pages), bar));
    Line line;
    line.Add(left)
        .Add(std::string(used_cells, '#'), stale ? Tint::kBad : TintForShare(share))
        .Add(std::string(created_cells - used_cells, '+'), Tint::kDim)
        .Add(std::string(bar - created_cells, '.'), Tint::kDim)
        .Add(right);
    lines->push_back(std::move(line));
  }
  if (shown < segment.header.device_count) {
    Line more;
    more.Add("... " + std::to_string(segment.header.device_count - shown) +
                 " more devices (a taller window, or kvctl devices, shows them)",
             Tint::kDim);
    lines->push_back(std::move(more));
  }
}

// A line per engine kvd runs (its YAML's instances), between the devices and
// the tenants; nothing when it runs none. In a short window it takes at most
// a third of the rows left, so the tenants keep theirs.
void AddInstances(const Kvd& kvd, uint64_t now_unix_ns, int rows, std::vector<Line>* lines) {
  const ipc::Segment& segment = kvd.snapshot->segment;
  const bool alive = kvd.snapshot->kvd_alive;
  const size_t count = segment.header.instance_count;
  if (count == 0) return;
  std::string tally;  // "2 running, 1 failed"
  for (const char* state : {"starting", "running", "restarting", "exited", "failed", "stale"}) {
    size_t n = 0;
    for (size_t i = 0; i < count; ++i) {
      if (InstanceStateName(segment.instances[i], alive) == state) ++n;
    }
    if (n > 0) tally += (tally.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  }
  lines->emplace_back();
  Line heading;
  heading.Add("INSTANCES (" + std::to_string(count) + ")", Tint::kBold).Add("  " + tally, Tint::kDim);
  lines->push_back(std::move(heading));
  size_t name_width = 4, state_width = 5;
  for (size_t i = 0; i < count; ++i) {
    const ipc::InstanceRow& row = segment.instances[i];
    name_width = std::max(name_width, std::min<size_t>(24, ipc::ReadString(row.name).size()));
    state_width = std::max(state_width, InstanceStateText(row, alive).size());
  }
  Line head;
  head.Add(PadRight("NAME", name_width) + " " + PadLeft("PID", 7) + "  " + PadRight("STATE", state_width) + "  " +
               PadLeft("RESTARTS", 8) + "  SINCE",
           Tint::kDim);
  lines->push_back(std::move(head));
  size_t room = count;
  if (rows > 0) {
    const size_t left = lines->size() < static_cast<size_t>(rows) ? static_cast<size_t>(rows) - lines->size() : 0;
    const size_t cap = std::max<size_t>(2, left / 3);
    if (count > cap) room = cap - 1;  // one line says how many more
  }
  for (size_t i = 0; i < room; ++i) {
    const ipc::InstanceRow& row = segment.instances[i];
    Line line;
    line.Add(PadRight(Clip(std::string(ipc::ReadString(row.name)), name_width), name_width) + " " +
             PadLeft(row.pid > 0 ? std::to_string(row.pid) : "-", 7) + "  ")
        .Add(PadRight(InstanceStateText(row, alive), state_width), InstanceTint(row, alive))
        .Add("  " + PadLeft(std::to_string(row.restarts), 8) + "  " + FormatAge(row.since_unix_ns, now_unix_ns));
    lines->push_back(std::move(line));
  }
  if (room < count) {
    Line more;
    more.Add("... " + std::to_string(count - room) + " more (`kvctl instances` shows them)", Tint::kDim);
    lines->push_back(std::move(more));
  }
}

void AddTenants(const TopModel& model, const Kvd& kvd, size_t columns, int rows,
                std::vector<Line>* lines) {
  const ipc::Segment& segment = kvd.snapshot->segment;
  const bool alive = kvd.snapshot->kvd_alive;
  std::vector<const ipc::TenantRow*> tenants = SortedTenants(segment, model.sort);
  lines->emplace_back();
  Line heading;
  heading.Add("TENANTS (" + std::to_string(tenants.size()) + ")", Tint::kBold)
      .Add("  sorted by " + std::string(SortKeyName(model.sort)) + "  # used  . free to its limit",
           Tint::kDim);
  lines->push_back(std::move(heading));
  size_t name_width = 6, group_width = 5, dev_width = 3;
  for (const ipc::TenantRow* row : tenants) {
    name_width = std::max(name_width, std::min<size_t>(24, ipc::ReadString(row->name).size()));
    group_width = std::max(group_width, std::min<size_t>(16, ipc::ReadString(row->group).size()));
    dev_width = std::max(dev_width, std::min<size_t>(12, TenantDevices(segment, *row).size()));
  }
  // 80 columns must show every figure (USE%, STATE, ACTIVE): the PID column
  // gives way first, then the bar (USE% says it in figures), then long names
  // (clipped with ~).
  const size_t right_width = 1 + 10 + 3 + 10 + 1 + 6 + 2 + 10 + 2 + 8;
  bool show_pid = true;
  auto left_width = [&] { return name_width + 1 + (show_pid ? 8 : 0) + group_width + 1 + dev_width + 1; };
  auto bar_room = [&] {
    const size_t needed = left_width() + 2 + right_width;
    return columns > needed ? columns - needed : 0;
  };
  if (bar_room() < kMinBar) show_pid = false;
  const size_t bar = bar_room() >= kMinNarrowBar ? bar_room() : 0;  // 0: no bar at all
  auto too_wide = [&] { return left_width() + (bar > 0 ? bar + 2 : 0) + right_width > columns; };
  while (too_wide() && (name_width > 6 || group_width > 5)) {
    if (name_width >= group_width && name_width > 6) {
      --name_width;
    } else {
      --group_width;
    }
  }
  auto left_text = [&](const std::string& name, const std::string& pid, const std::string& group,
                       const std::string& dev) {
    return PadRight(Clip(name, name_width), name_width) + " " + (show_pid ? PadLeft(pid, 7) + " " : "") +
           PadRight(Clip(group, group_width), group_width) + " " + PadRight(Clip(dev, dev_width), dev_width) + " ";
  };
  // Column heads over the text columns; the bar has none.
  Line head;
  head.Add(left_text("TENANT", "PID", "GROUP", "DEV"), Tint::kDim);
  head.Add(PadRight("", bar > 0 ? bar + 2 : 0) + " " + PadLeft("USED", 10) + " / " + PadRight("LIMIT", 10) + " " +
               PadLeft("USE%", 6) + "  " + PadRight("STATE", 10) + "  ACTIVE",
           Tint::kDim);
  lines->push_back(std::move(head));

  size_t room = tenants.size();
  if (rows > 0) {
    size_t used_rows = lines->size();
    room = used_rows < static_cast<size_t>(rows) ? static_cast<size_t>(rows) - used_rows : 0;
    if (room < tenants.size()) room = room > 0 ? room - 1 : 0;  // one line says how many more
  }
  for (size_t i = 0; i < tenants.size() && i < room; ++i) {
    const ipc::TenantRow& row = *tenants[i];
    const double share = Share(row.used_bytes, row.limit_bytes);
    const bool reclaiming = TenantReclaiming(row);
    Tint tint = !alive ? Tint::kBad : reclaiming ? Tint::kWarn : TintForShare(share);
    size_t used_cells = Cells(share, bar);
    std::string state = TenantStateName(row, alive);
    Line line;
    line.Add(left_text(std::string(ipc::ReadString(row.name)), std::to_string(row.pid),
                       std::string(ipc::ReadString(row.group)), TenantDevices(segment, row)));
    if (bar > 0) {
      line.Add("[").Add(std::string(used_cells, '#'), tint).Add(std::string(bar - used_cells, '.'), Tint::kDim).Add("]");
    }
    line.Add(" " + PadLeft(FormatBytes(row.used_bytes), 10) + " / " + PadRight(FormatBytes(row.limit_bytes), 10) +
             " " + PadLeft(FormatPercent(row.used_bytes, row.limit_bytes), 6) + "  ")
        .Add(PadRight(state, 10), !alive ? Tint::kBad : reclaiming ? Tint::kWarn : Tint::kGood)
        .Add("  " + FormatAge(row.last_activity_unix_ns, model.now_unix_ns));
    lines->push_back(std::move(line));
  }
  if (room < tenants.size()) {
    Line more;
    more.Add("... " + std::to_string(tenants.size() - room) + " more (a taller window shows them)", Tint::kDim);
    lines->push_back(std::move(more));
  }
}

}  // namespace

std::vector<std::string> RenderTop(const TopModel& model, int columns_in, int rows, bool colour) {
  const size_t columns = static_cast<size_t>(std::max(columns_in, 20));
  const Kvd* kvd = model.selected >= 0 && static_cast<size_t>(model.selected) < model.kvds.size()
                       ? &model.kvds[static_cast<size_t>(model.selected)]
                       : nullptr;
  std::vector<Line> lines;
  AddTitle(model, kvd, columns, &lines);
  lines.emplace_back();
  if (!model.message.empty()) {
    Line message;
    message.Add(model.message, Tint::kBad);
    lines.push_back(std::move(message));
  }
  if (kvd == nullptr) {
    Line wait;
    wait.Add("waiting for a kvd to start (kvd --ipc-name NAME) ...", Tint::kDim);
    lines.push_back(std::move(wait));
  } else if (!kvd->snapshot) {
    Line error;
    error.Add("cannot read its segment: " + kvd->error.ToString(), Tint::kBad);
    lines.push_back(std::move(error));
  } else {
    if (kvd->state == KvdState::kStale) {
      Line stale;
      stale.Add("kvd is gone: these are the last figures it published (`kvctl cleanup` removes them)",
                Tint::kBad);
      lines.push_back(std::move(stale));
    } else if (kvd->state == KvdState::kHung) {
      Line hung;
      hung.Add("kvd is alive but has not published for over 5 s: busy or hung", Tint::kWarn);
      lines.push_back(std::move(hung));
    }
    AddDevices(kvd->snapshot->segment, columns, rows, kvd->state == KvdState::kStale, &lines);
    AddInstances(*kvd, model.now_unix_ns, rows, &lines);
    AddTenants(model, *kvd, columns, rows, &lines);
  }
  std::vector<std::string> out;
  for (const Line& line : lines) {
    if (rows > 0 && out.size() >= static_cast<size_t>(rows)) break;
    out.push_back(line.Render(columns, colour));
  }
  return out;
}

}  // namespace nanokv::kvctl
