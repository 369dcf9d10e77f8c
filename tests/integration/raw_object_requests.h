// Object requests on a raw connection to kvd, as a hostile peer sends
// them (no libkv in between): the access tests' own client.
#ifndef NANOKV_TESTS_INTEGRATION_RAW_OBJECT_REQUESTS_H_
#define NANOKV_TESTS_INTEGRATION_RAW_OBJECT_REQUESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ipc/uds/channel.h"
#include "ipc/wire/codec.h"
#include "nanokv/status.h"

namespace nanokv::testing {

// One object request on a raw connection, as a hostile peer sends it: the
// reply, its fds appended to *fds.
inline Result<wire::Message> Ask(ipc::Channel& channel, const wire::Message& request, std::vector<int>* fds) {
  NANOKV_RETURN_IF_ERROR(channel.Send(wire::Encode(request)));
  std::vector<std::byte> data;
  NANOKV_ASSIGN_OR_RETURN(ipc::Channel::Received got, channel.Receive(&data, fds));
  if (got != ipc::Channel::Received::kMessage) return Status::Unavailable("kvd closed the connection");
  wire::Message reply;
  NANOKV_RETURN_IF_ERROR(wire::Decode(data, &reply));
  return reply;
}

// A write names the plan it writes (key, epoch, and the write secret a
// plan of the master's carries); a read names none.
inline wire::Message PagesRequest(uint64_t rid, int device, uint32_t page, bool write, const std::string& key = "",
                                  uint32_t epoch = 0, uint64_t secret = 0) {
  wire::Message m;
  m.set_request_id(rid);
  m.mutable_object_pages()->set_device(device);
  m.mutable_object_pages()->add_page_ids(page);
  m.mutable_object_pages()->set_write(write);
  m.mutable_object_pages()->set_plan_key(key);
  m.mutable_object_pages()->set_plan_epoch(epoch);
  m.mutable_object_pages()->set_write_secret(secret);
  return m;
}

inline Status ErrorOf(const wire::Message& reply) {
  return Status(static_cast<Code>(reply.error().code()), reply.error().message());
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_RAW_OBJECT_REQUESTS_H_
