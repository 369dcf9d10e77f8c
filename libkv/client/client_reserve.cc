// The reserve an engine reports (Client::AdjustReserve): pages it keeps
// mapped ahead of need, which kvd only shows (kvctl tenants RESERVE). Sent
// as one ReserveReport per change, no reply, and again after a reconnect.
#include <spdlog/spdlog.h>

#include "libkv/client/client_impl.h"

namespace nanokv {
namespace {

wire::Message ReserveReport(int device, uint64_t bytes) {
  wire::Message message;
  wire::ReserveReport* report = message.mutable_reserve_report();
  report->set_device(device);
  report->set_reserve_bytes(bytes);
  return message;
}

}  // namespace

Status Client::Impl::AdjustReserve(int device, int64_t delta_bytes) {
  NANOKV_RETURN_IF_ERROR(CheckDevice(device));
  std::lock_guard<std::mutex> lock(reserve_mu_);
  uint64_t& total = reserve_bytes_[device];
  if (delta_bytes >= 0) {
    total += static_cast<uint64_t>(delta_bytes);
  } else {
    const uint64_t down = uint64_t{0} - static_cast<uint64_t>(delta_bytes);
    total = down > total ? 0 : total - down;
  }
  if (!connected()) {
    return Status::Unavailable("kvd went away; the reserve is reported again after a reconnect");
  }
  // Sent under the lock: changes reach kvd in the order of their totals.
  wire::Message message = ReserveReport(device, total);
  message.set_request_id(next_request_id_++);  // kvd answers only a fault
  return SendMessage(message);
}

void Client::Impl::ResendReserve() {
  std::lock_guard<std::mutex> lock(reserve_mu_);
  for (const auto& [device, total] : reserve_bytes_) {
    if (total == 0) continue;
    wire::Message message = ReserveReport(device, total);
    message.set_request_id(next_request_id_++);
    Status sent = SendMessage(message);
    if (!sent.ok()) spdlog::warn("nanokv: reporting the reserve again: {}", sent.ToString());
  }
}

}  // namespace nanokv
