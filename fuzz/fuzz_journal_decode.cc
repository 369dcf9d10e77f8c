// libFuzzer target: bytes -> kvd::PageJournal::Decode, the only way a page
// journal's bytes reach kvd (daemon/node/page_journal.h). Any input must give
// a Recovery or an error Status; ASan catches a read past the bytes (the
// an index-65534 row once did that), and a Recovery it accepts must hold
// only what kvd can index by: device ordinals in range and distinct, page ids
// below their device's count, and a valid group name on every page.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <span>

#include "daemon/node/page_journal.h"
#include "ipc/segment/layout.h"
#include "ipc/wire/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto recovery = nanokv::kvd::PageJournal::Decode(bytes);
  if (!recovery.ok()) return 0;
  std::set<int> ordinals;
  for (const auto& device : recovery->devices) {
    bool fine = device.device >= 0 && static_cast<uint32_t>(device.device) < nanokv::ipc::kMaxDevices &&
                ordinals.insert(device.device).second;
    for (const auto& page : device.pages) {
      fine = fine && page.id < device.capacity_pages && nanokv::wire::ValidName(page.group);
    }
    if (!fine) {
      std::fprintf(stderr, "fuzz_journal_decode: Decode accepted a journal kvd cannot index by\n");
      std::abort();
    }
  }
  return 0;
}
