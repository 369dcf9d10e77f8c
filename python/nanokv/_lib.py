"""Loads libnanokv.so and declares the C ABI (libkv/include/nanokv/nanokv.h)
for ctypes. Searched, in order:
  1. $NANOKV_LIBRARY (a file path),
  2. next to this package (python/nanokv/libnanokv.so, for a copied install),
  3. the build directories of a source checkout: <repo>/build*/libkv/capi/,
  4. the system's loader path (ctypes.util.find_library("nanokv")).
"""
import ctypes
import ctypes.util
import glob
import operator
import os

from nanokv.errors import INVALID_ARGUMENT, LibraryNotFoundError, NanoKVError

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))

c_int_p = ctypes.POINTER(ctypes.c_int)
c_u32_p = ctypes.POINTER(ctypes.c_uint32)
c_u64_p = ctypes.POINTER(ctypes.c_uint64)
c_i64_p = ctypes.POINTER(ctypes.c_int64)
c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)


class Options(ctypes.Structure):
    _fields_ = [
        ("ipc_name", ctypes.c_char_p),
        ("tenant", ctypes.c_char_p),
        ("group", ctypes.c_char_p),
        ("limit_bytes", ctypes.c_uint64),
        ("limit_fraction", ctypes.c_double),
        ("expect_page_bytes", ctypes.c_uint64),
        ("devices", c_int_p),
        ("device_count", ctypes.c_size_t),
        ("request_timeout_ms", ctypes.c_uint32),
    ]


class Device(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("page_bytes", ctypes.c_uint64),
                ("capacity_pages", ctypes.c_uint32)]


class CacheConfig(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_int),
        ("layers", ctypes.c_uint32),
        ("kv_heads", ctypes.c_uint32),
        ("head_dim", ctypes.c_uint32),
        ("block_size", ctypes.c_uint32),
        ("dtype", ctypes.c_uint32),
        ("layout", ctypes.c_uint32),
        ("num_blocks", ctypes.c_uint64),
        ("max_bytes", ctypes.c_uint64),
        ("keep_free_groups", ctypes.c_uint64),
        ("reserve_low_blocks", ctypes.c_uint64),
        ("reserve_high_blocks", ctypes.c_uint64),
    ]


class CacheView(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_uint32),
        ("layout", ctypes.c_uint32),
        ("element_bytes", ctypes.c_uint64),
        ("shape", ctypes.c_int64 * 4),
        ("strides", ctypes.c_int64 * 4),
        ("block_stride", ctypes.c_int64),
        ("head_stride", ctypes.c_int64),
        ("slot_stride", ctypes.c_int64),
        ("block_size", ctypes.c_uint32),
    ]


class CacheStats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("total_blocks", "used_blocks", "free_blocks", "largest_free_run")] + \
               [("fragmentation", ctypes.c_double)] + \
               [(name, ctypes.c_uint64) for name in
                ("sequences", "used_tokens", "block_bytes", "page_bytes", "page_groups",
                 "mapped_groups", "kept_free_groups", "mapped_pages", "groups_mapped",
                 "groups_returned", "map_failures", "reserve_blocks", "reserve_hits",
                 "reserve_refills", "reserve_refill_failures")]


class PagedLayout(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in
                ("num_blocks", "num_heads", "block_size", "head_dim", "block_stride",
                 "head_stride")]


class AppendInput(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_void_p),
        ("value", ctypes.c_void_p),
        ("key_token_stride", ctypes.c_int64),
        ("value_token_stride", ctypes.c_int64),
        ("slot_mapping", ctypes.c_void_p),
        ("num_tokens", ctypes.c_int64),
        ("dtype", ctypes.c_uint32),
    ]


