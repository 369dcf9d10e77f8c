// NodeServer's requests of an engine's pages: attach (a tenant, its group
// and limit), grant (pages and their fds, in batches), and adopt (pages an
// engine hands back to a restarted kvd).
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "daemon/server/kvd_metrics.h"
#include "daemon/server/node_server.h"
#include "ipc/uds/fd_passing.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvd {

void NodeServer::HandleAdopt(Connection& c, const wire::Message& m, std::vector<int>* fds) {
  const wire::AdoptRequest& a = m.adopt();
  // Pages come by id alone (libkv keeps no fd per page), or, from an older
  // engine, each with its fd: the i-th fd is the i-th page marked fd_attached.
  const auto attached = static_cast<size_t>(std::count_if(
      a.pages().begin(), a.pages().end(), [](const wire::PageGrant& p) { return p.fd_attached(); }));
  if (fds->size() != attached) {
    return Fault(c, m.request_id(),
                 Status::ProtocolError("adopt of " + std::to_string(a.pages_size()) + " pages, " +
                                       std::to_string(attached) + " marked fd_attached, came with " +
                                       std::to_string(fds->size()) + " fds"));
  }
  std::vector<AdoptPage> pages;
  size_t next_fd = 0;
  for (const wire::PageGrant& page : a.pages()) {
    pages.push_back({page.page_id(), page.generation(), page.fd_attached() ? (*fds)[next_fd++] : -1});
  }
  fds->clear();  // Adopt takes every fd
  dirty_ = true;
  auto result = node_.Adopt(c.tenant, a.device(), pages, NowUnixNs());
  if (!result.ok()) return SendError(c, m.request_id(), result.status());
  wire::Message reply;
  reply.set_request_id(m.request_id());
  wire::AdoptReply* out = reply.mutable_adopt_reply();
  out->set_device(a.device());
  for (PageId id : result->adopted) out->add_adopted(id);
  for (PageId id : result->refused) out->add_refused(id);
  out->set_reason(result->reason.substr(0, wire::kMaxErrorBytes));
  spdlog::info("kvd: tenant {} handed back {} pages of device {} ({} refused)", c.tenant,
               result->adopted.size(), a.device(), result->refused.size());
  Send(c, reply);
}

// kvcached's gpu_utilization: a share of the engine's GPU, not of the node.
// The devices it named, else one device: an engine of kvcached's runs on one.
uint64_t NodeServer::EngineDeviceShare(const wire::AttachRequest& a) const {
  uint64_t base = 0, largest = 0;
  for (const DeviceCounts& counts : node_.Counts()) {
    const uint64_t bytes = uint64_t{counts.capacity_pages} * node_.page_bytes();
    largest = std::max(largest, bytes);
    for (int32_t device : a.devices()) base += device == counts.device ? bytes : 0;
  }
  if (a.devices().empty()) base = largest;
  return std::max<uint64_t>(1, static_cast<uint64_t>(a.device_fraction() * static_cast<double>(base)));
}

