"""Objects: the node object store (nanokv::ObjectStore over the C ABI;
docs/PYTHON.md, "Objects"): immutable objects by key in pages kvd holds.

    with nanokv.Objects(ipc_name="nanokv") as store:
        store.put_from_device("sess:42:kv:L0", k_cache_layer0)   # a cuda tensor, in place
        store.get_to_device("sess:42:kv:L0", out)                # into a tensor of room enough
        store.put("meta:42", b"...")                             # host bytes
        store.get("meta:42")
        with store.view("sess:42:kv:L0") as v: v.as_tensor(torch.float16, shape)  # in place, read-only

Device calls take a torch tensor (contiguous, on the store's kind of device),
anything with __cuda_array_interface__, or, on the host backend (whose device
memory is host pages mapped here: a KV tensor's), numpy arrays, writable
memoryviews and ctypes arrays over it. The bytes move between the buffer and kvd's pages directly
(kernels on cuda), never through a host copy; the calls return once they
moved. A torch tensor's transfer is ordered after torch's current stream.
"""
import ctypes
import os
import weakref
from collections import namedtuple

from nanokv import _buffers, _lib, views
from nanokv._handle import OwnedHandle
from nanokv._lib import call, fit
from nanokv.cluster import _GET_GUESS, _enc, _get_bytes, _keys, _outcomes
from nanokv.errors import NanoKVError

PlanInfo = namedtuple("PlanInfo", "device epoch bytes_total state tier")
SlabInfo = namedtuple("SlabInfo", "id device local_device payload_bytes header_slots ring_records first_epoch "
                                  "page_bytes store_offset ttl_ms payload headers cursor ring")
_STATES = {1: "RESERVED", 2: "WRITING", 3: "READY"}
_TIERS = {0: "gpu", 1: "host"}


class ObjectPlan(OwnedHandle):
    """A plan from open_for_write (write bytes_total bytes at payload, then
    commit() or revoke()) or get_location (READY; its payload is read-only)."""

    _NAME = "plan"
    _DESTROY = "nanokv_objects_plan_free"

    def __init__(self, store, handle):
        self._client = store
        self._own(handle)

    @property
    def info(self):
        out = _lib.ObjectPlanInfo()
        call("nanokv_objects_plan_info", self.handle, ctypes.byref(out))
        return PlanInfo(out.device, out.epoch, out.bytes_total, _STATES.get(out.state, str(out.state)),
                        _TIERS.get(out.tier, str(out.tier)))

    @property
    def payload(self):
        """The payload's address in this process (contiguous, bytes_total)."""
        return self._scalar("nanokv_objects_plan_payload", ctypes.c_void_p)

    @property
    def header(self):
        return self._scalar("nanokv_objects_plan_header", ctypes.c_void_p)

    def commit(self, published_on_device=False):
        call("nanokv_objects_commit", self.handle, int(bool(published_on_device)))

    def revoke(self):
        call("nanokv_objects_revoke", self.handle)


class Slab(OwnedHandle):
    """A v2 slab for the producer's own kernel (acquire_slab): the kernel
    allocates, writes and announces with nanokv/device/slab.h and
    slab_publish.h, from `info`'s addresses (the cursor and the ring are host
    addresses: copy the cursor to the device, register the ring with it,
    mapped). close() ends the slab: what was announced stands, the rest goes
    back. It keeps its store's connection, so it may outlive the store."""

    _NAME = "slab"
    _DESTROY = "nanokv_slab_release"

    def __init__(self, handle):
        self._own(handle)

    @property
    def info(self):
        out = _lib.SlabInfo()
        call("nanokv_slab_info", self.handle, ctypes.byref(out))
        return SlabInfo(*(getattr(out, name) for name, _ in _lib.SlabInfo._fields_))

    @staticmethod
    def key_hash(key):
        """xxhash64 of the key, seed 0: what a header and an announce carry."""
        out = ctypes.c_uint64()
        call("nanokv_slab_key_hash", _enc(key), ctypes.byref(out))
        return out.value