class ClusterOptions(ctypes.Structure):
    _fields_ = [
        ("masters", ctypes.POINTER(ctypes.c_char_p)),
        ("master_count", ctypes.c_size_t),
        ("token_file", ctypes.c_char_p),
        ("tls_ca", ctypes.c_char_p),
        ("tls_cert", ctypes.c_char_p),
        ("tls_key", ctypes.c_char_p),
        ("node_id", ctypes.c_char_p),
        ("ipc_name", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("request_timeout_ms", ctypes.c_uint32),
        ("host_id", ctypes.c_char_p),
        ("access_devices", c_int_p),
        ("access_device_count", ctypes.c_size_t),
    ]


class WriteOptions(ctypes.Structure):
    _fields_ = [("preferred_segment", ctypes.c_char_p), ("replica_num", ctypes.c_uint32)]


class Replica(ctypes.Structure):
    _fields_ = [
        ("node_id", ctypes.c_char * 64),
        ("data_address", ctypes.c_char * 256),
        ("device_uuid", ctypes.c_char * 65),
        ("device", ctypes.c_int),
        ("epoch", ctypes.c_uint32),
        ("local", ctypes.c_int),
        ("same_host", ctypes.c_int),
    ]


class ObjectsOptions(ctypes.Structure):
    _fields_ = [
        ("ipc_name", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("request_timeout_ms", ctypes.c_uint32),
        ("spin_us", ctypes.c_uint32),
        ("defer_lease_release", ctypes.c_int),
        ("ring", ctypes.c_int),
        ("access_devices", c_int_p),
        ("access_device_count", ctypes.c_size_t),
    ]


class ObjectPlanInfo(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("epoch", ctypes.c_uint32), ("bytes_total", ctypes.c_uint64),
                ("state", ctypes.c_uint32), ("tier", ctypes.c_uint32)]


class SlabInfo(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("device", ctypes.c_int), ("local_device", ctypes.c_int),
                ("payload_bytes", ctypes.c_uint64), ("header_slots", ctypes.c_uint32),
                ("ring_records", ctypes.c_uint32), ("first_epoch", ctypes.c_uint32), ("page_bytes", ctypes.c_uint32),
                ("store_offset", ctypes.c_uint64), ("ttl_ms", ctypes.c_uint64), ("payload", ctypes.c_void_p),
                ("headers", ctypes.c_void_p), ("cursor", ctypes.c_void_p), ("ring", ctypes.c_void_p)]


class PrefixOptions(ctypes.Structure):
    _fields_ = [
        ("model", ctypes.c_char_p),
        ("dtype", ctypes.c_char_p),
        ("layout", ctypes.c_char_p),
        ("salt", ctypes.c_char_p),
        ("chunk_tokens", ctypes.c_uint32),
        ("layers", ctypes.c_uint32),
        ("planes_per_layer", ctypes.c_uint32),
        ("token_bytes", ctypes.c_uint64),
        ("preferred_device", ctypes.c_int),
        ("preferred_segment", ctypes.c_char_p),
        ("replica_num", ctypes.c_uint32),
        ("staging_bytes", ctypes.c_uint64),
    ]


class PrefixPlane(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("capacity_tokens", ctypes.c_uint64)]


P = ctypes.c_void_p  # every handle is opaque
c_char_p_p = ctypes.POINTER(ctypes.c_char_p)
_WRITE = ctypes.POINTER(WriteOptions)
_REPLICA = ctypes.POINTER(Replica)
_PROTOTYPES = {
    "nanokv_options_init": [ctypes.POINTER(Options)],
    "nanokv_attach": [ctypes.POINTER(Options), ctypes.POINTER(P)],
    "nanokv_attach_from_env": [ctypes.POINTER(P)],
    "nanokv_detach": [P],
    "nanokv_client_tenant_id": [P, c_u32_p],
    "nanokv_client_tenant": [P, c_char_pp],
    "nanokv_client_backend": [P, c_char_pp],
    "nanokv_client_page_bytes": [P, c_u64_p],
    "nanokv_client_limit_bytes": [P, c_u64_p],
    "nanokv_client_connected": [P, c_int_p],
    "nanokv_client_device_count": [P, c_size_p],
    "nanokv_client_device": [P, ctypes.c_size_t, ctypes.POINTER(Device)],
    "nanokv_grant": [P, ctypes.c_int, ctypes.c_uint32, c_u32_p, c_u32_p],
    "nanokv_share": [P, ctypes.c_int, c_u32_p, ctypes.c_size_t, c_u32_p],
    "nanokv_return": [P, ctypes.c_int, c_u32_p, ctypes.c_size_t],
    "nanokv_set_limit": [P, ctypes.c_uint64, c_u64_p],
    "nanokv_pending_reclaim_pages": [P, c_u32_p],
    "nanokv_copy_to_device": [P, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t],
    "nanokv_copy_to_host": [P, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t],
    "nanokv_fill_device": [P, ctypes.c_void_p, ctypes.c_uint8, ctypes.c_size_t],
    "nanokv_tensor_create": [P, ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(P)],
    "nanokv_tensor_destroy": [P],
    "nanokv_tensor_map": [P, ctypes.c_uint64, ctypes.c_uint64],
    "nanokv_tensor_map_shared": [P, ctypes.c_uint64, ctypes.c_int, c_u32_p, ctypes.c_size_t],
    "nanokv_tensor_unmap": [P, ctypes.c_uint64, ctypes.c_uint64],
    "nanokv_tensor_grow": [P, ctypes.c_uint64],
    "nanokv_tensor_shrink": [P, ctypes.c_uint64],
    "nanokv_tensor_data": [P, ctypes.POINTER(ctypes.c_void_p)],
    "nanokv_tensor_device": [P, c_int_p],
    "nanokv_tensor_page_bytes": [P, c_u64_p],
    "nanokv_tensor_page_count": [P, c_u64_p],
    "nanokv_tensor_mapped_pages": [P, c_u64_p],
    "nanokv_tensor_mapped_prefix": [P, c_u64_p],
    "nanokv_tensor_page_ids": [P, ctypes.c_uint64, ctypes.c_uint64, c_i64_p],
    "nanokv_cache_config_init": [ctypes.POINTER(CacheConfig)],
    "nanokv_cache_create": [P, ctypes.POINTER(CacheConfig), ctypes.POINTER(P)],
    "nanokv_cache_destroy": [P],
    "nanokv_cache_allocate_for": [P, ctypes.c_uint64, ctypes.c_uint64],
    "nanokv_cache_append_token": [P, ctypes.c_uint64, c_i64_p],
    "nanokv_cache_append_tokens": [P, ctypes.c_uint64, ctypes.c_uint64],
    "nanokv_cache_free_for": [P, ctypes.c_uint64],
    "nanokv_cache_used_tokens": [P, ctypes.c_uint64, c_u64_p],
    "nanokv_cache_block_table": [P, ctypes.c_uint64, c_u32_p, ctypes.c_size_t, c_size_p],
    "nanokv_cache_slot_of": [P, ctypes.c_uint64, ctypes.c_uint64, c_i64_p],
    "nanokv_cache_k_view": [P, ctypes.c_uint32, ctypes.POINTER(CacheView)],
    "nanokv_cache_v_view": [P, ctypes.c_uint32, ctypes.POINTER(CacheView)],
    "nanokv_cache_release_free_pages": [P, ctypes.c_uint64, c_u64_p],
    "nanokv_cache_release_pending_reclaim": [P, c_u64_p],
    "nanokv_cache_num_blocks": [P, c_u64_p],
    "nanokv_cache_layer_stride_elements": [P, c_i64_p],
    "nanokv_cache_get_stats": [P, ctypes.POINTER(CacheStats)],
    "nanokv_cache_dump": [P, c_char_pp],
    "nanokv_cluster_connect": [ctypes.POINTER(ClusterOptions), ctypes.POINTER(P)],
    "nanokv_cluster_close": [P],
    "nanokv_cluster_put": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, _WRITE],
    "nanokv_cluster_get": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, c_u64_p],
    "nanokv_cluster_put_from_device": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, _WRITE],
    "nanokv_cluster_get_to_device": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, c_u64_p],
    "nanokv_cluster_backend": [P, c_char_pp],
    "nanokv_cluster_remove": [P, ctypes.c_char_p],
    "nanokv_cluster_locate": [P, ctypes.c_char_p, _REPLICA, ctypes.c_size_t, c_size_p, c_u64_p],
    "nanokv_cluster_open": [P, ctypes.c_char_p, ctypes.c_uint64, _WRITE, ctypes.POINTER(P)],
    "nanokv_cluster_plan_replicas": [P, c_size_p],
    "nanokv_cluster_plan_replica": [P, ctypes.c_size_t, _REPLICA],
    "nanokv_cluster_plan_payload": [P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)],
    "nanokv_cluster_commit": [P, ctypes.c_int],
    "nanokv_cluster_revoke": [P],
    "nanokv_cluster_plan_free": [P],
    "nanokv_cluster_put_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p, ctypes.c_size_t,
                                 _WRITE, c_int_p],
    "nanokv_cluster_get_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p, ctypes.c_size_t,
                                 c_u64_p, c_int_p],
    "nanokv_cluster_remove_batch": [P, c_char_p_p, ctypes.c_size_t, c_int_p],
    "nanokv_cluster_open_batch": [P, c_char_p_p, c_u64_p, ctypes.c_size_t, _WRITE, ctypes.POINTER(P), c_int_p],
    "nanokv_cluster_commit_batch": [ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int, c_int_p],
    "nanokv_cluster_revoke_batch": [ctypes.POINTER(P), ctypes.c_size_t, c_int_p],
    "nanokv_cluster_locate_batch": [P, c_char_p_p, ctypes.c_size_t, _REPLICA, ctypes.c_size_t, c_size_p,
                                    c_u64_p, c_int_p],
    "nanokv_cluster_put_from_device_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p,
                                             ctypes.c_size_t, _WRITE, ctypes.c_void_p, c_int_p],
    "nanokv_cluster_get_to_device_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p,
                                           ctypes.c_size_t, ctypes.c_void_p, c_u64_p, c_int_p],
    "nanokv_cluster_put_from_device_async": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p,
                                             ctypes.c_size_t, _WRITE, ctypes.c_void_p, ctypes.POINTER(P)],
    "nanokv_cluster_pending_wait": [P, c_int_p, ctypes.c_size_t],
    "nanokv_cluster_pending_done": [P, c_int_p],
    "nanokv_cluster_pending_count": [P, c_size_p],
    "nanokv_cluster_pending_event": [P, ctypes.POINTER(ctypes.c_void_p)],
    "nanokv_cluster_pending_free": [P],
    "nanokv_cluster_view": [P, ctypes.c_char_p, ctypes.POINTER(P)],
    "nanokv_cluster_view_batch": [P, c_char_p_p, ctypes.c_size_t, ctypes.POINTER(P), c_int_p],
    "nanokv_objects_view": [P, ctypes.c_char_p, ctypes.POINTER(P)],
    "nanokv_objects_view_batch": [P, c_char_p_p, ctypes.c_size_t, ctypes.POINTER(P), c_int_p],
    "nanokv_view_data": [P, ctypes.POINTER(ctypes.c_void_p)],
    "nanokv_view_size": [P, c_u64_p],
    "nanokv_view_device": [P, c_int_p],
    "nanokv_view_free": [P],
    "nanokv_view_free_batch": [ctypes.POINTER(P), ctypes.c_size_t],
    "nanokv_objects_use_slabs": [P, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32],
    "nanokv_cluster_use_slabs": [P, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32],
    "nanokv_cluster_use_slabs_on": [P, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32],
    "nanokv_cluster_flush_slab_puts": [P, ctypes.c_uint32],
    "nanokv_objects_flush_slab_puts": [P, ctypes.c_uint32],
    "nanokv_objects_acquire_slab": [P, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32,
                                    ctypes.POINTER(P)],
    "nanokv_slab_info": [P, ctypes.POINTER(SlabInfo)],
    "nanokv_slab_key_hash": [ctypes.c_char_p, c_u64_p],
    "nanokv_slab_release": [P],
    "nanokv_objects_options_init": [ctypes.POINTER(ObjectsOptions)],
    "nanokv_objects_open": [ctypes.POINTER(ObjectsOptions), ctypes.POINTER(P)],
    "nanokv_objects_close": [P],
    "nanokv_objects_backend": [P, c_char_pp],
    "nanokv_objects_uses_kernels": [P, c_int_p],
    "nanokv_objects_put": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int],
    "nanokv_objects_get": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, c_u64_p],
    "nanokv_objects_remove": [P, ctypes.c_char_p],
    "nanokv_objects_put_from_device": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                                       ctypes.c_void_p],
    "nanokv_objects_get_to_device": [P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                     c_u64_p],
    "nanokv_objects_put_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p, ctypes.c_size_t,
                                 ctypes.c_int, c_int_p],
    "nanokv_objects_get_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p, ctypes.c_size_t,
                                 c_u64_p, c_int_p],
    "nanokv_objects_remove_batch": [P, c_char_p_p, ctypes.c_size_t, c_int_p],
    "nanokv_objects_put_from_device_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p,
                                             ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, c_int_p],
    "nanokv_objects_get_to_device_batch": [P, c_char_p_p, ctypes.POINTER(ctypes.c_void_p), c_u64_p,
                                           ctypes.c_size_t, ctypes.c_void_p, c_u64_p, c_int_p],
    "nanokv_objects_open_for_write": [P, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(P)],
    "nanokv_objects_get_location": [P, ctypes.c_char_p, ctypes.POINTER(P)],
    "nanokv_objects_plan_info": [P, ctypes.POINTER(ObjectPlanInfo)],
    "nanokv_objects_plan_payload": [P, ctypes.POINTER(ctypes.c_void_p)],
    "nanokv_objects_plan_header": [P, ctypes.POINTER(ctypes.c_void_p)],
    "nanokv_objects_commit": [P, ctypes.c_int],
    "nanokv_objects_revoke": [P],
    "nanokv_objects_plan_free": [P],
    "nanokv_prefix_options_init": [ctypes.POINTER(PrefixOptions)],
    "nanokv_prefix_open_objects": [P, ctypes.POINTER(PrefixOptions), ctypes.POINTER(P)],
    "nanokv_prefix_open_cluster": [P, ctypes.POINTER(PrefixOptions), ctypes.POINTER(P)],
    "nanokv_prefix_close": [P],
    "nanokv_prefix_object_key": [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.c_size_t,
                                 ctypes.c_char_p, ctypes.c_size_t],
    "nanokv_prefix_lookup": [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, c_u64_p],
    "nanokv_prefix_store": [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.POINTER(PrefixPlane),
                            ctypes.c_size_t, ctypes.c_uint64, ctypes.c_void_p, c_u64_p],
    "nanokv_prefix_load": [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.c_uint64,
                           ctypes.POINTER(PrefixPlane), ctypes.c_size_t, ctypes.c_void_p, c_u64_p],
    "nanokv_prefix_store_blocks": [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.c_size_t, ctypes.c_uint64, ctypes.c_void_p, c_u64_p],
    "nanokv_prefix_load_blocks": [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.c_uint64,
                                  ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p, c_u64_p],
    "nanokv_prefix_views": [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.c_uint64,
                            ctypes.POINTER(P), ctypes.c_size_t, c_size_p],
    "nanokv_paged_append": [ctypes.POINTER(AppendInput), ctypes.POINTER(PagedLayout),
                            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, c_int_p],
    "nanokv_paged_append_fp8": [ctypes.POINTER(AppendInput), ctypes.POINTER(PagedLayout),
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p, c_int_p],
}


