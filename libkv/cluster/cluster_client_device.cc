// ClusterClient's device bytes (nanokv/cluster_client.h): staged through
// host memory with this process's backend, then the host-bytes path, which
// reaches every node.
#include "libkv/cluster/cluster_client_impl.h"
#include "nanokv/cluster_client.h"

namespace nanokv {

Status ClusterClient::PutFromDevice(std::string_view key, const void* src, uint64_t bytes,
                                    const WriteOptions& options) {
  if (src == nullptr) return Status::InvalidArgument("put from device: null source");
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  std::vector<std::byte> staging;
  try {
    staging.resize(bytes);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("put from device of '" + std::string(key.substr(0, 80)) + "': " +
                               std::to_string(bytes) + " bytes of host staging");
  }
  NANOKV_RETURN_IF_ERROR(backend->Copy(staging.data(), src, bytes, gpu::CopyKind::kDeviceToHost));
  return Put(key, staging, options);
}

Result<uint64_t> ClusterClient::GetToDevice(std::string_view key, void* dst, uint64_t capacity) {
  if (dst == nullptr) return Status::InvalidArgument("get to device: null destination");
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::byte> staging, Get(key));
  if (staging.size() > capacity) {
    return Status::InvalidArgument("get to device of '" + std::string(key.substr(0, 80)) + "': " +
                                   std::to_string(staging.size()) + " bytes for " + std::to_string(capacity) +
                                   " of room");
  }
  NANOKV_RETURN_IF_ERROR(backend->Copy(dst, staging.data(), staging.size(), gpu::CopyKind::kHostToDevice));
  return static_cast<uint64_t>(staging.size());
}

Result<std::string> ClusterClient::DeviceBackendName() {
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  return std::string(backend->name());
}

}  // namespace nanokv
