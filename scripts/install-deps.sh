#!/usr/bin/env bash
# Installs what nanokv builds and tests with, from Debian bookworm packages only.
# Idempotent: a second run installs nothing. Needs root (or sudo) on a bare machine.
set -euo pipefail

packages=(
  cmake make g++ pkg-config git ca-certificates
  ccache                  # the Makefile compiles through it where present
  libboost-dev            # Interprocess, Asio (header-only parts)
  libspdlog-dev libfmt-dev
  libcli11-dev
  libyaml-cpp-dev
  nlohmann-json3-dev      # JSON log lines (ops/logging.cc); tests parse JSON with it
  prometheus              # kvd_prometheus_test scrapes kvd with a real Prometheus; promtool checks /metrics
  libgtest-dev libgmock-dev
  libbenchmark-dev
  libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc  # the master's API (gRPC), the etcd client
  libssl-dev              # libcrypto: HMAC for the master's Hello (ipc/master/master_auth.cc)
  etcd-server etcd-client # the master's election; tests start etcd for real
  libucx-dev ucx-utils    # the data path between nodes (UCX); ucx_perftest is its floor
  libxxhash-dev
  libamdhip64-dev         # ROCm 5.2 headers: the hip backend compiles and links here
  hipcc rocm-device-libs  # HIP compile check of kernels/ (NANOKV_HIP_KERNELS, gfx90a, clang-15)
  clang libclang-rt-14-dev  # libFuzzer builds (scripts/fuzz.sh)
  clang-format            # scripts/check-format.sh: changed lines as .clang-format writes them
  tmux                    # kvctl_test drives `kvctl top` in it (the test skips without it)
  systemd                 # install_test checks the installed units with systemd-analyze verify
  python3 python3-numpy   # python/tests: the nanokv package over libnanokv.so
  python3-torch           # PyTorch 1.13 (CPU): the torch views and the decode-loop example on host
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
