// Argument checks and Status for the launchers of kv_kernels.h; the launches
// themselves are in the .cu files (kv_launch.h). Host C++ only.
#include "kernels/kv_kernels.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/kv_launch.h"

namespace nanokv::kernels {
namespace {

Status FromLaunch(int code, const char* call) {
  if (code == 0) return Status::OK();
  return Status(Code::kInternal, "kernel launch failed", call, detail::ErrorName(code));
}

// A runtime call other than a launch (a fault of an earlier kernel shows here).
Status FromRuntime(int code, const char* call) {
  if (code == 0) return Status::OK();
  return Status(Code::kInternal, "GPU runtime call failed", call, detail::ErrorName(code));
}

bool Aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

Status CheckAppend(const AppendInput& in, const PagedLayout& l, const void* key_cache,
                   const void* value_cache) {
  if (in.num_tokens < 0) return Status::InvalidArgument("paged append: num_tokens < 0");
  if (l.num_blocks <= 0 || l.num_heads <= 0 || l.block_size <= 0 || l.head_dim <= 0) {
    return Status::InvalidArgument(
        "paged append: num_blocks, num_heads, block_size and head_dim must be > 0");
  }
  if (l.block_stride <= 0 || l.head_stride <= 0) {
    return Status::InvalidArgument("paged append: block_stride and head_stride must be > 0");
  }
  const std::int64_t row = l.num_heads * l.head_dim;
  if (in.key_token_stride < row || in.value_token_stride < row) {
    return Status::InvalidArgument("paged append: a token stride is below num_heads * head_dim (" +
                                   std::to_string(row) + ")");
  }
  // One block (16-bit) or 1/8 block (fp8) per token, and grid.x is an unsigned.
  if (in.num_tokens > INT_MAX / 8 || row > INT_MAX / 8) {
    return Status::InvalidArgument("paged append: num_tokens or num_heads * head_dim too large");
  }
  if (in.num_tokens == 0) return Status::OK();
  if (in.key == nullptr || in.value == nullptr || in.slot_mapping == nullptr ||
      key_cache == nullptr || value_cache == nullptr) {
    return Status::InvalidArgument("paged append: a null key, value, slot_mapping or cache pointer");
  }
  if (in.dtype != KvDType::kFloat16 && in.dtype != KvDType::kBFloat16) {
    return Status::InvalidArgument("paged append: dtype is neither fp16 nor bf16");
  }
  return Status::OK();
}

detail::AppendArgs ToArgs(const AppendInput& in, const PagedLayout& l, void* key_cache,
                          void* value_cache) {
  detail::AppendArgs a{};
  a.key = in.key;
  a.value = in.value;
  a.key_token_stride = in.key_token_stride;
  a.value_token_stride = in.value_token_stride;
  a.slot_mapping = in.slot_mapping;
  a.num_tokens = in.num_tokens;
  a.num_blocks = l.num_blocks;
  a.num_heads = l.num_heads;
  a.block_size = l.block_size;
  a.head_dim = l.head_dim;
  a.block_stride = l.block_stride;
  a.head_stride = l.head_stride;
  a.key_cache = key_cache;
  a.value_cache = value_cache;
  a.bf16 = in.dtype == KvDType::kBFloat16 ? 1 : 0;
  return a;
}

Status CheckSegments(const void* contiguous, const Segment* segments, std::size_t n,
                     const char* what) {
  if (n > 0 && segments == nullptr) {
    return Status::InvalidArgument(std::string(what) + ": null segment list");
  }
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (segments[i].bytes == 0) continue;
    if (segments[i].ptr == nullptr) {
      return Status::InvalidArgument(std::string(what) + ": segment " + std::to_string(i) +
                                     " has " + std::to_string(segments[i].bytes) +
                                     " bytes and a null pointer");
    }
    if (segments[i].bytes > UINT64_MAX - total) {
      return Status::InvalidArgument(std::string(what) + ": segment sizes overflow");
    }
    total += segments[i].bytes;
  }
  if (total > 0 && contiguous == nullptr) {
    return Status::InvalidArgument(std::string(what) + ": null buffer for " +
                                   std::to_string(total) + " bytes");
  }
  return Status::OK();
}

// Launches the non-empty segments, kSegmentsPerLaunch at a time.
Status CopySegments(void* contiguous, const Segment* segments, std::size_t n, bool store,
                    void* stream) {
  const char* what = store ? "kv_store_pages" : "kv_load_pages";
  NANOKV_RETURN_IF_ERROR(CheckSegments(contiguous, segments, n, what));
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) total += segments[i].bytes;
  detail::SegmentBatch batch{};
  batch.total_bytes = total;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (segments[i].bytes > 0) {
      batch.ptr[batch.n] = segments[i].ptr;
      batch.bytes[batch.n] = segments[i].bytes;
      batch.offset[batch.n] = offset;
      batch.max_bytes = std::max(batch.max_bytes, segments[i].bytes);
      ++batch.n;
      offset += segments[i].bytes;
    }
    if (batch.n == detail::kSegmentsPerLaunch || (i + 1 == n && batch.n > 0)) {
      NANOKV_RETURN_IF_ERROR(
          FromLaunch(detail::LaunchCopySegments(contiguous, batch, store, stream), what));
      batch.n = 0;
      batch.max_bytes = 0;
    }
  }
  return Status::OK();
}

}  // namespace