def _candidates():
    env = os.environ.get("NANOKV_LIBRARY")
    if env:
        yield "$NANOKV_LIBRARY", env
    yield "next to the package", os.path.join(_HERE, "libnanokv.so")
    builds = sorted(glob.glob(os.path.join(_REPO, "build*", "libkv", "capi", "libnanokv.so")),
                    key=lambda p: -os.path.getmtime(p))
    for path in builds:
        yield "build directory", path
    if not builds:
        yield "build directory", os.path.join(_REPO, "build*", "libkv", "capi", "libnanokv.so")
    found = ctypes.util.find_library("nanokv")
    yield "system loader path", found or "libnanokv.so (ctypes.util.find_library: none)"


def _load():
    tried = []
    for where, path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(f"  {where}: {path} (no such file)")
            if where == "$NANOKV_LIBRARY":
                break  # an explicit choice that fails is an error, not a hint to look elsewhere
            continue
        if "(" in path:
            tried.append(f"  {where}: {path}")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"  {where}: {path} ({e})")
            if where == "$NANOKV_LIBRARY":
                break
    raise LibraryNotFoundError(
        "nanokv: libnanokv.so not found. Searched:\n" + "\n".join(tried) +
        "\nBuild it (make -C <build dir> nanokv_capi) and set NANOKV_LIBRARY to its path.")


