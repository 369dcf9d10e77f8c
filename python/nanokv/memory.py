"""Zero-copy views of mapped nanokv memory.

cuda backend: a CudaArray, which carries __cuda_array_interface__ (version 3),
so torch.as_tensor(view, device="cuda"), cupy.asarray(view) and numba see the
pages in place. host backend: the pages are ordinary host memory (shared
memfd mappings), so the view is a numpy array over them (no copy).

Lifetime: a view holds a reference to its owner (tensor or cache), so the
owner's handle outlives it; but unmapping (unmap/shrink/free_for/close) takes
the memory away regardless. Touching a view of unmapped pages faults (host:
SIGSEGV; GPU: an illegal address). Unmap only after the GPU work on the pages
finished (torch.cuda.synchronize(), or the stream's synchronize()).
"""
import ctypes

# (numpy dtype name, __cuda_array_interface__ typestr, bytes)
DTYPES = {
    "uint8": ("uint8", "|u1", 1),
    "int8": ("int8", "|i1", 1),
    "float16": ("float16", "<f2", 2),
    # numpy and the array interface have no bfloat16: 16-bit words; in torch,
    # reinterpret with .view(torch.bfloat16).
    "bfloat16": ("uint16", "<u2", 2),
    "uint16": ("uint16", "<u2", 2),
    "int16": ("int16", "<i2", 2),
    "float32": ("float32", "<f4", 4),
    "int32": ("int32", "<i4", 4),
    "uint32": ("uint32", "<u4", 4),
    "int64": ("int64", "<i8", 8),
    "float8_e4m3": ("uint8", "|u1", 1),  # raw bytes; torch: .view(torch.float8_e4m3fn)
}


def _dtype(dtype):
    name = getattr(dtype, "name", None) or str(dtype)
    name = name.replace("torch.", "")
    if name not in DTYPES:
        raise ValueError(f"nanokv: unsupported dtype {dtype!r} (one of {sorted(DTYPES)})")
    return name


class CudaArray:
    """Device memory described by __cuda_array_interface__ v3. `owner` is kept
    alive as long as this object (and what consumers build from it: torch
    keeps a reference to the object it imported)."""

    def __init__(self, ptr, shape, dtype, strides=None, owner=None, device=0):
        name = _dtype(dtype)
        self.ptr = int(ptr)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = name
        self.itemsize = DTYPES[name][2]
        self.strides = None if strides is None else tuple(int(s) for s in strides)  # bytes
        self.device = device
        self._owner = owner

    @property
    def __cuda_array_interface__(self):
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": DTYPES[self.dtype][1],
            "data": (self.ptr, False),
            "strides": self.strides,
            # nanokv enqueues nothing on any stream: no synchronisation needed
            # before a consumer uses the memory.
            "stream": None,
        }

    def __repr__(self):
        return (f"CudaArray(ptr=0x{self.ptr:x}, shape={self.shape}, dtype={self.dtype}, "
                f"strides={self.strides})")


def host_array(ptr, shape, dtype, strides=None, owner=None):
    """A numpy array over `ptr` (host memory), no copy. Strides in bytes."""
    import numpy as np
    np_dtype = np.dtype(DTYPES[_dtype(dtype)][0])
    shape = tuple(int(s) for s in shape)
    if strides is None:
        strides, step = [], np_dtype.itemsize
        for extent in reversed(shape):
            strides.insert(0, step)
            step *= extent
    strides = tuple(int(s) for s in strides)
    if any(e == 0 for e in shape):
        return np.empty(shape, dtype=np_dtype)
    span = np_dtype.itemsize + sum((e - 1) * s for e, s in zip(shape, strides))
    buffer = (ctypes.c_uint8 * span).from_address(int(ptr))
    buffer._nanokv_owner = owner  # the array's base keeps the owner alive
    return np.ndarray(shape, dtype=np_dtype, buffer=buffer, strides=strides)


def view(backend, ptr, shape, dtype, strides=None, owner=None, device=0):
    """A zero-copy view for the backend: numpy on host, CudaArray on cuda."""
    if backend == "host":
        return host_array(ptr, shape, dtype, strides, owner)
    if backend == "cuda":
        return CudaArray(ptr, shape, dtype, strides, owner, device)
    raise NotImplementedError(f"nanokv: no zero-copy view for the {backend!r} backend")