Status PagedAppend(const AppendInput& in, const PagedLayout& layout, void* key_cache,
                   void* value_cache, void* stream, AppendDiagnostics diag) {
  NANOKV_RETURN_IF_ERROR(CheckAppend(in, layout, key_cache, value_cache));
  if (in.num_tokens == 0) return Status::OK();
  detail::AppendArgs a = ToArgs(in, layout, key_cache, value_cache);
  a.bad_slots = diag.bad_slots;
  a.vec16 = layout.head_dim % 8 == 0 && in.key_token_stride % 8 == 0 &&
            in.value_token_stride % 8 == 0 && layout.block_stride % 8 == 0 &&
            layout.head_stride % 8 == 0 && Aligned16(in.key) && Aligned16(in.value) &&
            Aligned16(key_cache) && Aligned16(value_cache);
  return FromLaunch(detail::LaunchAppend16(a, stream), "paged_append");
}

Status PagedAppendFp8(const AppendInput& in, const PagedLayout& layout, std::uint8_t* key_cache,
                      std::uint8_t* value_cache, float* key_scale, float* value_scale,
                      void* stream, AppendDiagnostics diag) {
  NANOKV_RETURN_IF_ERROR(CheckAppend(in, layout, key_cache, value_cache));
  if (layout.block_stride % layout.head_dim != 0 || layout.head_stride % layout.head_dim != 0) {
    return Status::InvalidArgument(
        "paged append fp8: block_stride and head_stride must be multiples of head_dim (the "
        "scale arrays use them divided by head_dim)");
  }
  if (in.num_tokens == 0) return Status::OK();
  if (key_scale == nullptr || value_scale == nullptr) {
    return Status::InvalidArgument("paged append fp8: a null scale array");
  }
  detail::AppendArgs a = ToArgs(in, layout, key_cache, value_cache);
  a.key_scale = key_scale;
  a.value_scale = value_scale;
  a.bad_slots = diag.bad_slots;
  return FromLaunch(detail::LaunchAppendFp8(a, stream), "paged_append_fp8");
}

Status StorePages(const void* src, const Segment* segments, std::size_t n_segments, void* stream) {
  return CopySegments(const_cast<void*>(src), segments, n_segments, /*store=*/true, stream);
}

Status LoadPages(void* dst, const Segment* segments, std::size_t n_segments, void* stream) {
  return CopySegments(dst, segments, n_segments, /*store=*/false, stream);
}

Status CopyMany(const Copy* copies, std::size_t n, void* stream) {
  if (n > 0 && copies == nullptr) return Status::InvalidArgument("kv_copy_many: null copies");
  detail::PairBatch batch{};
  auto launch = [&]() -> Status {
    if (batch.n == 0) return Status::OK();
    Status launched = FromLaunch(detail::LaunchCopyPairs(batch, stream), "kv_copy_many");
    batch.n = 0;
    batch.max_bytes = 0;
    return launched;
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (copies[i].bytes == 0) continue;
    if (copies[i].dst == nullptr || copies[i].src == nullptr) {
      return Status::InvalidArgument("kv_copy_many: copy " + std::to_string(i) + " has a null pointer");
    }
    if (batch.n == detail::kPairsPerLaunch) NANOKV_RETURN_IF_ERROR(launch());
    batch.dst[batch.n] = copies[i].dst;
    batch.src[batch.n] = copies[i].src;
    batch.bytes[batch.n] = copies[i].bytes;
    batch.max_bytes = std::max(batch.max_bytes, copies[i].bytes);
    ++batch.n;
  }
  return launch();
}

Status BeginWrite(ObjectHeader* header, const ObjectHeader& writing, std::uint32_t* result, void* stream) {
  if (header == nullptr) return Status::InvalidArgument("kv_begin_write: null header");
  if (writing.epoch == 0) return Status::InvalidArgument("kv_begin_write: epoch 0 names no object");
  return FromLaunch(detail::LaunchBeginWrite(header, writing, result, stream), "kv_begin_write");
}