lib, path = _load()
lib.nanokv_abi_version.restype = ctypes.c_int
# Before the prototypes: an older library lacks some of their functions.
ABI_VERSION = 9
if lib.nanokv_abi_version() != ABI_VERSION:
    raise LibraryNotFoundError(
        f"nanokv: {path} speaks ABI version {lib.nanokv_abi_version()}, this package {ABI_VERSION}")
for _name, _args in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.argtypes = _args
    _fn.restype = ctypes.c_int
lib.nanokv_last_error.restype = ctypes.c_char_p
lib.nanokv_last_error.argtypes = []
lib.nanokv_code_name.restype = ctypes.c_char_p
lib.nanokv_code_name.argtypes = [ctypes.c_int]
lib.nanokv_kernels_available.restype = ctypes.c_int


def check(code):
    """Raises NanoKVError for a non-zero code of the C ABI. ctypes releases
    the GIL around the call and nanokv_last_error() is per thread, so the
    message read here is this call's."""
    if code != 0:
        raise NanoKVError(code, lib.nanokv_last_error().decode("utf-8", "replace"))


# ctypes truncates an int that does not fit its C type without a word
# (share([2**33]) shared page 0, set_limit(-1) asked for 2**64-1): every int
# that becomes a narrower C type goes through fit() first.
_INT_BOUNDS = {}
for _t in (ctypes.c_int8, ctypes.c_int16, ctypes.c_int32, ctypes.c_int64, ctypes.c_int,
           ctypes.c_long, ctypes.c_longlong):
    _INT_BOUNDS[_t] = (-(1 << (8 * ctypes.sizeof(_t) - 1)), (1 << (8 * ctypes.sizeof(_t) - 1)) - 1)
