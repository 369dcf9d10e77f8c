// etcd for tests, started for real (Debian's etcd-server): each member on
// free loopback ports with its own data directory under a TempDir, ready
// once it answers a linearizable read through our client (no sleeps), and
// gone with its directory when the object goes. Pause/Resume (SIGSTOP,
// SIGCONT) make a hung etcd; Kill/Stop and Restart (same ports, same data)
// make one that dies and comes back.
//
// The members run with a 50 ms heartbeat and a 500 ms election timeout, so
// etcd's smallest lease is 1 s (1.5 election timeouts, rounded up to whole
// seconds; 2 s with etcd's defaults) and tests of lease expiry stay short.
//
// A test that forks processes (masters, kvds) passes them endpoints(); only
// the process that started etcd stops it (a forked child that does not exec
// must _exit, never return through this object's destructor).
#ifndef NANOKV_TESTS_UTIL_ETCD_SERVER_H_
#define NANOKV_TESTS_UTIL_ETCD_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nanokv/status.h"
#include "tests/integration/process_util.h"

namespace nanokv::testing {

// PEM files for TLS: a CA, and a certificate for 127.0.0.1 it signed, good
// for a server and a client alike (etcd, masters, their clients in tests).
struct TestCertificates {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};
// Makes them under `dir` with the openssl command (Debian's openssl).
Result<TestCertificates> MakeTestCertificates(const std::string& dir);

// One etcd member.
class EtcdServer {
 public:
  // A single-member cluster of its own, ready when it returns. With `tls`,
  // it serves clients over TLS only (https, the certificate and key given)
  // and requires a client certificate signed by the CA.
  static Result<std::unique_ptr<EtcdServer>> Start(const TestCertificates* tls = nullptr);
  ~EtcdServer();  // SIGKILL, then its data is removed with the directory
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  // "127.0.0.1:<port>" ("https://127.0.0.1:<port>" with TLS): what
  // etcd::EtcdOptions::endpoints takes.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& name() const { return name_; }
  pid_t pid() const { return process_.pid(); }
  bool running() { return process_.Running(); }

  void Pause();   // SIGSTOP, returning once it has stopped: the member hangs, connections stay open
  void Resume();  // SIGCONT
  void Kill();    // SIGKILL, and reaped
  Status Stop();  // SIGTERM, and waits for the exit
  // Starts it again after Kill or Stop, as the same member (same ports, same
  // data) and waits until it answers (in a cluster: until it has rejoined).
  Status Restart();
  // Waits until it answers a linearizable read, or the process ends.
  Status WaitReady();

  std::string Log() const { return process_.Log(); }

 private:
  friend class EtcdCluster;
  EtcdServer() = default;
  Status Launch();

  std::string name_;
  std::string data_dir_;
  std::string endpoint_;
  std::string peer_url_;
  std::string initial_cluster_;  // name=peer_url,... of every member
  std::optional<TestCertificates> tls_;
  bool fresh_ = true;            // --initial-cluster-state new, only once
  Process process_;
  TempDir dir_;
};

// A cluster of members on this machine (3 for tests that kill one).
class EtcdCluster {
 public:
  // Starts `members` together and waits until each answers.
  static Result<std::unique_ptr<EtcdCluster>> Start(int members, const TestCertificates* tls = nullptr);

  EtcdServer& member(size_t i) { return *members_[i]; }
  size_t size() const { return members_.size(); }
  std::vector<std::string> endpoints() const;

 private:
  friend class EtcdServer;
  std::vector<std::unique_ptr<EtcdServer>> members_;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UTIL_ETCD_SERVER_H_
