// What the prefix cache needs of "the store": a batched existence check,
// device puts and gets as one batch each, and views. Two backends serve it,
// the node's ObjectStore and the cluster's ClusterClient, so one PrefixCache
// API runs on either.
#ifndef NANOKV_LIBKV_PREFIX_PREFIX_BACKEND_H_
#define NANOKV_LIBKV_PREFIX_PREFIX_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nanokv/cluster_client.h"
#include "nanokv/object_store.h"
#include "nanokv/status.h"

namespace nanokv {

struct PrefixPut {
  std::string key;
  const void* src = nullptr;
  uint64_t bytes = 0;
};

struct PrefixGet {
  std::string key;
  void* dst = nullptr;
  uint64_t capacity = 0;
};

class PrefixBackend {
 public:
  virtual ~PrefixBackend() = default;
  // The device backend of this process's transfers ("cuda", "hip", "host").
  virtual Result<std::string> DeviceBackendName() = 0;
  // Whether each key is READY, in one batched location call; an error only
  // when the store could not be asked at all.
  virtual Result<std::vector<bool>> Exists(const std::vector<std::string>& keys) = 0;
  virtual std::vector<Status> Put(const std::vector<PrefixPut>& items, void* stream) = 0;
  virtual std::vector<Result<uint64_t>> Get(const std::vector<PrefixGet>& items, void* stream) = 0;
  virtual std::vector<Result<ObjectView>> Views(const std::vector<std::string>& keys) = 0;
};

std::unique_ptr<PrefixBackend> NodePrefixBackend(ObjectStore* store, int preferred_device);
std::unique_ptr<PrefixBackend> ClusterPrefixBackend(ClusterClient* cluster, WriteOptions write);

}  // namespace nanokv

#endif  // NANOKV_LIBKV_PREFIX_PREFIX_BACKEND_H_
