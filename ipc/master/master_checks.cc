#include "ipc/master/master_checks.h"

#include <charconv>
#include <cmath>

#include "ipc/master/master_protocol.h"
#include "ipc/wire/codec.h"
#include "ipc/wire/object_codec.h"
#include "nanokv/object_types.h"

namespace nanokv::master {
namespace {

Status Fault(const std::string& what) { return Status::ProtocolError(what); }

std::string Num(uint64_t n) { return std::to_string(n); }

Status CheckDevice(int32_t device, const std::string& where) {
  if (device >= 0 && static_cast<size_t>(device) < wire::kMaxDevices) return Status::OK();
  return Fault(where + ": device " + std::to_string(device) + " is outside [0, " +
               Num(wire::kMaxDevices - 1) + "]");
}

Status CheckText(const std::string& text, size_t max, const std::string& where) {
  if (text.size() > max) return Fault(where + ": " + Num(text.size()) + " bytes, at most " + Num(max));
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return Fault(where + ": not printable ASCII");
  }
  return Status::OK();
}

}  // namespace

Status CheckRoute(const v1::NodeRoute& route, const std::string& where) {
  NANOKV_RETURN_IF_ERROR(CheckText(route.host_id(), kMaxHostIdBytes, where + ": route host_id"));
  NANOKV_RETURN_IF_ERROR(CheckText(route.kvd_socket(), kMaxSocketPathBytes, where + ": route kvd_socket"));
  if (!route.kvd_socket().empty() && route.kvd_socket()[0] != '/') {
    return Fault(where + ": route kvd_socket is not an absolute path");
  }
  return Status::OK();
}

namespace {

Status CheckReport(const v1::DeviceReport& d, const std::string& where) {
  NANOKV_RETURN_IF_ERROR(CheckDevice(d.device(), where));
  if (!wire::ValidDeviceUuid(d.uuid())) return Fault(where + ": device uuid is not printable ASCII of at most 64 bytes");
  if (d.used_bytes() > d.capacity_bytes()) {
    return Fault(where + ": used " + Num(d.used_bytes()) + " bytes over a capacity of " + Num(d.capacity_bytes()));
  }
  if (d.host_used_bytes() > d.host_capacity_bytes()) {
    return Fault(where + ": host tier used " + Num(d.host_used_bytes()) + " bytes over a capacity of " +
                 Num(d.host_capacity_bytes()));
  }
  auto fraction = [](double f) { return std::isfinite(f) && f >= 0 && f <= 1; };
  if (!fraction(d.high_watermark()) || !fraction(d.low_watermark()) || d.low_watermark() > d.high_watermark()) {
    return Fault(where + ": watermarks are not 0 <= low <= high <= 1");
  }
  return Status::OK();
}

Status CheckReports(const google::protobuf::RepeatedPtrField<v1::DeviceReport>& devices,
                    const std::string& where) {
  if (static_cast<size_t>(devices.size()) > wire::kMaxDevices) {
    return Fault(where + ": " + Num(devices.size()) + " devices, at most " + Num(wire::kMaxDevices));
  }
  uint32_t seen = 0;
  for (const auto& d : devices) {
    NANOKV_RETURN_IF_ERROR(CheckReport(d, where));
    if (seen & (1u << d.device())) return Fault(where + ": device " + std::to_string(d.device()) + " twice");
    seen |= 1u << d.device();
  }
  return Status::OK();
}

Status CheckOrders(const v1::Instruction& in) {
  auto count = [](size_t n) -> Status {
    if (n == 0 || n > kMaxBatchItems) return Fault("instruction: " + Num(n) + " orders, not 1-" + Num(kMaxBatchItems));
    return Status::OK();
  };
  switch (in.body_case()) {
    case v1::Instruction::kOpen:
      NANOKV_RETURN_IF_ERROR(count(in.open().orders_size()));
      for (const auto& o : in.open().orders()) {
        NANOKV_RETURN_IF_ERROR(CheckKey(o.key(), "instruction open"));
        if (o.bytes_total() == 0 || o.bytes_total() > kMaxObjectBytes) {
          return Fault("instruction open: bytes_total " + Num(o.bytes_total()) + " is not 1-" + Num(kMaxObjectBytes));
        }
        NANOKV_RETURN_IF_ERROR(CheckDevice(o.device(), "instruction open"));
      }
      return Status::OK();
    case v1::Instruction::kCommit:
    case v1::Instruction::kRevoke:
    case v1::Instruction::kRemove: {
      const v1::KeyOrders& orders = in.body_case() == v1::Instruction::kCommit   ? in.commit()
                                    : in.body_case() == v1::Instruction::kRevoke ? in.revoke()
                                                                                 : in.remove();
      NANOKV_RETURN_IF_ERROR(count(orders.orders_size()));
      for (const auto& o : orders.orders()) NANOKV_RETURN_IF_ERROR(CheckKey(o.key(), "instruction"));
      return Status::OK();
    }
    case v1::Instruction::BODY_NOT_SET:
      break;
  }
  return Fault("instruction: no orders");
}

}  // namespace

