#include "tests/util/etcd_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ipc/etcd/etcd_client.h"

namespace nanokv::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Free loopback ports, all held until every one is chosen so they differ.
Result<std::vector<int>> FreePorts(size_t count) {
  std::vector<int> sockets, ports;
  Status status;
  for (size_t i = 0; i < count && status.ok(); ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      status = Status::FromErrno("bind", errno, "a free loopback port for etcd");
    } else {
      ports.push_back(ntohs(address.sin_port));
    }
    if (fd >= 0) sockets.push_back(fd);
  }
  for (int fd : sockets) close(fd);
  if (!status.ok()) return status;
  return ports;
}

// etcd from $NANOKV_ETCD_BINARY, else the first `etcd` on $PATH.
std::string EtcdBinary() {
  if (const char* chosen = std::getenv("NANOKV_ETCD_BINARY"); chosen != nullptr && *chosen != '\0') return chosen;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path candidate = std::filesystem::path(dirs.substr(start, end - start)) / "etcd";
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "/usr/bin/etcd";
}

std::string Tail(const std::string& text, size_t bytes = 2000) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

}  // namespace

Result<TestCertificates> MakeTestCertificates(const std::string& dir) {
  TestCertificates files{dir + "/ca.pem", dir + "/node.pem", dir + "/node.key"};
  const std::string quiet = " >>" + dir + "/openssl.log 2>&1";
  std::ofstream(dir + "/node.ext") << "subjectAltName=IP:127.0.0.1\n"
                                   << "extendedKeyUsage=serverAuth,clientAuth\n";
  const std::vector<std::string> commands = {
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=nanokv-test-ca -keyout " + dir + "/ca.key -out " +
          files.ca_file,
      "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout " + files.key_file + " -out " + dir +
          "/node.csr",
      "openssl x509 -req -days 2 -in " + dir + "/node.csr -CA " + files.ca_file + " -CAkey " + dir +
          "/ca.key -CAcreateserial -extfile " + dir + "/node.ext -out " + files.cert_file,
  };
  for (const std::string& command : commands) {
    if (std::system((command + quiet).c_str()) != 0) {
      return Status::Internal("'" + command + "' failed (is openssl installed?); see " + dir + "/openssl.log");
    }
  }
  return files;
}

EtcdServer::~EtcdServer() { Kill(); }  // before dir_ goes, with etcd's files

void EtcdServer::Pause() { (void)process_.Pause(); }
void EtcdServer::Resume() { process_.Signal(SIGCONT); }

void EtcdServer::Kill() {
  process_.Signal(SIGKILL);
  if (process_.started()) (void)process_.Wait(std::chrono::seconds(30));
}

Status EtcdServer::Stop() {
  process_.Signal(SIGCONT);  // a paused member would not act on SIGTERM
  process_.Signal(SIGTERM);
  if (!process_.Wait(seconds(30))) {
    Kill();
    return Status::Internal("etcd " + name_ + " did not stop on SIGTERM within 30 s; killed");
  }
  return Status::OK();
}

Status EtcdServer::Launch() {
  const std::string client_url = endpoint_.find("://") == std::string::npos ? "http://" + endpoint_ : endpoint_;
  std::vector<std::string> argv = {
      EtcdBinary(),
      "--name", name_,
      "--data-dir", data_dir_,
      "--listen-client-urls", client_url,
      "--advertise-client-urls", client_url,
      "--listen-peer-urls", peer_url_,
      "--initial-advertise-peer-urls", peer_url_,
      "--initial-cluster", initial_cluster_,
      "--initial-cluster-state", fresh_ ? "new" : "existing",
      "--initial-cluster-token", "nanokv-test",
      "--heartbeat-interval", "50",
      "--election-timeout", "500",
      "--logger", "zap",
      "--log-outputs", "stderr",
      "--log-level", "warn",
  };
  if (tls_) {
    argv.insert(argv.end(), {"--cert-file", tls_->cert_file, "--key-file", tls_->key_file, "--trusted-ca-file",
                             tls_->ca_file, "--client-cert-auth"});
  }
  fresh_ = false;
  process_ = Process::Start(argv, {}, dir_.path() + "/" + name_ + ".log");
  if (!process_.started()) return Status::Internal("cannot start " + argv[0] + " (is etcd-server installed?)");
  return Status::OK();
}

