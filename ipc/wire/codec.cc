#include "ipc/wire/codec.h"

#include <algorithm>
#include <string>

#include "ipc/wire/object_codec.h"

namespace nanokv::wire {
namespace {

Status Fault(const std::string& what) { return Status::ProtocolError(what); }

Status CheckDevice(int32_t device, const char* where) {
  if (device < 0 || static_cast<size_t>(device) >= kMaxDevices) {
    return Fault(std::string(where) + ": device " + std::to_string(device) + " out of range");
  }
  return Status::OK();
}

Status CheckCount(size_t count, const char* where) {
  if (count > kMaxPagesPerRequest) {
    return Fault(std::string(where) + ": " + std::to_string(count) + " pages (at most " +
                 std::to_string(kMaxPagesPerRequest) + " per request)");
  }
  return Status::OK();
}

Status CheckBody(const Message& m) {
  switch (m.body_case()) {
    case Message::kAttach: {
      const AttachRequest& a = m.attach();
      if (!ValidName(a.tenant())) return Fault("attach: tenant name '" + a.tenant().substr(0, 80) + "' is not 1-63 of [A-Za-z0-9_.:@-]");
      if (!a.group().empty() && !ValidName(a.group())) return Fault("attach: group name is not 1-63 of [A-Za-z0-9_.:@-]");
      if (static_cast<size_t>(a.devices_size()) > kMaxDevices) return Fault("attach: too many devices");
      for (int32_t d : a.devices()) NANOKV_RETURN_IF_ERROR(CheckDevice(d, "attach"));
      if (!(a.limit_fraction() >= 0.0 && a.limit_fraction() <= 1.0)) {
        return Fault("attach: limit_fraction must be in [0, 1]");
      }
      if (!(a.device_fraction() >= 0.0 && a.device_fraction() <= 1.0)) {
        return Fault("attach: device_fraction must be in [0, 1]");
      }
      return Status::OK();
    }
    case Message::kGrant:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.grant().device(), "grant"));
      if (m.grant().pages() == 0) return Fault("grant: 0 pages");
      return CheckCount(m.grant().pages(), "grant");
    case Message::kShare:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.share().device(), "share"));
      if (m.share().page_ids_size() == 0) return Fault("share: no pages");
      return CheckCount(m.share().page_ids_size(), "share");
    case Message::kReturnPages:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.return_pages().device(), "return"));
      return CheckCount(m.return_pages().page_ids_size(), "return");
    case Message::kSetLimit:
      if (!m.set_limit().tenant().empty() && !ValidName(m.set_limit().tenant())) {
        return Fault("set_limit: bad tenant name");
      }
      return Status::OK();
    case Message::kEvict:
      if (!ValidName(m.evict().tenant())) return Fault("evict: tenant name is not 1-63 of [A-Za-z0-9_.:@-]");
      return Status::OK();
    case Message::kAdopt:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.adopt().device(), "adopt"));
      if (m.adopt().pages_size() == 0) return Fault("adopt: no pages");
      if (static_cast<uint32_t>(m.adopt().pages_size()) > kMaxAdoptPages) {
        return Fault("adopt: more than " + std::to_string(kMaxAdoptPages) + " pages");
      }
      return Status::OK();
    case Message::kAdoptReply:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.adopt_reply().device(), "adopt_reply"));
      if (m.adopt_reply().reason().size() > kMaxErrorBytes) return Fault("adopt_reply: reason too long");
      NANOKV_RETURN_IF_ERROR(CheckCount(m.adopt_reply().adopted_size(), "adopt_reply"));
      return CheckCount(m.adopt_reply().refused_size(), "adopt_reply");
    case Message::kGrantReply:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.grant_reply().device(), "grant_reply"));
      return CheckCount(m.grant_reply().pages_size(), "grant_reply");
    case Message::kReclaim:
      if (m.reclaim().device() != -1) NANOKV_RETURN_IF_ERROR(CheckDevice(m.reclaim().device(), "reclaim"));
      return Status::OK();
    case Message::kForget:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.forget().device(), "forget"));
      return CheckCount(m.forget().page_ids_size(), "forget");
    case Message::kForgetDone:
      NANOKV_RETURN_IF_ERROR(CheckDevice(m.forget_done().device(), "forget_done"));
      if (m.forget_done().page_ids_size() == 0) return Fault("forget_done: no pages");
      return CheckCount(m.forget_done().page_ids_size(), "forget_done");
    case Message::kRingSetup:
    case Message::kRingSetupReply:  // the client checks the ring itself (RequestRing::Attach)
      return Status::OK();
    case Message::kReserveReport:
      return CheckDevice(m.reserve_report().device(), "reserve_report");
    case Message::kAttachReply:
      if (static_cast<size_t>(m.attach_reply().devices_size()) > kMaxDevices) {
        return Fault("attach_reply: too many devices");
      }
      for (const auto& g : m.attach_reply().devices()) {
        NANOKV_RETURN_IF_ERROR(CheckDevice(g.device(), "attach_reply"));
        if (g.page_bytes() == 0) return Fault("attach_reply: page_bytes 0");
        if (!ValidDeviceUuid(g.uuid())) {
          return Fault("attach_reply: device " + std::to_string(g.device()) + ": uuid of " +
                       std::to_string(g.uuid().size()) + " bytes is not 0-" +
                       std::to_string(kMaxDeviceUuidBytes) + " of printable ASCII");
        }
      }
      return Status::OK();
    case Message::kError:
      if (m.error().message().size() > kMaxErrorBytes) return Fault("error: message too long");
      return Status::OK();
    case Message::kReturnReply:
    case Message::kSetLimitReply:
    case Message::kEvictReply:
    case Message::kDetach:
    case Message::kDetachReply:
    case Message::kShutdown:
      return Status::OK();
    case Message::kObjectOpen:
    case Message::kObjectPlan:
    case Message::kObjectCommit:
    case Message::kObjectRevoke:
    case Message::kObjectRemove:
    case Message::kObjectLocate:
    case Message::kObjectLease:
    case Message::kObjectLeaseReply:
    case Message::kObjectPin:
    case Message::kObjectPages:
    case Message::kObjectPagesReply:
    case Message::kObjectList:
    case Message::kObjectListReply:
    case Message::kObjectEvict:
    case Message::kObjectEvictReply:
    case Message::kObjectAck:
    case Message::kObjectInfo:
    case Message::kObjectInfoReply:
    case Message::kObjectLeaseBatch:
    case Message::kObjectLeaseBatchReply:
    case Message::kObjectReleaseBatch:
    case Message::kObjectReleaseBatchReply:
    case Message::kObjectSlab:
    case Message::kObjectSlabReply:
    case Message::kObjectSlabRelease:
    case Message::kObjectReadTable:
    case Message::kObjectReadTableReply:
      return CheckObjectBody(m);  // ipc/wire/object_codec.cc
    case Message::BODY_NOT_SET:
      return Fault("message has no body (or one this version does not know)");
  }
  return Fault("unknown message body");
}

}  // namespace

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool ValidDeviceUuid(const std::string& uuid) {
  if (uuid.size() > kMaxDeviceUuidBytes) return false;
  for (char c : uuid) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::vector<std::byte> Encode(const Message& message) {
  if (message.version() != 0 && message.version() != kWireVersion) {
    Message restamped = message;
    restamped.set_version(0);
    return Encode(restamped);
  }
  Message version;
  version.set_version(kWireVersion);
  const size_t head = version.ByteSizeLong();
  std::vector<std::byte> out(head + message.ByteSizeLong());
  version.SerializeToArray(out.data(), static_cast<int>(head));
  message.SerializeToArray(out.data() + head, static_cast<int>(out.size() - head));
  return out;
}

Status Decode(std::span<const std::byte> data, Message* out) {
  if (data.empty()) return Fault("empty message");
  if (!out->ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    return Fault("message does not parse (" + std::to_string(data.size()) + " bytes)");
  }
  if (out->version() != kWireVersion) {
    // Not a fault of the message: two releases that cannot talk. Said as
    // such, so an engine's error names the cause (docs/ARCHITECTURE.md).
    return Status::Unsupported("incompatible nanokv versions: the peer speaks wire version " +
                               std::to_string(out->version()) + ", this side " +
                               std::to_string(kWireVersion) +
                               " (use libkv and kvd of one release)");
  }
  return CheckBody(*out);
}

Message ErrorReply(uint64_t request_id, const Status& status) {
  Message m;
  m.set_version(kWireVersion);
  m.set_request_id(request_id);
  m.mutable_error()->set_code(static_cast<int32_t>(status.code()));
  if (status.hint() == Hint::kRetryAfterForget) m.mutable_error()->set_retry_after_forget(true);
  // The code travels on its own: a plain error sends its message alone,
  // without building Status::ToString(); one that names a call and an error
  // name (a driver's, an errno's) sends all of it, "CODE: call: NAME:
  // message", whose prefix StatusFromError drops.
  if (status.call().empty() && status.error_name().empty()) {
    const std::string_view text = status.message();
    m.mutable_error()->set_message(text.data(), std::min(text.size(), kMaxErrorBytes));
    return m;
  }
  std::string text = status.ToString();
  if (text.size() > kMaxErrorBytes) text.resize(kMaxErrorBytes);
  m.mutable_error()->set_message(std::move(text));
  return m;
}

Status StatusFromError(const Error& error) {
  int32_t code = error.code();
  if (code <= 0 || code > static_cast<int32_t>(kLastCode)) code = static_cast<int32_t>(Code::kInternal);
  // A sender of an earlier build put the code's name first; the code
  // travels on its own, so it is not said twice.
  std::string_view text = error.message();
  const std::string_view name = CodeName(static_cast<Code>(code));
  if (text.starts_with(name) && text.substr(name.size()).starts_with(": ")) {
    text.remove_prefix(name.size() + 2);
  }
  std::string said;
  said.reserve(5 + text.size());
  said.append("kvd: ").append(text);
  Status status(static_cast<Code>(code), std::move(said));
  return error.retry_after_forget() ? std::move(status).WithHint(Hint::kRetryAfterForget) : status;
}

const char* BodyName(const Message& message) {
  const auto* field = Message::descriptor()->FindFieldByNumber(message.body_case());
  return field != nullptr ? field->name().c_str() : "nothing";
}

}  // namespace nanokv::wire