for _t in (ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint,
           ctypes.c_ulong, ctypes.c_ulonglong, ctypes.c_size_t):
    _INT_BOUNDS[_t] = (0, (1 << (8 * ctypes.sizeof(_t))) - 1)
_INT_BOUNDS[ctypes.c_void_p] = (0, (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1)


def fit(value, ctype, what):
    """`value` as an int that `ctype` holds exactly, else NanoKVError
    INVALID_ARGUMENT naming `what` and the bounds (never a truncated value)."""
    try:
        number = operator.index(value)
    except TypeError:
        raise NanoKVError(INVALID_ARGUMENT,
                          f"InvalidArgument: {what}: {value!r} is not an integer") from None
    low, high = _INT_BOUNDS[ctype]
    if not low <= number <= high:
        raise NanoKVError(INVALID_ARGUMENT,
                          f"InvalidArgument: {what}: {number} is out of range [{low}, {high}]")
    return number


def call(name, *args):
    fn = getattr(lib, name)
    checked = []
    for i, (arg, ctype) in enumerate(zip(args, fn.argtypes)):
        if ctype is ctypes.c_void_p:
            if isinstance(arg, int):  # handles, buffers and None pass as they are
                arg = fit(arg, ctype, f"{name} argument {i + 1}")
        elif ctype in _INT_BOUNDS and not isinstance(arg, ctypes._SimpleCData):
            arg = fit(arg, ctype, f"{name} argument {i + 1}")
        checked.append(arg)
    check(fn(*checked, *args[len(checked):]))


def address(value, what):
    """A device or host address as a c_void_p, checked to fit one."""
    return ctypes.c_void_p(fit(value, ctypes.c_void_p, what))


def id_array(ids):
    """Page ids as a ctypes uint32 array and their count (the array has one
    element at least, so an empty list still passes a valid pointer)."""
    ids = [fit(i, ctypes.c_uint32, f"page id {n}") for n, i in enumerate(ids)]
    return (ctypes.c_uint32 * max(len(ids), 1))(*ids), len(ids)
