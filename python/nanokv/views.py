"""ObjectView: a READY object read where it lies (Objects.view,
Cluster.view; the C ABI's nanokv_view_*), no copy, under a lease kvd holds
for the view: the object is neither evicted nor removed while it lasts.

    with cluster.view("sess:42:kv:L3") as v:      # or keep it: GC ends the lease
        k = v.as_tensor(torch.float16, (heads, tokens, dim))   # zero-copy, read-only
        torch.cuda.current_stream().synchronize()  # before the with block ends

cuda: the view carries __cuda_array_interface__ (v3, its `data` marked
read-only), so cupy and numba read it in place; as_tensor() gives a torch
tensor over it. host backend: numpy() / np.asarray(view) (read-only arrays
through __array_interface__) and as_tensor() (torch.frombuffer). The pages
are mapped read-only: a write through any of them faults (SIGSEGV on the
host, an illegal address on a GPU). torch has no read-only tensors, so
as_tensor() hands torch a writable-looking tensor: read it only.

Lifetime: every tensor or array made from the view keeps the view (and so
its lease) alive; close() or leaving the with block ends the lease at once,
like unmap: use nothing made from the view after it (finish the GPU work
reading it first). Without close(), the lease ends when the view and all
that was made from it are collected.
"""
import ctypes
import warnings

from nanokv import memory
from nanokv._args import _enc, _keys, _outcomes
from nanokv._lib import call


class ObjectView:
    """`key`, `nbytes`, `data_ptr` (the bytes' address here), `device` (this
    process's ordinal), `backend`; close() / with; see the module's doc."""

    def __init__(self, handle, backend, key):
        self._handle = handle
        self.backend = backend
        self.key = key
        data, size, device = ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_int()
        call("nanokv_view_data", handle, ctypes.byref(data))
        call("nanokv_view_size", handle, ctypes.byref(size))
        call("nanokv_view_device", handle, ctypes.byref(device))
        self._ptr, self.nbytes, self.device = data.value or 0, size.value, device.value

    @property
    def closed(self):
        return self._handle is None

    @property
    def data_ptr(self):
        self._check_open()
        return self._ptr

    def __len__(self):
        return self.nbytes

    def _check_open(self):
        if self._handle is None:
            raise ValueError(f"nanokv: the view of {self.key!r} is closed")

    def _interface(self):
        # Shape in bytes; the data tuple's flag says read-only.
        return {"version": 3, "shape": (self.nbytes,), "typestr": "|u1", "data": (self.data_ptr, True),
                "strides": None}

    @property
    def __cuda_array_interface__(self):
        if self.backend != "cuda":
            raise AttributeError(f"nanokv: a view on the {self.backend} backend is host memory "
                                 "(numpy(), __array_interface__)")
        interface = self._interface()
        interface["stream"] = None  # nothing is queued on any stream for it
        return interface

    @property
    def __array_interface__(self):
        if self.backend != "host":
            raise AttributeError(f"nanokv: a view on the {self.backend} backend is device memory "
                                 "(__cuda_array_interface__, as_tensor())")
        return self._interface()

    def _shape_of(self, itemsize, shape, dtype):
        if shape is None:
            if self.nbytes % itemsize:
                raise ValueError(f"nanokv: the view of {self.key!r} holds {self.nbytes} bytes, "
                                 f"not a whole number of {dtype} ({itemsize} bytes)")
            return (self.nbytes // itemsize,)
        shape = tuple(int(s) for s in shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        count = 1
        for extent in shape:
            count *= extent
        if count * itemsize != self.nbytes:
            raise ValueError(f"nanokv: the view of {self.key!r} holds {self.nbytes} bytes, "
                             f"{shape} of {dtype} is {count * itemsize}")
        return shape

    def numpy(self, dtype="uint8", shape=None):
        """A read-only numpy array over the bytes (host backend), no copy."""
        import numpy as np
        if self.backend != "host":
            raise ValueError(f"nanokv: a view on the {self.backend} backend is device memory: "
                             "use as_tensor() or __cuda_array_interface__")
        np_dtype = np.dtype(memory.DTYPES[memory._dtype(dtype)][0])
        shape = self._shape_of(np_dtype.itemsize, shape, dtype)
        return np.asarray(self).view(np_dtype).reshape(shape)  # its base is this view

    def as_tensor(self, dtype=None, shape=None):
        """A torch tensor over the bytes, no copy (cuda: on the view's
        device; host: a CPU tensor). Read it only: the pages are mapped
        read-only. dtype: a torch dtype or its name (default uint8)."""
        import torch
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype.replace("torch.", ""))
        dtype = torch.uint8 if dtype is None else dtype
        itemsize = torch.empty((), dtype=dtype).element_size()
        shape = self._shape_of(itemsize, shape, dtype)
        if self.nbytes == 0:
            return torch.empty(shape, dtype=dtype, device=self._torch_device())
        if self.backend == "cuda":
            # torch refuses an interface marked read-only: an array of its own,
            # which keeps this view (and its lease) alive for the tensor.
            raw = torch.as_tensor(memory.CudaArray(self.data_ptr, (self.nbytes,), "uint8", owner=self,
                                                   device=self.device), device=self._torch_device())
        elif self.backend == "host":
            buffer = (ctypes.c_uint8 * self.nbytes).from_address(self.data_ptr)
            buffer._nanokv_owner = self  # the tensor keeps the buffer, the buffer this view
            with warnings.catch_warnings():
                # torch warns that it cannot make a read-only tensor: said in the docstring.
                warnings.filterwarnings("ignore", message=".*not writable.*")
                raw = torch.frombuffer(memoryview(buffer).toreadonly(), dtype=torch.uint8)
        else:
            raise ValueError(f"nanokv: no torch view for the {self.backend!r} backend")
        return raw.view(dtype).view(shape)

    def _torch_device(self):
        return f"cuda:{self.device}" if self.backend == "cuda" else "cpu"

    def close(self):
        """Ends the lease now (one request to kvd). Idempotent."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        call("nanokv_view_free", handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter teardown, kvd gone: nothing to report to
            pass

    def __repr__(self):
        state = "closed" if self._handle is None else f"0x{self._ptr:x}"
        return f"nanokv.ObjectView({self.key!r}, {self.nbytes} bytes, {self.backend} device {self.device}, {state})"


def close_views(views):
    """close() of every view in `views` (closed ones, and what is not a view:
    None, a view_batch's errors, skipped) in one request to kvd per store,
    where closing each is a request: the views of a request's K/V end in
    one round trip. Only after the GPU work reading them finished."""
    handles = []
    for view in views:
        if not isinstance(view, ObjectView) or view._handle is None:
            continue
        handles.append(view._handle)
        view._handle = None
    if handles:
        call("nanokv_view_free_batch", (ctypes.c_void_p * len(handles))(*handles), len(handles))


def make_views(fn, handle, keys, backend):
    """Views of `keys` through the C batch call `fn` (handle, keys, count,
    views, results): a list of ObjectView or NanoKVError."""
    keys = list(keys)
    names, n = _keys(keys)
    handles = (ctypes.c_void_p * max(n, 1))()
    results = (ctypes.c_int * max(n, 1))()
    call(fn, handle, names, n, handles, results)
    out = _outcomes(results, n)
    return [ObjectView(ctypes.c_void_p(handles[i]), backend, keys[i]) if out[i] is None else out[i]
            for i in range(n)]


def make_view(fn, handle, key, backend):
    """One view through the C call `fn` (handle, key, &view)."""
    out = ctypes.c_void_p()
    call(fn, handle, _enc(key), ctypes.byref(out))
    return ObjectView(out, backend, key)
