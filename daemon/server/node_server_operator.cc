// kvd's answers to limit requests and to evict: an engine's own limit, and
// what only the operator (root or kvd's uid) may ask of another tenant; and
// the tasks other threads post to the server's (a SIGHUP reload).
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/server/kvd_metrics.h"
#include "daemon/server/node_server.h"

namespace nanokv::kvd {

namespace {
// An operator's limit or evict of kvd's own tenant (the object store's
// `kvd.objects`) would strand its pages: the store sizes itself.
Status KvdOwnTenant(const Tenant& t, const char* what) {
  return Status::PermissionDenied("tenant '" + t.name + "' is kvd's own (the object store): no operator may " +
                                  what + " it; object_store.size sets its size, `kvctl evict --objects` "
                                  "frees its objects");
}
}  // namespace

void NodeServer::HandleSetLimit(Connection& c, const wire::Message& m) {
  uint64_t rid = m.request_id();
  TenantId target = c.tenant;
  if (!m.set_limit().tenant().empty()) {
    // Another tenant's limit is an operator's call: kvd's own uid or root.
    if (c.peer.uid != 0 && c.peer.uid != geteuid()) {
      return SendError(c, rid, Status::PermissionDenied("only kvd's user or root may set another tenant's limit"));
    }
    const Tenant* t = node_.FindTenantByName(m.set_limit().tenant());
    if (t == nullptr && m.set_limit().limit_bytes() == 0 && node_.LiftOperatorLimit(m.set_limit().tenant())) {
      // Its limit outlived it (NodeState keeps it by name): lifted while away.
      spdlog::info("kvd: tenant '{}' (not attached): the operator's limit kept for it is lifted",
                   m.set_limit().tenant());
      wire::Message reply;
      reply.set_request_id(rid);
      reply.mutable_set_limit_reply()->set_lifted_detached(true);
      Send(c, reply);
      return;
    }
    if (t == nullptr) {
      return SendError(c, rid, Status::NotFound("no tenant named '" + m.set_limit().tenant() + "'"));
    }
    if (t->kvd_owned) return SendError(c, rid, KvdOwnTenant(*t, "limit"));
    target = t->id;
  }
  const auto by = m.set_limit().tenant().empty() ? NodeState::LimitSetter::kEngine
                                                 : NodeState::LimitSetter::kOperator;
  auto limit = node_.SetLimit(target, m.set_limit().limit_bytes(), by);
  if (!limit.ok()) return SendError(c, rid, limit.status());
  dirty_ = true;
  const Tenant* t = node_.FindTenant(target);
  spdlog::info("kvd: tenant '{}' limit set to {} bytes (uses {})", t->name, *limit,
               node_.UsedBytes(*t));
  wire::Message reply;
  reply.set_request_id(rid);
  reply.mutable_set_limit_reply()->set_limit_bytes(*limit);
  reply.mutable_set_limit_reply()->set_used_bytes(node_.UsedBytes(*t));
  Send(c, reply);
}

void NodeServer::HandleEvict(Connection& c, const wire::Message& m) {
  uint64_t rid = m.request_id();
  if (c.peer.uid != 0 && c.peer.uid != geteuid()) {
    return SendError(c, rid, Status::PermissionDenied("only kvd's user or root may evict a tenant's pages"));
  }
  const Tenant* t = node_.FindTenantByName(m.evict().tenant());
  if (t == nullptr) {
    return SendError(c, rid, Status::NotFound("no tenant named '" + m.evict().tenant() + "'"));
  }
  if (t->kvd_owned) return SendError(c, rid, KvdOwnTenant(*t, "evict"));
  // ceil(bytes / page) without overflow; 0 (all it holds) stays 0. NodeState
  // asks for at most what the tenant holds, so clamping to uint32 loses nothing.
  const uint64_t page = node_.page_bytes();
  const uint64_t bytes = m.evict().bytes();
  const uint64_t wanted = std::min<uint64_t>(bytes / page + (bytes % page != 0), UINT32_MAX);
  const uint64_t used = node_.UsedBytes(*t);
  const auto held = static_cast<uint32_t>(used / page);
  const uint32_t asked = wanted == 0 || wanted > held ? held : static_cast<uint32_t>(wanted);
  Status evicted = node_.Evict(t->id, static_cast<uint32_t>(wanted));
  if (!evicted.ok()) return SendError(c, rid, evicted);
  spdlog::info("kvd: evict: asked tenant '{}' for {} of its {} pages", t->name, asked, held);
  if (metrics_ != nullptr) metrics_->EvictRequested(asked);
  wire::Message reply;
  reply.set_request_id(rid);
  reply.mutable_evict_reply()->set_pages_requested(asked);
  reply.mutable_evict_reply()->set_used_bytes(used);
  Send(c, reply);
}

void NodeServer::Post(std::function<void(NodeState&)> task) {
  {
    std::lock_guard lock(tasks_mu_);
    tasks_.push_back(std::move(task));
  }
  uint64_t one = 1;
  ssize_t ignored = write(task_fd_, &one, sizeof(one));
  (void)ignored;
}

void NodeServer::RunPosted() {
  uint64_t count;
  ssize_t ignored = read(task_fd_, &count, sizeof(count));
  (void)ignored;
  std::vector<std::function<void(NodeState&)>> tasks;
  {
    std::lock_guard lock(tasks_mu_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task(node_);
  dirty_ = true;  // and the turn's DeliverNotices sends what they queued
}

}  // namespace nanokv::kvd