Status CommitReady(ObjectHeader* header, std::uint32_t epoch, std::uint32_t* result, void* stream) {
  if (header == nullptr) return Status::InvalidArgument("kv_commit_ready: null header");
  return FromLaunch(detail::LaunchCommitReady(header, epoch, result, stream), "kv_commit_ready");
}

Status StorePagesAndCommit(const void* src, const Segment* segments, std::size_t n_segments,
                           ObjectHeader* header, std::uint32_t epoch, std::uint32_t* result,
                           void* stream) {
  if (header == nullptr) return Status::InvalidArgument("kv_commit_ready: null header");
  NANOKV_RETURN_IF_ERROR(StorePages(src, segments, n_segments, stream));
  return CommitReady(header, epoch, result, stream);
}

namespace {

Status PutObjectStamped(const void* src, const Segment* segments, std::size_t n_segments, ObjectHeader* header,
                        const ObjectHeader& writing, std::uint32_t* result, std::uint64_t* stamp,
                        std::uint64_t stamp_value, void* stream) {
  if (header == nullptr) return Status::InvalidArgument("kv_put_object: null header");
  if (writing.epoch == 0) return Status::InvalidArgument("kv_put_object: epoch 0 names no object");
  NANOKV_RETURN_IF_ERROR(CheckSegments(src, segments, n_segments, "kv_put_object"));
  detail::SegmentBatch batch{};
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < n_segments; ++i) {
    if (segments[i].bytes == 0) continue;
    if (batch.n == detail::kSegmentsPerLaunch) {  // over one launch's parameters: three launches
      if (stamp != nullptr) {
        return Status::InvalidArgument("kv_put_object: an announced put is one launch, at most " +
                                       std::to_string(detail::kSegmentsPerLaunch) + " segments");
      }
      NANOKV_RETURN_IF_ERROR(BeginWrite(header, writing, result, stream));
      return StorePagesAndCommit(src, segments, n_segments, header, writing.epoch, result, stream);
    }
    batch.ptr[batch.n] = segments[i].ptr;
    batch.bytes[batch.n] = segments[i].bytes;
    batch.offset[batch.n] = offset;
    batch.max_bytes = std::max(batch.max_bytes, segments[i].bytes);
    offset += segments[i].bytes;
    ++batch.n;
  }
  batch.total_bytes = offset;
  return FromLaunch(detail::LaunchPutObject(src, batch, header, writing, result, stamp, stamp_value, stream),
                    "kv_put_object");
}

}  // namespace

Status PutObject(const void* src, const Segment* segments, std::size_t n_segments, ObjectHeader* header,
                 const ObjectHeader& writing, std::uint32_t* result, void* stream) {
  return PutObjectStamped(src, segments, n_segments, header, writing, result, nullptr, 0, stream);
}

Status PutObjectAnnounced(const void* src, const Segment* segments, std::size_t n_segments, ObjectHeader* header,
                          const ObjectHeader& writing, std::uint64_t* stamp, std::uint64_t stamp_value, void* stream) {
  if (stamp == nullptr) return Status::InvalidArgument("kv_put_object: an announced put without its record's stamp");
  return PutObjectStamped(src, segments, n_segments, header, writing, nullptr, stamp, stamp_value, stream);
}

Status PutObjectsAnnounced(const AnnouncedPut* items, std::size_t n, void* stream) {
  for (std::size_t first = 0; first < n; first += detail::kAnnouncedPutsPerLaunch) {
    detail::AnnouncedPutBatch batch{};
    std::uint64_t max_bytes = 0;
    for (std::size_t i = first; i < n && batch.n < detail::kAnnouncedPutsPerLaunch; ++i) {
      const AnnouncedPut& p = items[i];
      if (p.src == nullptr || p.dst == nullptr || p.header == nullptr || p.stamp == nullptr || p.bytes == 0 ||
          p.writing.epoch == 0) {
        return Status::InvalidArgument("kv_put_objects_announced: item " + std::to_string(i) +
                                       " lacks a source, destination, header, stamp, bytes or epoch");
      }
      if (batch.page_bytes != 0 && batch.page_bytes != p.writing.page_bytes) {
        return Status::InvalidArgument("kv_put_objects_announced: items of another page size in one batch");
      }
      batch.page_bytes = p.writing.page_bytes;
      batch.items[batch.n++] = {
          static_cast<const char*>(p.src), static_cast<char*>(p.dst), p.bytes,           p.header, p.writing.key_hash,
          p.writing.payload_base,          p.writing.epoch,           p.writing.n_pages, p.stamp,  p.stamp_value};
      max_bytes = std::max(max_bytes, p.bytes);
    }
    NANOKV_RETURN_IF_ERROR(
        FromLaunch(detail::LaunchPutObjectsAnnounced(batch, max_bytes, stream), "kv_put_objects_announced"));
  }
  return Status::OK();
}

