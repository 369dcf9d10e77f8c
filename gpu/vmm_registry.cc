#include "gpu/vmm_registry.h"

#include <spdlog/fmt/fmt.h>

namespace nanokv::gpu {
namespace {

// The entry of `map` (base -> {size, ...}) whose [base, base+size) holds
// `address`, or end(). Entries do not overlap (invariants 1 and 2), so only
// the last one starting at or before `address` can.
template <typename Map>
typename Map::const_iterator EntryContaining(const Map& map, uintptr_t address) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  --it;
  return address < it->first + it->second.size ? it : map.end();
}

// address + size, or false when the sum wraps: a span a caller formed from
// a pointer and a length it was given (SIZE_MAX from the C ABI) must not
// wrap into one that passes every check.
bool SpanEnd(uintptr_t address, size_t size, uintptr_t* end) {
  return !__builtin_add_overflow(address, size, end);
}

Status WrapsAround(const char* call, uintptr_t address, size_t size) {
  return Status::InvalidArgument(
      fmt::format("{}: {}+{} runs past the end of the address space", call, Hex(address), size));
}

}  // namespace

Status CheckMultipleOfGranularity(const char* call, size_t size, size_t granularity) {
  if (size == 0 || size % granularity != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: size {} is not a non-zero multiple of the granularity {}", call, size, granularity));
  }
  return Status::OK();
}

Status CheckAlignedToGranularity(const char* call, uintptr_t address, size_t size,
                                 size_t granularity) {
  NANOKV_RETURN_IF_ERROR(CheckMultipleOfGranularity(call, size, granularity));
  if (address == 0 || address % granularity != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: address {} is not aligned to the granularity {}", call, Hex(address), granularity));
  }
  return Status::OK();
}

Status CheckReserveAlignment(size_t alignment) {
  if ((alignment & (alignment - 1)) != 0) {
    return Status::InvalidArgument(
        fmt::format("ReserveRange: alignment {} is not a power of two", alignment));
  }
  return Status::OK();
}

std::string Hex(uintptr_t value) { return fmt::format("{:#x}", value); }

bool VmmRegistry::AddPageReference(uint64_t page, int device, size_t size) {
  auto [it, added] = pages_.try_emplace(page, Page{device, size, 0});
  if (!added && it->second.size != size) return false;
  ++it->second.references;
  return true;
}

Result<const VmmRegistry::Page*> VmmRegistry::FindPage(PageHandle page, const char* call) const {
  auto it = pages_.find(page.value);
  if (it == pages_.end()) {
    return Status::NotFound(fmt::format("{}: no page handle {:#x}", call, page.value));
  }
  return &it->second;
}

Result<int> VmmRegistry::DropPageReference(PageHandle page, const char* call) {
  NANOKV_ASSIGN_OR_RETURN(const Page* found, FindPage(page, call));
  int device = found->device;
  if (--pages_[page.value].references == 0) pages_.erase(page.value);
  return device;
}

void VmmRegistry::AddRange(uintptr_t base, Range range) { ranges_[base] = range; }

Result<VmmRegistry::Range> VmmRegistry::TakeRange(uintptr_t base, size_t size) {
  auto it = ranges_.find(base);
  if (it == ranges_.end() || it->second.size != size) {
    return Status::InvalidArgument(
        fmt::format("FreeRange: {}+{} is not a whole reservation", Hex(base), size));
  }
  auto mapped = mappings_.lower_bound(base);
  if (mapped != mappings_.end() && mapped->first < base + size) {  // a whole range: no wrap
    return Status::FailedPrecondition(fmt::format("FreeRange: {} still has a mapping at {}",
                                                  Hex(base), Hex(mapped->first)));
  }
  Range range = it->second;
  ranges_.erase(it);
  return range;
}

bool VmmRegistry::InsideRange(uintptr_t address, size_t size) const {
  auto it = EntryContaining(ranges_, address);
  uintptr_t end = 0;
  return it != ranges_.end() && SpanEnd(address, size, &end) &&
         end <= it->first + it->second.size;
}

bool VmmRegistry::OverlapsMapping(uintptr_t address, size_t size) const {
  uintptr_t end = 0;
  if (!SpanEnd(address, size, &end)) return true;  // callers checked InsideRange first
  auto it = mappings_.lower_bound(address);
  if (it != mappings_.end() && it->first < end) return true;
  if (it == mappings_.begin()) return false;
  --it;
  return it->first + it->second.size > address;
}

