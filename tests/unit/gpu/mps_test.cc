// The MPS probe (gpu/mps.h) against real pipe directories made here: no
// endpoint, something else by its name, a named pipe or a Unix socket with
// and without a listener. The endpoints are real (mkfifo, bind + listen):
// the probe reads them exactly as it reads the control daemon's.
#include "gpu/mps.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace nanokv::gpu {
namespace {

using Control = MpsState::Control;

class MpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/nanokv_mps_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    control_ = dir_ + "/control";
  }
  void TearDown() override {
    if (listener_ >= 0) ::close(listener_);
    std::filesystem::remove_all(dir_);
  }

  // A Unix socket bound at the control path, listening (closed: left stale).
  void BindSocket(bool listen, int type = SOCK_STREAM) {
    listener_ = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, control_.c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(::listen(listener_, 4), 0);
    if (!listen) {
      ::close(listener_);
      listener_ = -1;
    }
  }

  std::string dir_, control_;
  int listener_ = -1;
};

TEST_F(MpsTest, NoControlEndpointIsNotActive) {
  MpsState state = DetectMps(dir_.c_str());
  EXPECT_EQ(state.control, Control::kAbsent);
  EXPECT_FALSE(state.active());
  EXPECT_TRUE(state.from_environment);
  EXPECT_EQ(DescribeMps(state), "MPS not active: no control daemon at " + control_ + " (CUDA_MPS_PIPE_DIRECTORY)");
  // A directory that does not exist reads the same.
  EXPECT_EQ(DetectMps((dir_ + "/nowhere").c_str()).control, Control::kAbsent);
}

TEST_F(MpsTest, UnsetEnvironmentMeansTheDefaultDirectory) {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    MpsState state = DetectMps(unset);
    EXPECT_EQ(state.pipe_directory, kDefaultMpsPipeDirectory);
    EXPECT_FALSE(state.from_environment);
    EXPECT_NE(DescribeMps(state).find("CUDA_MPS_PIPE_DIRECTORY unset"), std::string::npos);
  }
}

TEST_F(MpsTest, APlainFileIsNotAnEndpoint) {
  std::ofstream(control_) << "not a pipe";
  MpsState state = DetectMps(dir_.c_str());
  EXPECT_EQ(state.control, Control::kNotAnEndpoint);
  EXPECT_FALSE(state.active());
  EXPECT_NE(DescribeMps(state).find("neither a named pipe nor a socket"), std::string::npos);
}

TEST_F(MpsTest, ANamedPipeIsActiveOnlyWhileADaemonHoldsIt) {
  ASSERT_EQ(::mkfifo(control_.c_str(), 0600), 0);
  MpsState stale = DetectMps(dir_.c_str());
  EXPECT_EQ(stale.control, Control::kStale);
  EXPECT_NE(DescribeMps(stale).find("no control daemon listens"), std::string::npos);
  // The daemon's side: the pipe open for reading.
  int reader = ::open(control_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  MpsState live = DetectMps(dir_.c_str());
  EXPECT_EQ(live.control, Control::kListening);
  EXPECT_TRUE(live.active());
  EXPECT_EQ(DescribeMps(live).rfind("MPS active: a control daemon listens at " + control_, 0), 0u);
  // The probe wrote nothing the daemon would read.
  char byte;
  EXPECT_EQ(::read(reader, &byte, 1), 0);
  ::close(reader);
  EXPECT_EQ(DetectMps(dir_.c_str()).control, Control::kStale);
}

TEST_F(MpsTest, ASocketIsActiveOnlyWhileSomethingListens) {
  BindSocket(/*listen=*/true);
  EXPECT_EQ(DetectMps(dir_.c_str()).control, Control::kListening);
  ::close(listener_);
  listener_ = -1;
  EXPECT_EQ(DetectMps(dir_.c_str()).control, Control::kStale);
}

// CUDA 13's control daemon listens on a SOCK_SEQPACKET socket (a stream
// connect to it is EPROTOTYPE: found on an H200).
TEST_F(MpsTest, ASeqpacketSocketIsActiveToo) {
  BindSocket(/*listen=*/true, SOCK_SEQPACKET);
  EXPECT_EQ(DetectMps(dir_.c_str()).control, Control::kListening);
  ::close(listener_);
  listener_ = -1;
  EXPECT_EQ(DetectMps(dir_.c_str()).control, Control::kStale);
}

TEST_F(MpsTest, AnEndpointThisProcessMayNotOpenIsUnknownNotActive) {
  if (::geteuid() == 0) GTEST_SKIP() << "root opens the pipe whatever its mode";
  ASSERT_EQ(::mkfifo(control_.c_str(), 0000), 0);
  MpsState state = DetectMps(dir_.c_str());
  EXPECT_EQ(state.control, Control::kUnreachable);
  EXPECT_FALSE(state.active());
  EXPECT_NE(DescribeMps(state).find("cannot be probed: Permission denied"), std::string::npos);
}

}  // namespace
}  // namespace nanokv::gpu
