"""The paged K/V append kernel (vLLM's reshape_and_cache) through the C ABI.

Takes torch CUDA tensors (anything with data_ptr(), stride(), shape, dtype)
and a KVCache layer; enqueues on `stream` (a torch.cuda.Stream, a raw
cudaStream_t as int, or None for the current torch stream if torch is
loaded, else the default stream) and returns without waiting.
"""
import ctypes

from nanokv import _lib
from nanokv._lib import call
from nanokv.errors import NanoKVError, UNSUPPORTED

_DTYPES = {"float16": 0, "bfloat16": 1}


def available():
    """True when the kernels can run here: libnanokv was built with them and
    a CUDA GPU is present (the driver loads and counts at least one)."""
    return bool(_lib.lib.nanokv_kernels_available()) and _gpu_present()


def _gpu_present():
    # The driver API itself, not torch: nanokv needs no torch to answer.
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return False
    return count.value > 0


def _stream_handle(stream):
    if stream is None:
        try:
            import torch
            return torch.cuda.current_stream().cuda_stream
        except Exception:
            return 0
    return int(getattr(stream, "cuda_stream", stream))


def paged_append(cache, layer, key, value, slot_mapping, stream=None, bad_slots=None):
    """Writes key/value ([tokens, kv_heads, head_dim], float16 or bfloat16,
    rows may be strided) into the slots `slot_mapping` (int64, device) of
    `layer` of the KVCache `cache`. A negative slot skips its token."""
    k_view, v_view = cache.k_view(layer), cache.v_view(layer)
    blocks_axis = 0 if k_view.layout == "block_major" else 1
    paged_append_into(key, value, slot_mapping, k_view.data_ptr, v_view.data_ptr,
                      num_blocks=k_view.shape[blocks_axis], num_heads=k_view.shape[1 - blocks_axis],
                      block_size=k_view.block_size, head_dim=k_view.shape[3],
                      block_stride=k_view.block_stride, head_stride=k_view.head_stride,
                      stream=stream, bad_slots=bad_slots)


def paged_append_into(key, value, slot_mapping, key_cache_ptr, value_cache_ptr, num_blocks,
                      num_heads, block_size, head_dim, block_stride=None, head_stride=None,
                      stream=None, bad_slots=None):
    """The same over any paged layout: element (block, head, slot, d) at
    cache_ptr[block * block_stride + head * head_stride + slot * head_dim + d]
    (elements; default strides: block-major [blocks, heads, block_size, head_dim])."""
    if not available():
        raise NanoKVError(UNSUPPORTED, "Unsupported: libnanokv was built without the device "
                          "kernels (no CUDA toolkit)")
    dtype = str(key.dtype).replace("torch.", "")
    if dtype not in _DTYPES or str(value.dtype) != str(key.dtype):
        raise ValueError(f"nanokv: paged_append takes float16 or bfloat16 key and value, "
                         f"not {key.dtype} / {value.dtype}")
    if str(slot_mapping.dtype).replace("torch.", "") != "int64":
        raise ValueError(f"nanokv: slot_mapping must be int64, not {slot_mapping.dtype}")
    if block_stride is None:
        block_stride = num_heads * block_size * head_dim
    if head_stride is None:
        head_stride = block_size * head_dim
    args = _lib.AppendInput(key.data_ptr(), value.data_ptr(), key.stride(0), value.stride(0),
                            slot_mapping.data_ptr(), key.shape[0], _DTYPES[dtype])
    layout = _lib.PagedLayout(num_blocks, num_heads, block_size, head_dim, block_stride,
                              head_stride)
    bad = None if bad_slots is None else ctypes.cast(bad_slots.data_ptr(), _lib.c_int_p)
    call("nanokv_paged_append", ctypes.byref(args), ctypes.byref(layout),
         ctypes.c_void_p(int(key_cache_ptr)), ctypes.c_void_p(int(value_cache_ptr)),
         ctypes.c_void_p(_stream_handle(stream)), bad)