Status VmmRegistry::ClaimMapping(const MapRequest& request) {
  const uintptr_t address = request.address;
  const size_t size = request.size;
  if (size != request.page_bytes) {
    return Status::InvalidArgument(
        fmt::format("Map: size {} is not the page's size {} (a page is mapped whole)", size,
                    request.page_bytes));
  }
  NANOKV_RETURN_IF_ERROR(CheckAlignedToGranularity("Map", address, size, request.granularity));
  if (!InsideRange(address, size)) {
    return Status::InvalidArgument(
        fmt::format("Map: {}+{} is not inside a reserved range", Hex(address), size));
  }
  if (OverlapsMapping(address, size)) {
    return Status::FailedPrecondition(fmt::format("Map: {} is already mapped", Hex(address)));
  }
  mappings_[address] = Mapping{size, request.page, request.device, 0};
  return Status::OK();
}

void VmmRegistry::DropMapping(uintptr_t address) { mappings_.erase(address); }

const VmmRegistry::Mapping* VmmRegistry::FindMapping(uintptr_t address) const {
  auto it = EntryContaining(mappings_, address);
  return it != mappings_.end() ? &it->second : nullptr;
}

Result<std::vector<const VmmRegistry::Mapping*>> VmmRegistry::WholeMappings(
    const char* call, uintptr_t address, size_t size) const {
  // The driver wants the span aligned to the granularity it was reserved
  // with; outside every range any alignment passes and "not mapped" speaks.
  auto range = EntryContaining(ranges_, address);
  size_t granularity = range != ranges_.end() ? range->second.granularity : 1;
  NANOKV_RETURN_IF_ERROR(CheckAlignedToGranularity(call, address, size, granularity));
  uintptr_t end = 0;
  if (!SpanEnd(address, size, &end)) return WrapsAround(call, address, size);
  auto it = EntryContaining(mappings_, address);
  if (it == mappings_.end()) {
    return Status::InvalidArgument(fmt::format("{}: {} is not mapped", call, Hex(address)));
  }
  if (it->first != address) {
    return Status::InvalidArgument(fmt::format(
        "{}: {} is inside a mapping (it takes whole mappings)", call, Hex(address)));
  }
  std::vector<const Mapping*> run;
  uintptr_t cursor = address;
  while (cursor < end) {
    if (it == mappings_.end() || it->first != cursor) {
      return Status::InvalidArgument(
          fmt::format("{}: {} is not mapped (the run has a hole)", call, Hex(cursor)));
    }
    run.push_back(&it->second);
    cursor += it->second.size;
    ++it;
  }
  if (cursor != end) {
    return Status::InvalidArgument(fmt::format(
        "{}: {}+{} ends inside a mapping (it takes whole mappings)", call, Hex(address), size));
  }
  return run;
}

void VmmRegistry::SetAccess(uintptr_t address, size_t size, uint64_t access, bool read_only) {
  uintptr_t end = 0;
  if (!SpanEnd(address, size, &end)) return;  // WholeMappings refused it
  for (auto it = mappings_.lower_bound(address); it != mappings_.end() && it->first < end; ++it) {
    it->second.access = access;
    it->second.read_only = access != 0 && read_only;
  }
}

Result<VmmRegistry::TakenMappings> VmmRegistry::TakeMappings(const char* call, uintptr_t address,
                                                             size_t size) {
  NANOKV_ASSIGN_OR_RETURN(auto run, WholeMappings(call, address, size));
  (void)run;
  auto first = mappings_.lower_bound(address);
  auto last = mappings_.lower_bound(address + size);  // WholeMappings checked the sum
  TakenMappings taken(first, last);
  mappings_.erase(first, last);
  return taken;
}

void VmmRegistry::RestoreMappings(const TakenMappings& taken) {
  mappings_.insert(taken.begin(), taken.end());
}

