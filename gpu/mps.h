// Whether the CUDA MPS control daemon serves processes started with this
// environment, found without a GPU round trip: the
// daemon's `control` endpoint in its pipe directory ($CUDA_MPS_PIPE_DIRECTORY,
// else /tmp/nvidia-mps), and whether something listens there. A CUDA
// process started while it listens runs its work through the MPS server
// (one GPU context for every client of one uid: no context switch between
// kvd's process and an engine's, docs/OPERATIONS.md "MPS").
//
// The probe opens the endpoint for writing without blocking (a named pipe:
// ENXIO when no daemon holds it open for reading) or connects to it (a Unix
// socket: refused when none listens), and closes it at once, writing
// nothing: what any client of the daemon does before it speaks.
#ifndef NANOKV_GPU_MPS_H_
#define NANOKV_GPU_MPS_H_

#include <string>

namespace nanokv::gpu {

inline constexpr const char* kDefaultMpsPipeDirectory = "/tmp/nvidia-mps";

struct MpsState {
  enum class Control {
    kAbsent,      // no control endpoint: MPS is not running (the usual case)
    kNotAnEndpoint,  // something else has its name: not MPS
    kStale,       // a pipe or socket nobody listens on: a daemon that ended
    kListening,   // a daemon listens: CUDA work of processes like this one goes through MPS
    kUnreachable, // it exists but this process may not open it (permissions)
  };
  std::string pipe_directory;  // where it looked
  bool from_environment = false;  // CUDA_MPS_PIPE_DIRECTORY named it
  Control control = Control::kAbsent;
  std::string detail;  // the errno text for kUnreachable

  bool active() const { return control == Control::kListening; }
};

// `pipe_directory_env`: $CUDA_MPS_PIPE_DIRECTORY's value, or null/"" when it
// is unset (the default directory then).
MpsState DetectMps(const char* pipe_directory_env);

// One line for kvd's start-up log: "MPS active (control daemon at
// /tmp/nvidia-mps/control)", "MPS not active (...)".
std::string DescribeMps(const MpsState& state);

}  // namespace nanokv::gpu

#endif  // NANOKV_GPU_MPS_H_
