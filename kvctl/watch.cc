#include "kvctl/watch.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <thread>

#include "kvctl/discovery.h"
#include "kvctl/json_writer.h"
#include "kvctl/views.h"

namespace nanokv::kvctl {
namespace {

volatile sig_atomic_t g_stop = 0;

void OnStop(int) { g_stop = 1; }

// The kvds a frame shows: the named one, or all.
Result<std::vector<Kvd>> FrameKvds(const WatchOptions& options, uint64_t now) {
  if (options.ipc_name.empty()) return DiscoverKvds(now);
  NANOKV_ASSIGN_OR_RETURN(Kvd kvd, ReadKvd(options.ipc_name, now));
  return std::vector<Kvd>{std::move(kvd)};
}

std::string Frame(const WatchOptions& options, const std::vector<Kvd>& kvds, uint64_t now, bool colour) {
  if (options.json) {
    JsonWriter json;
    json.BeginObject().Field("time_unix_ns", now);
    json.Key("kvds").BeginArray();
    for (const Kvd& kvd : kvds) WriteKvdJson(json, kvd);
    json.EndArray().Key("tenants").BeginArray();
    for (const Kvd& kvd : kvds) WriteTenantsJson(json, kvd, options.sort);
    json.EndArray().Key("instances").BeginArray();
    for (const Kvd& kvd : kvds) WriteInstancesJson(json, kvd);
    json.EndArray().EndObject();
    return json.str();
  }
  ViewOptions view;
  view.colour = colour;
  view.now_unix_ns = now;
  view.sort = options.sort;
  view.with_ipc = options.ipc_name.empty();
  time_t seconds = static_cast<time_t>(now / 1'000'000'000);
  tm local{};
  localtime_r(&seconds, &local);
  char clock[32];
  std::strftime(clock, sizeof(clock), "%Y-%m-%d %H:%M:%S", &local);
  char header[160];
  std::snprintf(header, sizeof(header), "Every %.1fs: kvctl watch%s%s    %s\n\n",
                static_cast<double>(options.interval.count()) / 1000.0,
                options.ipc_name.empty() ? "" : " ", options.ipc_name.c_str(), clock);
  std::string out = header;
  out += ListView(kvds, view);
  out += "\n";
  out += TenantsView(kvds, view);
  bool instances = false;
  for (const Kvd& kvd : kvds) instances |= kvd.snapshot && kvd.snapshot->segment.header.instance_count > 0;
  if (instances) out += "\n" + InstancesView(kvds, view);
  for (const Kvd& kvd : kvds) {
    if (!kvd.snapshot) out += "kvd '" + kvd.ipc_name + "': " + kvd.error.ToString() + "\n";
  }
  return out;
}

}  // namespace

Status RunWatch(const WatchOptions& options) {
  g_stop = 0;
  struct sigaction action{};
  action.sa_handler = OnStop;
  sigemptyset(&action.sa_mask);
  struct sigaction saved_int, saved_term;
  sigaction(SIGINT, &action, &saved_int);
  sigaction(SIGTERM, &action, &saved_term);
  const bool tty = isatty(STDOUT_FILENO) == 1 && !options.json;
  const bool colour = UseColour(options.colour, STDOUT_FILENO);
  Status status;
  for (int frame = 0; !g_stop && (options.count == 0 || frame < options.count); ++frame) {
    const uint64_t now = NowUnixNs();
    auto kvds = FrameKvds(options, now);
    std::string text;
    if (!kvds.ok()) {
      if (frame == 0) {
        status = kvds.status();
        break;
      }
      // E.g. the kvd stopped: say so and keep watching.
      if (options.json) {
        JsonWriter json;
        json.BeginObject().Field("time_unix_ns", now).Field("error", kvds.status().ToString()).EndObject();
        text = json.str();
      } else {
        text = kvds.status().ToString() + "\n";
      }
    } else {
      text = Frame(options, *kvds, now, colour);
    }
    if (tty) {
      std::fputs("\033[H\033[2J", stdout);
    } else if (frame > 0 && !options.json) {
      std::fputs("\n", stdout);
    }
    std::fputs(text.c_str(), stdout);
    if (options.json) std::fputs("\n", stdout);
    std::fflush(stdout);
    if (options.count != 0 && frame + 1 >= options.count) break;
    const auto until = std::chrono::steady_clock::now() + options.interval;
    while (!g_stop && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  sigaction(SIGINT, &saved_int, nullptr);
  sigaction(SIGTERM, &saved_term, nullptr);
  return status;
}

}  // namespace nanokv::kvctl