Result<VmmRegistry::Span> VmmRegistry::CheckSpan(const char* call, const void* pointer, size_t bytes, bool write,
                                                 int runner) const {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uintptr_t end = 0;
  if (!SpanEnd(address, bytes, &end)) return WrapsAround(call, address, bytes);
  auto range = EntryContaining(ranges_, address);
  if (range == ranges_.end()) {
    // A span that starts outside every range but runs into one would touch
    // our memory unchecked.
    auto next = ranges_.upper_bound(address);
    if (next != ranges_.end() && next->first < end) {
      return Status::InvalidArgument(fmt::format("{}: {}+{} runs into the range at {}", call,
                                                 Hex(address), bytes, Hex(next->first)));
    }
    return Span{};
  }
  if (end > range->first + range->second.size) {
    return Status::InvalidArgument(
        fmt::format("{}: {}+{} runs past its range", call, Hex(address), bytes));
  }
  Span span{true, -1, ~uint64_t{0}};
  for (uintptr_t cursor = address; cursor < end;) {
    auto it = EntryContaining(mappings_, cursor);
    if (it == mappings_.end()) {
      return Status::InvalidArgument(fmt::format("{}: {} is not mapped", call, Hex(cursor)));
    }
    if (it->second.access == 0) {
      return Status::PermissionDenied(fmt::format(
          "{}: {} is mapped without access (SetAccess after Map)", call, Hex(cursor)));
    }
    if (write && it->second.read_only) {
      return Status::PermissionDenied(fmt::format(
          "{}: {} is mapped read-only (a write there would fault)", call, Hex(cursor)));
    }
    if (span.device < 0) span.device = it->second.device;
    span.access &= it->second.access;
    cursor = it->first + it->second.size;
  }
  if (runner >= 0 && (runner >= kMaxDevices || (span.access & (uint64_t{1} << runner)) == 0)) {
    return Status::PermissionDenied(
        fmt::format("{}: device {} runs the copy but has no access to {}+{}", call, runner, Hex(address), bytes));
  }
  return span;
}

Result<int> VmmRegistry::CopyDevice(const char* call, const void* dst, const void* src,
                                    size_t bytes, CopyKind kind, int device_count) const {
  Span to;
  Span from;
  if (kind != CopyKind::kDeviceToHost) {
    NANOKV_ASSIGN_OR_RETURN(to, CheckSpan(call, dst, bytes, /*write=*/true));
  }
  if (kind != CopyKind::kHostToDevice) {
    NANOKV_ASSIGN_OR_RETURN(from, CheckSpan(call, src, bytes));
  }
  if (!to.ours && !from.ours) return -1;
  uint64_t access = ~uint64_t{0};
  if (to.ours) access &= to.access;
  if (from.ours) access &= from.access;
  if (access == 0) {
    return Status::PermissionDenied(
        fmt::format("{}: no device has access to both ends of the copy", call));
  }
  // The device holding the memory first: the copy then stays off peer links.
  for (const Span* span : {&to, &from}) {
    if (span->ours && (access & (uint64_t{1} << span->device)) != 0) return span->device;
  }
  for (int device = 0; device < device_count; ++device) {
    if ((access & (uint64_t{1} << device)) != 0) return device;
  }
  return Status::PermissionDenied(
      fmt::format("{}: no visible device has access to the memory", call));
}

Status VmmRegistry::CheckInvariants() const {
  auto broken = [](std::string what) { return Status::Internal("VmmRegistry: " + what); };
  uintptr_t previous_end = 0;
  for (const auto& [base, range] : ranges_) {
    if (range.size == 0 || range.granularity == 0) {
      return broken(fmt::format("range {} has size {} granularity {} (invariant 1)", Hex(base),
                                range.size, range.granularity));
    }
    if (base < previous_end) {
      return broken(fmt::format("range {} overlaps the one before (invariant 1)", Hex(base)));
    }
    previous_end = base + range.size;
  }
  previous_end = 0;
  for (const auto& [address, mapping] : mappings_) {
    if (mapping.size == 0 || mapping.page == 0) {
      return broken(fmt::format("mapping {} has size {} page {:#x} (invariant 2)", Hex(address),
                                mapping.size, mapping.page));
    }
    if (!InsideRange(address, mapping.size)) {
      return broken(fmt::format("mapping {}+{} is not inside one range (invariant 2)",
                                Hex(address), mapping.size));
    }
    if (address < previous_end) {
      return broken(fmt::format("mapping {} overlaps the one before (invariant 2)", Hex(address)));
    }
    previous_end = address + mapping.size;
    if (mapping.device < 0 || mapping.device >= kMaxDevices) {
      return broken(fmt::format("mapping {} is on device {} (invariant 4)", Hex(address),
                                mapping.device));
    }
  }
  for (const auto& [handle, page] : pages_) {
    if (page.references < 1 || page.size == 0) {
      return broken(fmt::format("page {:#x} has {} references, size {} (invariant 3)", handle,
                                page.references, page.size));
    }
  }
  return Status::OK();
}

}  // namespace nanokv::gpu