bool ValidNodeId(std::string_view id) {
  if (id.empty() || id.size() > kMaxNodeIdBytes || id[0] == '.') return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<Segment> ParseSegment(std::string_view text) {
  Segment segment;
  if (text.empty()) return segment;
  size_t slash = text.find('/');
  std::string_view node = text.substr(0, slash);
  if (!ValidNodeId(node)) {
    return Status::InvalidArgument("preferred segment '" + std::string(text.substr(0, 80)) +
                                   "': the node id is not 1-" + Num(kMaxNodeIdBytes) + " of [A-Za-z0-9_.-]");
  }
  segment.node_id = std::string(node);
  if (slash == std::string_view::npos) return segment;
  std::string_view device = text.substr(slash + 1);
  int value = -1;
  auto parsed = std::from_chars(device.data(), device.data() + device.size(), value);
  if (device.empty() || parsed.ec != std::errc() || parsed.ptr != device.data() + device.size() || value < 0 ||
      static_cast<size_t>(value) >= wire::kMaxDevices) {
    return Status::InvalidArgument("preferred segment '" + std::string(text.substr(0, 80)) +
                                   "': the device is not a number in [0, " + Num(wire::kMaxDevices - 1) + "]");
  }
  segment.device = value;
  return segment;
}

Status CheckKey(std::string_view key, std::string_view where) {
  if (ValidObjectKey(key)) return Status::OK();
  return Status::InvalidArgument(std::string(where) + ": key of " + Num(key.size()) + " bytes is not 1-" +
                                 Num(kMaxObjectKeyBytes) + " of printable ASCII without spaces (0x21-0x7e)");
}

Status CheckBatchSize(size_t items, std::string_view what) {
  if (items >= 1 && items <= kMaxBatchItems) return Status::OK();
  return Status::InvalidArgument(std::string(what) + ": " + Num(items) + " items, a batch is 1-" +
                                 Num(kMaxBatchItems));
}

Status CheckWriteItem(const v1::WriteItem& item) {
  NANOKV_RETURN_IF_ERROR(CheckKey(item.key(), "open"));
  if (item.bytes_total() == 0 || item.bytes_total() > kMaxObjectBytes) {
    return Status::InvalidArgument("open " + item.key() + ": bytes_total " + Num(item.bytes_total()) +
                                   " is not 1-" + Num(kMaxObjectBytes));
  }
  if (item.replica_num() > kMaxReplicas) {
    return Status::InvalidArgument("open " + item.key() + ": replica_num " + Num(item.replica_num()) +
                                   " is over " + Num(kMaxReplicas));
  }
  auto segment = ParseSegment(item.preferred_segment());
  return segment.ok() ? Status::OK() : segment.status();
}

Status CheckWriteRef(const v1::WriteRef& ref) {
  NANOKV_RETURN_IF_ERROR(CheckKey(ref.key(), "write"));
  if (ref.write_id() == 0) return Status::InvalidArgument("write " + ref.key() + ": write_id 0 names no write");
  return Status::OK();
}

Status CheckKeysRequest(const v1::KeysRequest& request) {
  if (!request.client_node().empty() && !ValidNodeId(request.client_node())) {
    return Status::InvalidArgument("client_node is not 1-" + Num(kMaxNodeIdBytes) + " of [A-Za-z0-9_.-]");
  }
  if (!wire::ValidDeviceUuid(request.client_device_uuid())) {
    return Status::InvalidArgument("client_device_uuid is not printable ASCII of at most 64 bytes");
  }
  return Status::OK();
}

Status CheckNodeMessage(const v1::NodeMessage& message) {
  switch (message.body_case()) {
    case v1::NodeMessage::kRegister: {
      const auto& r = message.register_();
      if (!ValidNodeId(r.node_id())) {
        return Fault("register: node id is not 1-" + Num(kMaxNodeIdBytes) + " of [A-Za-z0-9_.-]");
      }
      NANOKV_RETURN_IF_ERROR(CheckText(r.data_address(), kMaxAddressBytes, "register: data_address"));
      NANOKV_RETURN_IF_ERROR(CheckText(r.data_mode(), 16, "register: data_mode"));
      NANOKV_RETURN_IF_ERROR(CheckRoute(r.route(), "register"));
      return CheckReports(r.devices(), "register");
    }
    case v1::NodeMessage::kEvents: {
      const auto& events = message.events().events();
      if (static_cast<size_t>(events.size()) > kMaxEventsPerBatch) {
        return Fault("events: " + Num(events.size()) + " in one batch, at most " + Num(kMaxEventsPerBatch));
      }
      for (const auto& e : events) {
        if (!ValidObjectKey(e.key())) return Fault("events: a key breaks the key rule");
        NANOKV_RETURN_IF_ERROR(CheckDevice(e.device(), "events"));
        if (!v1::ObjectEvent::Kind_IsValid(e.kind())) return Fault("events: kind " + std::to_string(e.kind()));
        if (!v1::CopyTier_IsValid(e.tier())) return Fault("events: tier " + std::to_string(e.tier()));
        if (e.kind() == v1::ObjectEvent::READY && (e.bytes_total() == 0 || e.bytes_total() > kMaxObjectBytes)) {
          return Fault("events: READY object of " + Num(e.bytes_total()) + " bytes");
        }
      }
      return Status::OK();
    }
    case v1::NodeMessage::kHeartbeat:
      return CheckReports(message.heartbeat().devices(), "heartbeat");
    case v1::NodeMessage::kReply: {
      const auto& r = message.reply();
      if (r.request_id() == 0) return Fault("reply: request id 0");
      if (static_cast<size_t>(r.statuses_size()) > kMaxBatchItems ||
          static_cast<size_t>(r.plans_size()) > kMaxBatchItems) {
        return Fault("reply: more than " + Num(kMaxBatchItems) + " items");
      }
      return Status::OK();  // against its instruction: CheckInstructionReply
    }
    case v1::NodeMessage::BODY_NOT_SET:
      break;
  }
  return Fault("node message without a body");
}

Status CheckMasterMessage(const v1::MasterMessage& message) {
  if (message.term() == 0) return Fault("master message: term 0");
  switch (message.body_case()) {
    case v1::MasterMessage::kWelcome: {
      const auto& w = message.welcome();
      NANOKV_RETURN_IF_ERROR(CheckText(w.master_id(), kMaxAddressBytes, "welcome: master_id"));
      if (w.lease_ttl_ms() < 100 || w.lease_ttl_ms() > 600'000) {
        return Fault("welcome: lease_ttl_ms " + Num(w.lease_ttl_ms()) + " is not 100-600000");
      }
      if (w.heartbeat_ms() == 0 || w.heartbeat_ms() >= w.lease_ttl_ms()) {
        return Fault("welcome: heartbeat_ms " + Num(w.heartbeat_ms()) + " is not below the lease");
      }
      return Status::OK();
    }
    case v1::MasterMessage::kInstruction:
      if (message.instruction().request_id() == 0) return Fault("instruction: request id 0");
      return CheckOrders(message.instruction());
    case v1::MasterMessage::BODY_NOT_SET:
      break;
  }
  return Fault("master message without a body");
}

Status CheckInstructionReply(const v1::InstructionReply& reply, size_t orders, bool plans) {
  if (static_cast<size_t>(reply.statuses_size()) != orders) {
    return Fault("reply: " + Num(reply.statuses_size()) + " statuses for " + Num(orders) + " orders");
  }
  size_t ok = 0;
  for (const auto& s : reply.statuses()) {
    if (s.code() > static_cast<uint32_t>(kLastCode)) return Fault("reply: status code " + Num(s.code()));
    ok += s.code() == 0 ? 1 : 0;
  }
  if (!plans) return reply.plans_size() == 0 ? Status::OK() : Fault("reply: plans for orders that make none");
  if (static_cast<size_t>(reply.plans_size()) != ok) {
    return Fault("reply: " + Num(reply.plans_size()) + " plans for " + Num(ok) + " orders that succeeded");
  }
  for (const auto& plan : reply.plans()) NANOKV_RETURN_IF_ERROR(wire::CheckObjectPlan(plan));
  return Status::OK();
}

}  // namespace nanokv::master