Result<void*> RegisterHostMapped(void* host, std::size_t bytes) {
  if (host == nullptr || bytes == 0) return Status::InvalidArgument("cudaHostRegister: no memory");
  void* device = nullptr;
  NANOKV_RETURN_IF_ERROR(FromRuntime(detail::RegisterHostMapped(host, bytes, &device), "cudaHostRegister"));
  return device;
}

void UnregisterHost(void* host) { (void)detail::UnregisterHost(host); }

Status ReadState(const ObjectHeader* header, std::uint32_t* state_out, void* stream) {
  if (header == nullptr || state_out == nullptr) {
    return Status::InvalidArgument("kv_read_state: null header or output");
  }
  return FromLaunch(detail::LaunchReadState(header, state_out, stream), "kv_read_state");
}

Status Synchronize(void* stream) {
  return FromRuntime(detail::StreamSynchronize(stream), "cudaStreamSynchronize");
}

Result<void*> RecordEvent(void* stream) {
  void* event = nullptr;
  NANOKV_RETURN_IF_ERROR(FromRuntime(detail::RecordEvent(stream, &event), "cudaEventRecord"));
  return event;
}

Status WaitEvent(void* event) {
  if (event == nullptr) return Status::InvalidArgument("cudaEventSynchronize: no event");
  return FromRuntime(detail::EventSynchronize(event), "cudaEventSynchronize");
}

void DestroyEvent(void* event) {
  if (event != nullptr) (void)detail::DestroyEvent(event);
}

static_assert(kMaxFanStreams == detail::kMaxFanStreams);

Status ForkStreams(void* stream, int ways, void** forked) {
  if (stream == nullptr || forked == nullptr || ways < 1 || ways > kMaxFanStreams) {
    return Status::InvalidArgument("fork streams: a stream, and 1-" + std::to_string(kMaxFanStreams) + " ways");
  }
  return FromRuntime(detail::ForkStreams(stream, ways, forked), "fork streams (cudaStreamWaitEvent)");
}

Status JoinStreams(void* stream, void* const* forked, int ways) {
  if (stream == nullptr || forked == nullptr || ways < 1 || ways > kMaxFanStreams) {
    return Status::InvalidArgument("join streams: a stream, and 1-" + std::to_string(kMaxFanStreams) + " ways");
  }
  return FromRuntime(detail::JoinStreams(stream, forked, ways), "join streams (cudaStreamWaitEvent)");
}

Result<int> CurrentDevice() {
  int device = -1;
  NANOKV_RETURN_IF_ERROR(FromRuntime(detail::GetDevice(&device), "cudaGetDevice"));
  return device;
}

Result<int> StreamDevice(void* stream) {
  if (stream == nullptr) return CurrentDevice();
  int device = -1;
  NANOKV_RETURN_IF_ERROR(FromRuntime(detail::StreamDevice(stream, &device), "cudaStreamGetDevice"));
  return device;
}

Status SetCurrentDevice(int device) {
  return FromRuntime(detail::SetDevice(device), "cudaSetDevice");
}

Result<int> PointerDevice(const void* pointer) {
  int device = -1;
  NANOKV_RETURN_IF_ERROR(FromRuntime(detail::PointerDevice(pointer, &device), "cudaPointerGetAttributes"));
  return device;
}

MappedAccess MappedAccessOf(const void* pointer, int device) {
  int access = -1;
  (void)detail::MappedAccess(pointer, device, &access);
  switch (access) {
    case 3: return MappedAccess::kReadWrite;
    case 1: return MappedAccess::kRead;
    case 0: return MappedAccess::kNone;
    default: return MappedAccess::kNotVmm;
  }
}

Status EnablePeerAccess(int peer) {
  return FromRuntime(detail::EnablePeerAccess(peer), "cudaDeviceEnablePeerAccess");
}

Result<bool> KernelsFit(int device) {
  NANOKV_ASSIGN_OR_RETURN(int current, CurrentDevice());
  if (device != current) NANOKV_RETURN_IF_ERROR(SetCurrentDevice(device));
  int fits = 0;
  Status asked = FromRuntime(detail::KernelImageFits(&fits), "cudaFuncGetAttributes");
  if (device != current) {
    Status restored = SetCurrentDevice(current);
    if (asked.ok() && !restored.ok()) return restored;
  }
  if (!asked.ok()) return asked;
  return fits != 0;
}

}  // namespace nanokv::kernels
