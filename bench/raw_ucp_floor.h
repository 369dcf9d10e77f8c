// The floor of the data path between hosts: the same bytes in the same
// chunks and depth over UCP active messages (rendezvous) to a forked process
// that only receives and acknowledges: no index, no staging copies, no
// store. remote_transfer_bench and pd_bench measure against it.
#ifndef NANOKV_BENCH_RAW_UCP_FLOOR_H_
#define NANOKV_BENCH_RAW_UCP_FLOOR_H_

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "ipc/ucx/ucx.h"

namespace nanokv::bench {


struct RawState {
  ucx::Worker* worker = nullptr;
  ucp_ep_h ep = nullptr;
  std::vector<std::byte> buffer;
  size_t chunk = 0;
  int depth = 0;
  int acks = 0;      // sender: acknowledgements seen
  int sends = 0;     // sends in flight
  std::vector<std::pair<void*, size_t>> pending;  // receiver: rendezvous data to pull
  int receiving = 0;
};

inline void OnSent(void* request, ucs_status_t, void* arg) {
  ucx::RequestFree(request);
  --static_cast<RawState*>(arg)->sends;
}

inline ucs_status_t OnChunk(void* arg, const void*, size_t, void* data, size_t length, const ucp_am_recv_param_t* param) {
  auto* s = static_cast<RawState*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0) s->ep = param->reply_ep;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
    ++s->sends;
    (void)ucx::SendAm(s->ep, 2, "", nullptr, 0, false, &OnSent, s);
    return UCS_OK;
  }
  s->pending.emplace_back(data, length);
  return UCS_INPROGRESS;
}

inline void OnPulled(void* request, ucs_status_t, size_t, void* arg) {
  ucx::RequestFree(request);
  auto* s = static_cast<RawState*>(arg);
  --s->receiving;
  ++s->sends;
  (void)ucx::SendAm(s->ep, 2, "", nullptr, 0, false, &OnSent, s);
}

inline ucs_status_t OnAck(void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) {
  ++static_cast<RawState*>(arg)->acks;
  return UCS_OK;
}

inline void OnConnection(ucp_conn_request_h request, void* arg) {
  auto* s = static_cast<RawState*>(arg);
  auto ep = ucx::AcceptEndpoint(*s->worker, request, [](void*, ucp_ep_h, ucs_status_t) { std::_Exit(0); }, s);
  if (ep.ok()) s->ep = *ep;
}

// The receiver: tells its port on `fd`, then receives chunks until its peer goes.
[[noreturn]] inline void RawReceiver(int fd, size_t chunk, int depth) {
  auto context = ucx::Context::Create();
  if (!context.ok()) std::_Exit(1);
  auto worker = ucx::Worker::Create(**context);
  if (!worker.ok()) std::_Exit(1);
  RawState s;
  s.worker = worker->get();
  s.chunk = chunk;
  s.depth = depth;
  s.buffer.resize(chunk * static_cast<size_t>(depth));
  (void)(*worker)->SetHandler(1, &OnChunk, &s);
  auto where = ucx::ParseHostPort("127.0.0.1:0", "raw");
  auto listener = ucx::Listener::Create(**worker, *where, &OnConnection, &s);
  if (!listener.ok()) std::_Exit(1);
  const std::string port = ucx::FormatSockaddr((*listener)->address());
  if (write(fd, port.data(), port.size()) < 0) std::_Exit(1);
  close(fd);
  size_t slot = 0;
  for (;;) {
    if ((*worker)->Progress() == 0 && s.pending.empty() && (*worker)->Arm() == UCS_OK) {
      // Idle: sleep (a spinning receiver takes a core from the kvds on a small machine).
      pollfd p{(*worker)->event_fd(), POLLIN, 0};
      poll(&p, 1, 100);
    }
    while (!s.pending.empty()) {
      auto [data, length] = s.pending.back();
      s.pending.pop_back();
      ++s.receiving;
      std::byte* into = s.buffer.data() + (slot++ % static_cast<size_t>(depth)) * chunk;
      (void)ucx::ReceiveAmData(**worker, data, into, std::min(length, chunk), &OnPulled, &s);
    }
  }
}

struct Raw {
  pid_t child = -1;
  std::unique_ptr<ucx::Context> context;
  std::unique_ptr<ucx::Worker> worker;
  RawState state;
};

// One object of `bytes` as chunks, `depth` in flight; microseconds.
inline double RawSend(Raw& raw, std::span<const std::byte> data, size_t chunk, int depth) {
  RawState& s = raw.state;
  const int chunks = static_cast<int>((data.size() + chunk - 1) / chunk);
  s.acks = 0;
  const double start = NowMicros();
  int sent = 0;
  while (s.acks < chunks) {
    while (sent < chunks && sent - s.acks < depth) {
      const size_t offset = static_cast<size_t>(sent) * chunk;
      ++s.sends;
      (void)ucx::SendAm(s.ep, 1, "", data.data() + offset, std::min(chunk, data.size() - offset), true, &OnSent, &s);
      ++sent;
    }
    raw.worker->Progress();
  }
  return NowMicros() - start;
}

// Forks the receiver (before this process loads UCX) and connects to it.
inline bool StartRaw(Raw& raw, size_t chunk, int depth) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  raw.child = fork();
  if (raw.child == 0) {
    close(fds[0]);
    RawReceiver(fds[1], chunk, depth);
  }
  close(fds[1]);
  char port[128] = {};
  if (read(fds[0], port, sizeof(port) - 1) <= 0) return false;
  close(fds[0]);
  raw.context = std::move(ucx::Context::Create()).value();
  raw.worker = std::move(ucx::Worker::Create(*raw.context)).value();
  raw.state.worker = raw.worker.get();
  (void)raw.worker->SetHandler(2, &OnAck, &raw.state);
  auto ep = ucx::ConnectEndpoint(*raw.worker, *ucx::ParseHostPort(port, "raw"),
                                 [](void*, ucp_ep_h, ucs_status_t) {}, nullptr);
  if (!ep.ok()) return false;
  raw.state.ep = *ep;
  return true;
}

inline void StopRaw(Raw& raw) {
  if (raw.child <= 0) return;
  kill(raw.child, SIGKILL);
  waitpid(raw.child, nullptr, 0);
  raw.child = -1;
}

}  // namespace nanokv::bench

#endif  // NANOKV_BENCH_RAW_UCP_FLOOR_H_