Status EtcdServer::WaitReady() {
  etcd::EtcdOptions options;
  options.endpoints = {endpoint_};
  options.dial_timeout = milliseconds(0);
  if (tls_) {
    options.ca_file = tls_->ca_file;
    options.cert_file = tls_->cert_file;
    options.key_file = tls_->key_file;
  }
  // Only a stuck start meets this: etcd answers within seconds.
  const auto give_up = etcd::DeadlineIn(seconds(60));
  Status last;
  while (etcd::Clock::now() < give_up) {
    if (!process_.Running()) {
      return Status::Unavailable("etcd " + name_ + " exited while starting; its log ends:\n" + Tail(Log()));
    }
    // A fresh client (a fresh connection) each time: a connection made
    // while etcd starts may hang for seconds after it is ready.
    NANOKV_ASSIGN_OR_RETURN(auto client, etcd::EtcdClient::Connect(options));
    Result<std::optional<etcd::KeyValue>> read = client->Get("nanokv-test-ready", etcd::DeadlineIn(milliseconds(300)));
    if (read.ok()) return Status::OK();
    last = read.status();
    // Refused connections fail at once: pace the retries.
    std::this_thread::sleep_for(milliseconds(20));
  }
  return Status::Unavailable("etcd " + name_ + " did not answer within 60 s (" + last.ToString() +
                             "); its log ends:\n" + Tail(Log()));
}

Status EtcdServer::Restart() {
  if (process_.Running()) return Status::FailedPrecondition("etcd " + name_ + " is still running");
  NANOKV_RETURN_IF_ERROR(Launch());
  return WaitReady();
}

Result<std::unique_ptr<EtcdServer>> EtcdServer::Start(const TestCertificates* tls) {
  // A port taken between choosing it and etcd binding it fails the start:
  // then again with other ports.
  Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    Result<std::unique_ptr<EtcdCluster>> cluster = EtcdCluster::Start(1, tls);
    if (cluster.ok()) return std::move((*cluster)->members_[0]);
    last = cluster.status();
  }
  return last;
}

Result<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(int members, const TestCertificates* tls) {
  if (members < 1) return Status::InvalidArgument("an etcd cluster has at least one member");
  NANOKV_ASSIGN_OR_RETURN(std::vector<int> ports, FreePorts(2 * static_cast<size_t>(members)));
  auto cluster = std::make_unique<EtcdCluster>();
  std::string initial_cluster;
  for (int i = 0; i < members; ++i) {
    std::unique_ptr<EtcdServer> member(new EtcdServer());
    member->name_ = "etcd" + std::to_string(i);
    member->data_dir_ = member->dir_.path() + "/data";
    member->endpoint_ = (tls != nullptr ? "https://" : "") + std::string("127.0.0.1:") + std::to_string(ports[2 * i]);
    if (tls != nullptr) member->tls_ = *tls;
    member->peer_url_ = "http://127.0.0.1:" + std::to_string(ports[2 * i + 1]);
    initial_cluster += (i == 0 ? "" : ",") + member->name_ + "=" + member->peer_url_;
    cluster->members_.push_back(std::move(member));
  }
  // All start before any is waited for: a member of several is ready only
  // once a quorum runs.
  for (auto& member : cluster->members_) {
    member->initial_cluster_ = initial_cluster;
    NANOKV_RETURN_IF_ERROR(member->Launch());
  }
  for (auto& member : cluster->members_) NANOKV_RETURN_IF_ERROR(member->WaitReady());
  return cluster;
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> all;
  for (const auto& member : members_) all.push_back(member->endpoint());
  return all;
}

}  // namespace nanokv::testing
