#include "daemon/config/master_link_config.h"

#include "ipc/master/master_checks.h"
#include "ipc/master/master_protocol.h"

namespace nanokv::kvd {
namespace {

Result<std::string> Address(const YamlField& f) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
  size_t colon = text.rfind(':');
  std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || !digits || std::stol(port) == 0 || std::stol(port) > 65535 ||
      text.size() > master::kMaxAddressBytes) {
    return f.Bad("'" + text + "' is not host:port");
  }
  return text;
}

Status Tls(const YamlField& field, master::TlsFiles* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return field.Bad("expected a mapping (ca: ..., cert: ..., key: ...)");
  master::TlsFiles tls;
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    const YamlField value = field.At(entry.second, field.key() + "." + name);
    std::string* slot = name == "ca" ? &tls.ca : name == "cert" ? &tls.cert : name == "key" ? &tls.key : nullptr;
    if (slot == nullptr) return field.At(entry.first, value.key()).Bad("unknown key (ca, cert, key)");
    NANOKV_ASSIGN_OR_RETURN(*slot, value.Scalar());
  }
  if (tls.any() && tls.ca.empty()) return field.Bad("a node speaking TLS needs ca (the master's certificate chain)");
  if (tls.cert.empty() != tls.key.empty()) return field.Bad("a client certificate needs both cert and key");
  *out = tls;
  return Status::OK();
}

// host:port with any port, 0 included (the system picks one: tests).
Result<std::string> DataAddress(const YamlField& f) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
  if (text.empty()) return text;
  size_t colon = text.rfind(':');
  std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || colon == std::string::npos || !digits || std::stol(port) > 65535 ||
      text.size() > master::kMaxAddressBytes) {
    return f.Bad("'" + text.substr(0, 80) + "' is not host:port (the transfer agent listens there; port 0: any)");
  }
  return text;
}

Status Transfer(const YamlField& field, TransferConfig* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return field.Bad("expected a mapping (chunk, depth, staging_buffers, timeout)");
  TransferConfig t;
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    const YamlField value = field.At(entry.second, field.key() + "." + name);
    if (name == "chunk") {
      NANOKV_ASSIGN_OR_RETURN(t.chunk_bytes, value.Bytes());
      if (t.chunk_bytes < 4096 || t.chunk_bytes > (uint64_t{1} << 30)) return value.Bad("not in [4KiB, 1GiB]");
    } else if (name == "depth" || name == "staging_buffers") {
      NANOKV_ASSIGN_OR_RETURN(std::string text, value.Scalar());
      bool digits = !text.empty() && text.size() <= 4 && text.find_first_not_of("0123456789") == std::string::npos;
      const long n = digits ? std::stol(text) : 0;
      if (n < 1 || n > (name == "depth" ? 64 : 1024)) {
        return value.Bad(name == "depth" ? "not a count in [1, 64]" : "not a count in [1, 1024]");
      }
      (name == "depth" ? t.depth : t.staging_buffers) = static_cast<uint32_t>(n);
    } else if (name == "timeout") {
      NANOKV_ASSIGN_OR_RETURN(t.timeout, value.Duration(std::chrono::milliseconds(100), std::chrono::minutes(10),
                                                        "[100ms, 10m]"));
    } else {
      return field.At(entry.first, value.key()).Bad("unknown key (chunk, depth, staging_buffers, timeout)");
    }
  }
  if (t.staging_buffers < t.depth) return field.Bad("staging_buffers is below depth");
  *out = t;
  return Status::OK();
}

}  // namespace

Status ParseMasterLinkConfig(const YamlField& field, MasterLinkConfig* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return field.Bad("expected a mapping (addresses: [host:port], node_id: ..., ...)");
  MasterLinkConfig c;
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    const YamlField value = field.At(entry.second, field.key() + "." + name);
    if (name == "addresses") {
      if (value.node().IsScalar()) {
        NANOKV_ASSIGN_OR_RETURN(std::string one, Address(value));
        c.addresses = {one};
      } else {
        NANOKV_RETURN_IF_ERROR(value.List(&c.addresses, Address, "[\"10.0.0.1:7470\", \"10.0.0.2:7470\"]"));
      }
    } else if (name == "node_id") {
      NANOKV_ASSIGN_OR_RETURN(c.node_id, value.Scalar());
      if (!c.node_id.empty() && !master::ValidNodeId(c.node_id)) {
        return value.Bad("'" + c.node_id + "' is not 1-63 of [A-Za-z0-9_.-]");
      }
    } else if (name == "host_id") {
      NANOKV_ASSIGN_OR_RETURN(c.host_id, value.Scalar());
      if (c.host_id.size() > master::kMaxHostIdBytes ||
          c.host_id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") !=
              std::string::npos) {
        return value.Bad("'" + c.host_id.substr(0, 80) + "' is not 0-" + std::to_string(master::kMaxHostIdBytes) +
                         " of [A-Za-z0-9_.:-]");
      }
    } else if (name == "data_address") {
      NANOKV_ASSIGN_OR_RETURN(c.data_address, DataAddress(value));
    } else if (name == "transfer") {
      NANOKV_RETURN_IF_ERROR(Transfer(value, &c.transfer));
    } else if (name == "token_file") {
      NANOKV_ASSIGN_OR_RETURN(c.token_file, value.Scalar());
    } else if (name == "tls") {
      NANOKV_RETURN_IF_ERROR(Tls(value, &c.tls));
    } else if (name == "retry_interval") {
      NANOKV_ASSIGN_OR_RETURN(c.retry_interval, value.Duration(std::chrono::milliseconds(10),
                                                               std::chrono::minutes(1), "[10ms, 1m]"));
    } else {
      return field.At(entry.first, value.key())
          .Bad("unknown key (addresses, node_id, host_id, data_address, transfer, token_file, tls, retry_interval)");
    }
  }
  if (c.addresses.empty()) return field.Bad("addresses: name at least one master (host:port)");
  *out = c;
  return Status::OK();
}

}  // namespace nanokv::kvd