void NodeServer::HandleAttach(Connection& c, const wire::Message& m) {
  uint64_t rid = m.request_id();
  if (c.tenant != 0) return SendError(c, rid, Status::FailedPrecondition("already attached"));
  const wire::AttachRequest& a = m.attach();
  auto group = GroupFor(c.peer, a.group());
  if (!group.ok()) return SendError(c, rid, group.status());
  AttachParams params;
  params.name = a.tenant();
  params.group = *group;
  params.pid = c.peer.pid;
  params.uid = c.peer.uid;
  params.limit_bytes = a.limit_bytes();
  params.limit_fraction = a.limit_fraction();
  for (int32_t device : a.devices()) {
    bool served = false;
    for (size_t d = 0; d < node_.device_count(); ++d) served |= node_.device_ordinal(d) == device;
    if (!served) {
      std::string ordinals;
      for (size_t d = 0; d < node_.device_count(); ++d) {
        ordinals += (d == 0 ? "" : ", ") + std::to_string(node_.device_ordinal(d));
      }
      return SendError(c, rid, Status::NotFound("kvd does not serve device " + std::to_string(device) +
                                                " (it serves " + ordinals +
                                                ": devices in kvd's config)"));
    }
  }
  if (params.limit_bytes == 0 && params.limit_fraction == 0 && a.device_fraction() > 0) {
    params.limit_bytes = EngineDeviceShare(a);
  }
  auto tenant = node_.Attach(params, NowUnixNs());
  if (!tenant.ok()) return SendError(c, rid, tenant.status());
  c.tenant = *tenant;
  tenant_fds_[*tenant] = c.channel.fd();
  dirty_ = true;
  const Tenant* t = node_.FindTenant(*tenant);
  spdlog::info("kvd: tenant '{}' (id {}, pid {}, group '{}') attached, limit {} bytes", t->name,
               t->id, t->pid, t->group, t->limit_bytes);
  wire::Message reply;
  reply.set_request_id(rid);
  wire::AttachReply* r = reply.mutable_attach_reply();
  r->set_tenant_id(*tenant);
  r->set_segment_name(options_.segment_name);
  r->set_adopt_by_id(true);
  r->set_backend(options_.backend_name);
  r->set_limit_bytes(t->limit_bytes);
  for (const DeviceCounts& counts : node_.Counts()) {
    wire::DeviceGeometry* g = r->add_devices();
    g->set_device(counts.device);
    g->set_page_bytes(node_.page_bytes());
    g->set_capacity_pages(static_cast<uint32_t>(counts.capacity_pages));
    g->set_uuid(DeviceUuid(counts.device));
  }
  Send(c, reply);
}

const std::string& NodeServer::DeviceUuid(int device) const {
  static const std::string kNone;
  if (device < 0 || static_cast<size_t>(device) >= options_.device_uuids.size()) return kNone;
  return options_.device_uuids[device];
}

void NodeServer::HandleGrant(Connection& c, uint64_t rid, int device,
                             Result<std::vector<PageGrant>> granted) {
  if (!granted.ok()) {
    // A refusal that ends once engines drop pages recycled away from them
    // carries Hint::kRetryAfterForget, which ErrorReply sends.
    const Status& refused = granted.status();
    if (metrics_ != nullptr) metrics_->Refused(refused.code());
    Send(c, wire::ErrorReply(rid, refused));
    return;
  }
  // Every fd first (ours: closed once sent, so a page keeps no fd in kvd at
  // rest): if an export fails, the grant is undone whole.
  std::vector<int> fds;
  struct CloseAll {
    std::vector<int>& fds;
    ~CloseAll() {
      for (int fd : fds) close(fd);
    }
  } close_all{fds};
  for (const PageGrant& page : *granted) {
    if (!page.needs_fd) continue;
    auto fd = node_.PageFd(device, page.id);
    if (!fd.ok()) {
      std::vector<PageId> ids;
      for (const PageGrant& p : *granted) ids.push_back(p.id);
      Status undone = node_.Return(c.tenant, device, ids, NowUnixNs());
      if (!undone.ok()) spdlog::error("kvd: undoing a failed grant: {}", undone.ToString());
      return SendError(c, rid, fd.status());
    }
    fds.push_back(*fd);
  }
  // Batches of at most kMaxFdsPerMessage fds; all but the last say more.
  size_t next_fd = 0;
  size_t i = 0;
  const auto& pages = *granted;
  do {
    wire::Message reply;
    reply.set_request_id(rid);
    wire::GrantReply* r = reply.mutable_grant_reply();
    r->set_device(device);
    size_t batch_start = next_fd;
    while (i < pages.size() && !(pages[i].needs_fd && next_fd - batch_start == ipc::kMaxFdsPerMessage)) {
      wire::PageGrant* g = r->add_pages();
      g->set_page_id(pages[i].id);
      g->set_generation(pages[i].generation);
      g->set_fd_attached(pages[i].needs_fd);
      if (pages[i].needs_fd) ++next_fd;
      ++i;
    }
    r->set_more(i < pages.size());
    std::span<const int> batch(fds.data() + batch_start, next_fd - batch_start);
    if (!Send(c, reply, batch)) return;
  } while (i < pages.size());
  if (metrics_ != nullptr) metrics_->PagesGranted(device, pages.size());
}

}  // namespace nanokv::kvd
