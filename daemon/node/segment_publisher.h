// Turns kvd's NodeState into rows of the /dev/shm segment (ipc/segment).
// kvd is the only writer; every figure kvctl shows comes from here.
#ifndef NANOKV_DAEMON_NODE_SEGMENT_PUBLISHER_H_
#define NANOKV_DAEMON_NODE_SEGMENT_PUBLISHER_H_

#include <memory>
#include <string>
#include <vector>

#include "daemon/node/node_state.h"
#include "ipc/segment/segment_writer.h"

namespace nanokv::kvd {

class SegmentPublisher {
 public:
  // Device names and sizes are read once here; `writer` is owned.
  SegmentPublisher(std::unique_ptr<ipc::SegmentWriter> writer, gpu::Backend& backend,
                   const NodeState& node);

  // Publishes the node's current state (devices and tenants; never the
  // instance rows); logs (never fails kvd) on error.
  void Publish(const NodeState& node);
  // Publishes the controller's instance rows and count, nothing else. Each
  // publish keeps what the other last wrote (SegmentWriter::Publish edits a
  // copy of the previous publish), so the two may run on different threads.
  void PublishInstances(const std::vector<ipc::InstanceRow>& rows);
  // Unlinks the segment (clean shutdown).
  void Remove();

 private:
  struct DeviceLabel {
    std::string name;
    uint64_t bytes = 0;
  };
  std::unique_ptr<ipc::SegmentWriter> writer_;
  std::vector<DeviceLabel> labels_;  // by device index
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_SEGMENT_PUBLISHER_H_