class Objects(OwnedHandle):
    """A connection to kvd's object store (the keywords of
    nanokv::ObjectStoreOptions; ipc_name None: $NANOKV_IPC_NAME, else
    "nanokv"). NanoKVError UNAVAILABLE when kvd is not
    running, FAILED_PRECONDITION when it runs no store (object_store.size).
    close() frees the plans still open on it and unmaps the store's pages."""

    _NAME = "object store"
    _DESTROY = "nanokv_objects_close"

    def __init__(self, ipc_name=None, backend=None, request_timeout_ms=0, spin_us=None,
                 defer_lease_release=False, ring=True, access_devices=()):
        self._children = weakref.WeakSet()
        options = _lib.ObjectsOptions()
        call("nanokv_objects_options_init", ctypes.byref(options))
        options.ipc_name = _enc(ipc_name if ipc_name is not None else os.environ.get("NANOKV_IPC_NAME") or None)
        options.backend = _enc(backend)
        options.request_timeout_ms = fit(request_timeout_ms, ctypes.c_uint32, "request_timeout_ms")
        if spin_us is not None:
            options.spin_us = fit(spin_us, ctypes.c_uint32, "spin_us")
        options.defer_lease_release = int(bool(defer_lease_release))
        options.ring = int(bool(ring))
        access = [fit(d, ctypes.c_int, "access_devices") for d in access_devices]
        self._access = (ctypes.c_int * max(len(access), 1))(*access)
        options.access_devices = self._access if access else None
        options.access_device_count = len(access)
        handle = ctypes.c_void_p()
        call("nanokv_objects_open", ctypes.byref(options), ctypes.byref(handle))
        self._own(handle)
        name = ctypes.c_char_p()
        call("nanokv_objects_backend", self.handle, ctypes.byref(name))
        self.backend = name.value.decode()

    def close(self):
        if self._handle is not None:
            for child in list(self._children):
                child.close()
        super().close()

    def _adopt(self, child):
        self._children.add(child)

    @property
    def uses_kernels(self):
        """Whether device calls launch kernels here (cuda) or copy."""
        return bool(self._scalar("nanokv_objects_uses_kernels", ctypes.c_int))

    # -- host bytes -------------------------------------------------------
    def put(self, key, data, device=-1):
        data = bytes(data)
        call("nanokv_objects_put", self.handle, _enc(key), data, len(data), device)

    def get(self, key):
        return _get_bytes(_lib.lib.nanokv_objects_get, self.handle, key)

    def remove(self, key):
        call("nanokv_objects_remove", self.handle, _enc(key))

    # -- device bytes -----------------------------------------------------
    def _buffer(self, obj, what, writable):
        return _buffers.resolve(obj, self.backend, what, writable)

    def put_from_device(self, key, tensor, device=-1, stream=None):
        """Stores all of `tensor`'s bytes as object `key`."""
        b = self._buffer(tensor, f"put_from_device of {key!r}", False)
        s = _buffers.stream_handle(stream) if stream is not None else b.stream
        call("nanokv_objects_put_from_device", self.handle, _enc(key), _lib.address(b.ptr, "src"), b.nbytes,
             device, _lib.address(s or 0, "stream"))

    def get_to_device(self, key, tensor, stream=None):
        """Copies object `key` into the start of `tensor`; returns its size.
        INVALID_ARGUMENT (nothing copied) when it is larger than the tensor."""
        b = self._buffer(tensor, f"get_to_device of {key!r}", True)
        s = _buffers.stream_handle(stream) if stream is not None else b.stream
        size = ctypes.c_uint64()
        call("nanokv_objects_get_to_device", self.handle, _enc(key), _lib.address(b.ptr, "dst"), b.nbytes,
             _lib.address(s or 0, "stream"), ctypes.byref(size))
        return size.value

    # -- batches: one result per item, None (done) or NanoKVError ---------
    def put_batch(self, items, device=-1):
        """items: (key, bytes) pairs."""
        items = [(k, bytes(d)) for k, d in items]
        keys, n = _keys(k for k, _ in items)
        data = (ctypes.c_char_p * max(n, 1))(*[d for _, d in items])
        sizes = (ctypes.c_uint64 * max(n, 1))(*[len(d) for _, d in items])
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_objects_put_batch", self.handle, keys, ctypes.cast(data, ctypes.POINTER(ctypes.c_void_p)),
             sizes, n, device, results)
        return _outcomes(results, n)

    def get_batch(self, keys, max_bytes=_GET_GUESS):
        """A list of bytes or NanoKVError; an object over max_bytes is
        fetched again alone at its size."""
        keys = list(keys)
        names, n = _keys(keys)
        bufs = [ctypes.create_string_buffer(max(max_bytes, 1)) for _ in keys]
        outs = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(b) for b in bufs])
        capacities = (ctypes.c_uint64 * max(n, 1))(*[max_bytes] * n)
        sizes = (ctypes.c_uint64 * max(n, 1))()
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_objects_get_batch", self.handle, names, outs, capacities, n, sizes, results)
        out = _outcomes(results, n)
        for i in range(n):
            if out[i] is None:
                out[i] = bufs[i].raw[:sizes[i]]
            elif out[i].code == NanoKVError.INVALID_ARGUMENT and sizes[i] > max_bytes:
                try:
                    out[i] = self.get(keys[i])
                except NanoKVError as e:
                    out[i] = e
        return out

    def remove_batch(self, keys):
        names, n = _keys(keys)
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_objects_remove_batch", self.handle, names, n, results)
        return _outcomes(results, n)

    def _device_batch(self, items, verb, writable):
        items = list(items)
        buffers = [self._buffer(t, f"{verb} of {k!r}", writable) for k, t in items]
        keys, n = _keys(k for k, _ in items)
        ptrs = (ctypes.c_void_p * max(n, 1))(*[b.ptr for b in buffers])
        sizes = (ctypes.c_uint64 * max(n, 1))(*[b.nbytes for b in buffers])
        streams = {b.stream for b in buffers}
        return buffers, keys, n, ptrs, sizes, (streams.pop() if len(streams) == 1 else None)

    def put_from_device_batch(self, items, device=-1, stream=None):
        """items: (key, tensor) pairs."""
        buffers, keys, n, ptrs, sizes, default = self._device_batch(items, "put_from_device", False)
        s = _buffers.stream_handle(stream) if stream is not None else default
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_objects_put_from_device_batch", self.handle, keys, ptrs, sizes, n, device,
             _lib.address(s or 0, "stream"), results)
        return _outcomes(results, n)

    def get_to_device_batch(self, items, stream=None):
        """items: (key, tensor) pairs. A list of sizes or NanoKVError."""
        buffers, keys, n, ptrs, capacities, default = self._device_batch(items, "get_to_device", True)
        s = _buffers.stream_handle(stream) if stream is not None else default
        got = (ctypes.c_uint64 * max(n, 1))()
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_objects_get_to_device_batch", self.handle, keys, ptrs, capacities, n,
             _lib.address(s or 0, "stream"), got, results)
        out = _outcomes(results, n)
        return [got[i] if out[i] is None else out[i] for i in range(n)]

    # -- plans ------------------------------------------------------------
    def open_for_write(self, key, size, device=-1):
        handle = ctypes.c_void_p()
        call("nanokv_objects_open_for_write", self.handle, _enc(key), size, device, ctypes.byref(handle))
        return ObjectPlan(self, handle)

    def get_location(self, key):
        handle = ctypes.c_void_p()
        call("nanokv_objects_get_location", self.handle, _enc(key), ctypes.byref(handle))
        return ObjectPlan(self, handle)

    # -- v2 slabs ----------------------------------------------------------
    def use_slabs(self, device, payload_bytes=0, header_slots=0, ring_records=0):
        """Device puts of objects up to payload_bytes on `device` go through
        slabs this store holds and ask kvd nothing (0: the defaults, 64 MiB,
        1024 slots, 1024 records). kvd indexes each within about a
        millisecond: flush_slab_puts() waits for it."""
        call("nanokv_objects_use_slabs", self.handle, device, payload_bytes, header_slots, ring_records)

    def flush_slab_puts(self, timeout_ms=1000):
        """Returns once kvd has indexed every slab put made before;
        NanoKVError UNAVAILABLE after timeout_ms."""
        call("nanokv_objects_flush_slab_puts", self.handle, timeout_ms)

    def acquire_slab(self, device, payload_bytes=0, header_slots=0, ring_records=0):
        """A Slab for the producer's own kernel (0: the defaults above)."""
        handle = ctypes.c_void_p()
        call("nanokv_objects_acquire_slab", self.handle, device, payload_bytes, header_slots, ring_records,
             ctypes.byref(handle))
        return Slab(handle)

    # -- views ------------------------------------------------------------
    def view(self, key):
        """An ObjectView (nanokv/views.py): the object in place, read-only,
        under a lease until closed or collected; it may outlive the store."""
        return views.make_view("nanokv_objects_view", self.handle, key, self.backend)

    def view_batch(self, keys):
        """Views of many keys (one lease request per 64): a list of
        ObjectView or NanoKVError."""
        return views.make_views("nanokv_objects_view_batch", self.handle, keys, self.backend)
