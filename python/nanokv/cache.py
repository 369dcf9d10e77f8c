"""KVCache: the block KV cache over kvd's pages (nanokv::KVCache)."""
import ctypes
from dataclasses import dataclass

from nanokv import _lib, memory
from nanokv._handle import OwnedHandle
from nanokv._lib import call

DTYPES = {"float16": 0, "bfloat16": 1, "float32": 2, "float8_e4m3": 3, "uint8": 4}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
LAYOUTS = {"block_major": 0, "head_major": 1}
LAYOUT_NAMES = {v: k for k, v in LAYOUTS.items()}


@dataclass(frozen=True)
class CacheView:
    """One layer's K or V as kernels see it (strides in elements). Element
    (slot s, head h, dim d) is at data_ptr + element_bytes * ((s // block_size)
    * block_stride + h * head_stride + (s % block_size) * slot_stride + d)."""
    data_ptr: int
    dtype: str
    layout: str
    element_bytes: int
    shape: tuple
    strides: tuple
    block_stride: int
    head_stride: int
    slot_stride: int
    block_size: int


class KVCache(OwnedHandle):
    """Sequences (request ids) own blocks of block_size tokens; K and V of
    every layer live in kvd's pages, mapped when a block in them is first
    needed. k(layer) / v(layer) are zero-copy arrays shaped [blocks, heads,
    block_size, head_dim] (block_major) or [heads, blocks, ...] (head_major).

    reserve_high_blocks > 0 keeps up to that many blocks taken ahead with
    their pages mapped (refilled in the background below reserve_low_blocks),
    so an allocation that fits in them asks kvd for nothing.

    Only the blocks of live sequences are mapped: touch nothing else. Free a
    sequence (free_for) and close the cache only after the GPU work on its
    blocks finished.
    """

    _NAME = "cache"
    _DESTROY = "nanokv_cache_destroy"

    def __init__(self, client, layers, kv_heads, head_dim, block_size=16, dtype="bfloat16",
                 num_blocks=0, max_bytes=0, layout="block_major", keep_free_groups=0, device=0,
                 reserve_low_blocks=0, reserve_high_blocks=0):
        self._client = client
        config = _lib.CacheConfig()
        call("nanokv_cache_config_init", ctypes.byref(config))
        dtype = memory._dtype(dtype)
        if dtype not in DTYPES:
            raise ValueError(f"nanokv: cache dtype {dtype!r} (one of {sorted(DTYPES)})")
        if layout not in LAYOUTS:
            raise ValueError(f"nanokv: layout {layout!r} (one of {sorted(LAYOUTS)})")
        config.device = _lib.fit(device, ctypes.c_int, "device")
        config.layers = _lib.fit(layers, ctypes.c_uint32, "layers")
        config.kv_heads = _lib.fit(kv_heads, ctypes.c_uint32, "kv_heads")
        config.head_dim = _lib.fit(head_dim, ctypes.c_uint32, "head_dim")
        config.block_size = _lib.fit(block_size, ctypes.c_uint32, "block_size")
        config.dtype = DTYPES[dtype]
        config.layout = LAYOUTS[layout]
        config.num_blocks = _lib.fit(num_blocks, ctypes.c_uint64, "num_blocks")
        config.max_bytes = _lib.fit(max_bytes, ctypes.c_uint64, "max_bytes")
        config.keep_free_groups = _lib.fit(keep_free_groups, ctypes.c_uint64, "keep_free_groups")
        config.reserve_low_blocks = _lib.fit(reserve_low_blocks, ctypes.c_uint64,
                                             "reserve_low_blocks")
        config.reserve_high_blocks = _lib.fit(reserve_high_blocks, ctypes.c_uint64,
                                              "reserve_high_blocks")
        handle = ctypes.c_void_p()
        call("nanokv_cache_create", client.handle, ctypes.byref(config), ctypes.byref(handle))
        self._own(handle)
        self.layers = int(layers)
        self.block_size = int(block_size)
        self.dtype = dtype
        self.device = int(device)
        self.num_blocks = self._scalar("nanokv_cache_num_blocks", ctypes.c_uint64)
        self.layer_stride_elements = self._scalar("nanokv_cache_layer_stride_elements",
                                                  ctypes.c_int64)

    # -- sequences --------------------------------------------------------
    def allocate_for(self, request_id, tokens):
        call("nanokv_cache_allocate_for", self.handle, int(request_id), int(tokens))

    def append_token(self, request_id):
        """One more token; returns its slot (block * block_size + offset)."""
        return self._scalar("nanokv_cache_append_token", ctypes.c_int64, int(request_id))

    def append_tokens(self, request_id, tokens):
        call("nanokv_cache_append_tokens", self.handle, int(request_id), int(tokens))

    def free_for(self, request_id):
        call("nanokv_cache_free_for", self.handle, int(request_id))

    def used_tokens(self, request_id):
        return self._scalar("nanokv_cache_used_tokens", ctypes.c_uint64, int(request_id))

    def block_table(self, request_id):
        """The sequence's block ids in token order."""
        count = ctypes.c_size_t()
        capacity = (self.used_tokens(request_id) + self.block_size - 1) // self.block_size + 1
        while True:
            blocks = (ctypes.c_uint32 * max(capacity, 1))()
            code = _lib.lib.nanokv_cache_block_table(self.handle, int(request_id), blocks,
                                                     capacity, ctypes.byref(count))
            if code == 0:
                return list(blocks[:count.value])
            if count.value <= capacity:  # not a size problem
                _lib.check(code)
            capacity = count.value

    def slot_of(self, request_id, position):
        return self._scalar("nanokv_cache_slot_of", ctypes.c_int64, int(request_id),
                            int(position))

    def slots(self, request_id):
        """The slot of every token of the sequence, in order."""
        table = self.block_table(request_id)
        used = self.used_tokens(request_id)
        return [table[p // self.block_size] * self.block_size + p % self.block_size
                for p in range(used)]

    # -- views ------------------------------------------------------------
    def _view(self, name, layer):
        v = _lib.CacheView()
        call(name, self.handle, int(layer), ctypes.byref(v))
        return CacheView(v.data or 0, DTYPE_NAMES.get(v.dtype, "uint8"),
                         LAYOUT_NAMES.get(v.layout, "?"), v.element_bytes, tuple(v.shape),
                         tuple(v.strides), v.block_stride, v.head_stride, v.slot_stride,
                         v.block_size)

    def k_view(self, layer):
        return self._view("nanokv_cache_k_view", layer)

    def v_view(self, layer):
        return self._view("nanokv_cache_v_view", layer)

    def _array(self, view):
        return memory.view(self._client.backend, view.data_ptr, view.shape, view.dtype,
                           tuple(s * view.element_bytes for s in view.strides), owner=self,
                           device=self.device)

    def k(self, layer):
        """Layer's K as a zero-copy array (numpy on host, CudaArray on cuda)."""
        return self._array(self.k_view(layer))

    def v(self, layer):
        return self._array(self.v_view(layer))

    # -- pages and stats --------------------------------------------------
    def release_free_pages(self, max_pages):
        """Gives kept-free page groups, then the reserve's, back to kvd; returns
        the pages returned."""
        return self._scalar("nanokv_cache_release_free_pages", ctypes.c_uint64, int(max_pages))

    def release_pending_reclaim(self):
        """Gives back what kvd's reclaim still asks for (client.pending_reclaim_pages),
        from kept-free page groups, then the reserve; returns the pages returned."""
        return self._scalar("nanokv_cache_release_pending_reclaim", ctypes.c_uint64)

    def stats(self):
        s = _lib.CacheStats()
        call("nanokv_cache_get_stats", self.handle, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _lib.CacheStats._fields_}

    def dump(self):
        text = ctypes.c_char_p()
        call("nanokv_cache_dump", self.handle, ctypes.byref(text))
        return text.value.decode()

    def __repr__(self):
        return (f"nanokv.KVCache(layers={self.layers}, blocks={self.num_blocks}, "
                f"block_size={self.block_size}, dtype={self.dtype})")
