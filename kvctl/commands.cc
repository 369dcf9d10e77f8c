#include "kvctl/commands.h"

#include <cstdio>
#include <functional>
#include <optional>
#include <thread>

#include "ipc/wire/codec.h"
#include "kvctl/discovery.h"
#include "kvctl/exit_codes.h"
#include "kvctl/json_writer.h"
#include "kvctl/operator_channel.h"

namespace nanokv::kvctl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(20);

const ipc::TenantRow* FindTenant(const ipc::Segment& segment, const std::string& name) {
  for (uint32_t i = 0; i < segment.header.tenant_count; ++i) {
    if (ipc::ReadString(segment.tenants[i].name) == name) return &segment.tenants[i];
  }
  return nullptr;
}

std::string TenantNames(const ipc::Segment& segment) {
  std::string out;
  for (uint32_t i = 0; i < segment.header.tenant_count; ++i) {
    out += (out.empty() ? "" : ", ") + std::string(ipc::ReadString(segment.tenants[i].name));
  }
  return out.empty() ? "none" : out;
}

// kvd's NotFound for a tenant, with the tenants the segment knows.
Status WithTenantNames(Status status, const Kvd& kvd) {
  if (status.code() != Code::kNotFound || !kvd.snapshot) return status;
  return Status::NotFound(std::string(status.message()) + " on kvd '" + kvd.ipc_name +
                          "' (its tenants: " + TenantNames(kvd.snapshot->segment) + ")");
}

// A running kvd's snapshot, or why there is none.
Result<Kvd> RunningKvd(const std::string& ipc_name) {
  NANOKV_ASSIGN_OR_RETURN(Kvd kvd, ReadKvd(ipc_name, NowUnixNs()));
  NANOKV_RETURN_IF_ERROR(RequireRunning(kvd));
  return kvd;
}

struct Waited {
  uint64_t used_bytes = 0;  // the tenant's use at the end (0 if it left)
  bool left = false;        // the tenant is no longer in the segment
  bool done = false;        // `enough` held before the timeout
  double seconds = 0;
};

// Polls the segment until `enough(used_bytes)` holds for `tenant`, it leaves,
// or `timeout` passes.
Waited WaitForTenant(const std::string& ipc_name, const std::string& tenant,
                     const std::function<bool(uint64_t)>& enough, std::chrono::milliseconds timeout,
                     uint64_t used_bytes) {
  const auto start = Clock::now();
  Waited waited;
  waited.used_bytes = used_bytes;
  while (true) {
    auto snapshot = ipc::ReadSegment(ipc_name);
    if (snapshot.ok()) {
      const ipc::TenantRow* row = FindTenant(snapshot->segment, tenant);
      if (row == nullptr) {
        waited.left = true;
        waited.used_bytes = 0;
      } else {
        waited.used_bytes = row->used_bytes;
      }
      waited.done = waited.left || enough(waited.used_bytes);
    }
    waited.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited.done || Clock::now() - start >= timeout) return waited;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string Seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", seconds);
  return buf;
}

}  // namespace

Result<Report> RunLimit(const std::string& ipc_name, const std::string& tenant,
                        const SizeOrShare& size, const CommandOptions& options) {
  NANOKV_ASSIGN_OR_RETURN(Kvd kvd, RunningKvd(ipc_name));
  const ipc::Segment& segment = kvd.snapshot->segment;
  const ipc::TenantRow* before = FindTenant(segment, tenant);
  std::optional<uint64_t> old_limit;
  if (before != nullptr) old_limit = before->limit_bytes;
  const uint64_t asked = size.Resolve(CapacityBytes(segment));

  NANOKV_ASSIGN_OR_RETURN(OperatorChannel channel, OperatorChannel::Connect(ipc_name));
  wire::Message request;
  request.mutable_set_limit()->set_tenant(tenant);
  request.mutable_set_limit()->set_limit_bytes(asked);
  auto reply = channel.Call(request, options.request_timeout);
  if (!reply.ok()) return WithTenantNames(reply.status(), kvd);
  if (!reply->has_set_limit_reply()) return Status::ProtocolError("kvd answered set_limit with something else");
  if (reply->set_limit_reply().lifted_detached()) {
    Report report;
    if (options.json) {
      JsonWriter json;
      json.BeginObject().Field("ipc", ipc_name).Field("tenant", tenant).Field("attached", false).Field("lifted", true);
      json.EndObject();
      report.text = json.str() + "\n";
    } else {
      report.text = "kvd '" + ipc_name + "': tenant '" + tenant + "' is not attached: the limit kvd kept for it " +
                    "is lifted (it attaches under the kvd's default limit)\n";
    }
    return report;
  }
  const uint64_t limit = reply->set_limit_reply().limit_bytes();
  const uint64_t used = reply->set_limit_reply().used_bytes();
  const bool over = used > limit;

  std::optional<Waited> waited;
  if (options.wait && over) {
    waited = WaitForTenant(ipc_name, tenant, [&](uint64_t now_used) { return now_used <= limit; },
                           options.timeout, used);
  }
  Report report;
  if (waited && !waited->done) report.exit_code = kExitIncomplete;
  if (options.json) {
    JsonWriter json;
    json.BeginObject().Field("ipc", ipc_name).Field("tenant", tenant);
    json.Key("old_limit_bytes");
    old_limit ? json.Uint(*old_limit) : json.Null();
    json.Field("requested_bytes", asked)
        .Field("limit_bytes", limit)
        .Field("used_bytes", used)
        .Field("reclaiming", over);
    if (waited) {
      json.Field("used_after_bytes", waited->used_bytes)
          .Field("returned_bytes", used > waited->used_bytes ? used - waited->used_bytes : 0)
          .Field("complete", waited->done);
      json.Key("seconds").Double(waited->seconds, 3);
    }
    json.EndObject();
    report.text = json.str() + "\n";
    return report;
  }
  report.text = "kvd '" + ipc_name + "': tenant '" + tenant + "' limit " +
                (old_limit ? FormatBytes(*old_limit) + " -> " : std::string()) + FormatBytes(limit);
  if (asked == 0) {
    report.text += " (0: the kvd's default limit)";
  } else if (limit != asked) {
    report.text += " (asked " + FormatBytes(asked) + ", clamped to the kvd's capacity)";
  }
  report.text += "; it uses " + FormatBytes(used);
  if (over) report.text += ": asked it to give back " + FormatBytes(used - limit);
  report.text += "\n";
  if (waited) {
    const uint64_t returned = used > waited->used_bytes ? used - waited->used_bytes : 0;
    if (waited->left) {
      report.text += "it left (every page it held is back) after " + Seconds(waited->seconds) + "\n";
    } else if (waited->done) {
      report.text += "it gave back " + FormatBytes(returned) + " in " + Seconds(waited->seconds) +
                     "; it now uses " + FormatBytes(waited->used_bytes) + "\n";
    } else {
      report.text += "timed out after " + Seconds(waited->seconds) + ": it gave back " +
                     FormatBytes(returned) + " and still uses " + FormatBytes(waited->used_bytes) +
                     ", over its limit\n";
    }
  }
  return report;
}

