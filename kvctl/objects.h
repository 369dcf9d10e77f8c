// kvctl objects and kvctl evict --objects: the object store of one kvd, asked
// over kvd's socket (docs/ARCHITECTURE.md says why not the segment).
#ifndef NANOKV_KVCTL_OBJECTS_H_
#define NANOKV_KVCTL_OBJECTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvctl/commands.h"
#include "nanokv/object_store.h"

namespace nanokv::kvctl {

// A row per object: key, size, state, device, age, idle, lease, pin; then
// a summary line of the store (each device's used and free bytes, objects,
// evictions), "store" in JSON.
std::string ObjectsView(const std::vector<ObjectEntry>& objects, const ObjectStoreInfo& store, bool json);
Result<Report> RunObjects(const std::string& ipc_name, bool json);
// Evicts READY objects of `device` (-1: all) until `bytes` are freed (0: down
// to the store's low watermark).
Result<Report> RunObjectEvict(const std::string& ipc_name, int device, uint64_t bytes, bool json);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_OBJECTS_H_