Result<Report> RunEvict(const std::string& ipc_name, const std::string& tenant, uint64_t bytes,
                        const CommandOptions& options) {
  NANOKV_ASSIGN_OR_RETURN(Kvd kvd, RunningKvd(ipc_name));
  const uint64_t page = kvd.snapshot->segment.header.page_bytes;
  NANOKV_ASSIGN_OR_RETURN(OperatorChannel channel, OperatorChannel::Connect(ipc_name));
  wire::Message request;
  request.mutable_evict()->set_tenant(tenant);
  request.mutable_evict()->set_bytes(bytes);
  auto reply = channel.Call(request, options.request_timeout);
  if (!reply.ok()) return WithTenantNames(reply.status(), kvd);
  if (!reply->has_evict_reply()) return Status::ProtocolError("kvd answered evict with something else");
  const uint32_t pages = reply->evict_reply().pages_requested();
  const uint64_t used = reply->evict_reply().used_bytes();
  const uint64_t wanted = std::min<uint64_t>(uint64_t{pages} * page, used);
  const uint64_t target = used - wanted;

  Waited waited;
  waited.used_bytes = used;
  waited.done = true;
  if (pages > 0) {
    waited = WaitForTenant(ipc_name, tenant, [&](uint64_t now_used) { return now_used <= target; },
                           options.timeout, used);
  }
  const uint64_t returned = used > waited.used_bytes ? used - waited.used_bytes : 0;
  Report report;
  if (!waited.done) report.exit_code = kExitIncomplete;
  if (options.json) {
    JsonWriter json;
    json.BeginObject()
        .Field("ipc", ipc_name)
        .Field("tenant", tenant)
        .Field("requested_bytes", bytes)
        .Field("pages_requested", pages)
        .Field("page_bytes", page)
        .Field("used_before_bytes", used)
        .Field("used_after_bytes", waited.used_bytes)
        .Field("returned_bytes", returned)
        .Field("left", waited.left)
        .Field("complete", waited.done);
    json.Key("seconds").Double(waited.seconds, 3);
    json.EndObject();
    report.text = json.str() + "\n";
    return report;
  }
  if (pages == 0) {
    report.text = "kvd '" + ipc_name + "': tenant '" + tenant + "' holds nothing: nothing to evict\n";
    return report;
  }
  report.text = "kvd '" + ipc_name + "': asked tenant '" + tenant + "' for " + std::to_string(pages) +
                " pages (" + FormatBytes(wanted) + ") of the " + FormatBytes(used) + " it held\n";
  if (waited.left) {
    report.text += "it left after " + Seconds(waited.seconds) + ": all " + FormatBytes(used) +
                   " came back\n";
  } else if (waited.done) {
    report.text += FormatBytes(returned) + " came back in " + Seconds(waited.seconds) +
                   "; it now holds " + FormatBytes(waited.used_bytes) + "\n";
  } else {
    report.text += "timed out after " + Seconds(waited.seconds) + ": " + FormatBytes(returned) +
                   " of " + FormatBytes(wanted) + " came back; it still holds " +
                   FormatBytes(waited.used_bytes) + "\n";
  }
  return report;
}

}  // namespace nanokv::kvctl
