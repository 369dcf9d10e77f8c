"""Cluster: the object store across nodes, through the cluster master
(nanokv::ClusterClient over the C ABI; docs/PYTHON.md, "Cluster").

    with nanokv.Cluster(masters=["10.0.0.1:7470"], node_id="gpu-3", ipc_name="nanokv") as c:
        c.put("sess:42:kv:L0", data, preferred_segment="gpu-3")
        c.get_location("sess:42:kv:L0")      # Location(bytes_total, replicas nearest first)
        c.get("sess:42:kv:L0")               # bytes, from this node or another
        c.put_from_device("sess:42:kv:L1", k_cache_layer1, preferred_segment="gpu-7")
        c.get_to_device("sess:42:kv:L1", out)   # its size; out: a tensor of room enough
        c.put_from_device_batch(keys, tensors, preferred_segment="gpu-7")   # a request's KV at once
        c.get_to_device_batch(keys, outs)        # [size or NanoKVError per item]
        pending = c.put_from_device_async(keys, tensors, preferred_segment="gpu-7")  # stream-ordered
        pending.wait()                           # [None or NanoKVError per item]
        with c.view("sess:42:kv:L1") as v: v.as_tensor(torch.float16, shape)      # in place, read-only

A copy on this node, or on another node of this host (the same host_id),
moves through that node's kvd and pages (device bytes GPU to GPU); one on
another host through that node's transfer agent (UCX; the node's
master.data_address). A plan's payload pointer and a view exist only for a
copy on this host. Device calls take the buffers nanokv.Objects' do (a
torch tensor, __cuda_array_interface__, on the host backend numpy arrays,
memoryviews and ctypes arrays over pages mapped here). All but the
stream-ordered put wait for the buffers' stream first (a torch tensor's:
torch's current stream) and return once the bytes moved.
"""
import ctypes
import weakref
from collections import namedtuple

from nanokv import _buffers, _lib, views
from nanokv._handle import OwnedHandle
from nanokv._args import _enc, _keys, _outcomes
from nanokv._lib import call, check
from nanokv.errors import INVALID_ARGUMENT, NanoKVError

Replica = namedtuple("Replica", "node_id data_address device device_uuid epoch local same_host")
Location = namedtuple("Location", "key bytes_total replicas")

_GET_GUESS = 64 << 10  # a get's first buffer; a larger object costs a second call


def _get_bytes(fn, handle, key):
    """An object's bytes through a C get (handle, key, buf, capacity, &size):
    a guess first, then the size the library answered when it was short."""
    size = ctypes.c_uint64()
    buf = ctypes.create_string_buffer(_GET_GUESS)
    code = fn(handle, _enc(key), buf, _GET_GUESS, ctypes.byref(size))
    if code == NanoKVError.INVALID_ARGUMENT and size.value > _GET_GUESS:
        buf = ctypes.create_string_buffer(size.value)
        code = fn(handle, _enc(key), buf, size.value, ctypes.byref(size))
    check(code)
    return buf.raw[:size.value]


_RUNTIMES = {"cuda": ("libcuda.so.1", "cuStreamSynchronize"), "hip": ("libamdhip64.so", "hipStreamSynchronize")}
_stream_sync = {}


def _finish(backend, stream):
    """Waits for the work queued on `stream` (a cudaStream_t / hipStream_t):
    the cluster's copies run outside any stream, and a side stream (torch's
    are non-blocking) would not be ordered before them."""
    if not stream or backend not in _RUNTIMES:
        return
    if backend not in _stream_sync:
        library, name = _RUNTIMES[backend]
        fn = getattr(ctypes.CDLL(library), name)
        fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_int
        _stream_sync[backend] = fn
    code = _stream_sync[backend](ctypes.c_void_p(stream))
    if code != 0:
        raise NanoKVError(NanoKVError.INTERNAL, f"Internal: {_RUNTIMES[backend][1]}({stream:#x}) failed: {code}")


def _write_options(preferred_segment, replica_num):
    o = _lib.WriteOptions()
    o.preferred_segment = _enc(preferred_segment)
    o.replica_num = _lib.fit(replica_num, ctypes.c_uint32, "replica_num")
    return o


def _replica(r):
    return Replica(r.node_id.decode(), r.data_address.decode(), r.device, r.device_uuid.decode(),
                   r.epoch, bool(r.local), bool(r.same_host))


class ClusterPlan(OwnedHandle):
    """A write in progress: its copies' plans. Write each copy on this node
    (payload(i) is its address here), then commit() or revoke()."""

    _NAME = "plan"
    _DESTROY = "nanokv_cluster_plan_free"

    def __init__(self, cluster, handle):
        self._client = cluster
        self._own(handle)

    @property
    def replicas(self):
        n = self._scalar("nanokv_cluster_plan_replicas", ctypes.c_size_t)
        out = []
        for i in range(n):
            r = _lib.Replica()
            call("nanokv_cluster_plan_replica", self.handle, i, ctypes.byref(r))
            out.append(_replica(r))
        return out

    def payload(self, index=0):
        """The copy's payload address in this process (a copy on this node)."""
        return self._scalar("nanokv_cluster_plan_payload", ctypes.c_void_p, index)

    def commit(self, published_on_device=False):
        call("nanokv_cluster_commit", self.handle, int(bool(published_on_device)))

    def revoke(self):
        call("nanokv_cluster_revoke", self.handle)


class PendingPuts(OwnedHandle):
    """A stream-ordered put (Cluster.put_from_device_async): its copies are
    queued on the stream; wait() answers once the library committed them.
    It keeps the source tensors referenced until closed; close() (the with
    statement, the cluster's close, collection) waits first."""

    _NAME = "pending put"
    _DESTROY = "nanokv_cluster_pending_free"

    def __init__(self, cluster, handle, count, sources):
        self._client = cluster
        self._count = count
        self._sources = sources  # untouched and alive until the batch finished
        self._own(handle)

    def __len__(self):
        return self._count

    def wait(self):
        """Blocks until every item is committed or failed: None or NanoKVError per item."""
        results = (ctypes.c_int * self._count)()
        call("nanokv_cluster_pending_wait", self.handle, results, self._count)
        return _outcomes(results, self._count)

    def done(self):
        """Whether wait() would answer at once."""
        return bool(self._scalar("nanokv_cluster_pending_done", ctypes.c_int))

    @property
    def event(self):
        """The cudaEvent_t (an int) recorded on the stream after the batch's
        copies, for cudaStreamWaitEvent; None where they ran during the
        call (the host backend)."""
        return self._scalar("nanokv_cluster_pending_event", ctypes.c_void_p) or None

    def close(self):
        super().close()
        self._sources = None


class Cluster(OwnedHandle):
    """A client of the cluster master (the keywords of
    nanokv::ClusterClientOptions; None: the environment's NANOKV_MASTERS,
    NANOKV_TOKEN_FILE, NANOKV_NODE_ID, NANOKV_HOST_ID, NANOKV_IPC_NAME).
    close() frees the plans still open on it and waits for its pending puts;
    views outlive it."""

    _NAME = "cluster"
    _DESTROY = "nanokv_cluster_close"

    def __init__(self, masters=None, token_file=None, tls_ca=None, tls_cert=None, tls_key=None,
                 node_id=None, ipc_name=None, backend=None, request_timeout_ms=0, host_id=None,
                 access_devices=()):
        self._children = weakref.WeakSet()
        self._backend = None
        options = _lib.ClusterOptions()
        masters = [_enc(m) for m in (masters or [])]
        self._masters = (ctypes.c_char_p * max(len(masters), 1))(*masters)
        options.masters = self._masters if masters else None
        options.master_count = len(masters)
        options.token_file = _enc(token_file)
        options.tls_ca = _enc(tls_ca)
        options.tls_cert = _enc(tls_cert)
        options.tls_key = _enc(tls_key)
        options.node_id = _enc(node_id)
        options.ipc_name = _enc(ipc_name)
        options.backend = _enc(backend)
        options.request_timeout_ms = _lib.fit(request_timeout_ms, ctypes.c_uint32, "request_timeout_ms")
        options.host_id = _enc(host_id)
        access = [_lib.fit(d, ctypes.c_int, "access_devices") for d in access_devices]
        self._access = (ctypes.c_int * max(len(access), 1))(*access)
        options.access_devices = self._access if access else None
        options.access_device_count = len(access)
        handle = ctypes.c_void_p()
        call("nanokv_cluster_connect", ctypes.byref(options), ctypes.byref(handle))
        self._own(handle)

    def close(self):
        if self._handle is not None:
            for child in list(self._children):
                child.close()
        super().close()

    def _adopt(self, child):
        self._children.add(child)

    # -- one key ----------------------------------------------------------
    def put(self, key, data, preferred_segment=None, replica_num=1):
        data = bytes(data)
        call("nanokv_cluster_put", self.handle, _enc(key), data, len(data),
             ctypes.byref(_write_options(preferred_segment, replica_num)))

    def get(self, key):
        return _get_bytes(_lib.lib.nanokv_cluster_get, self.handle, key)

    def remove(self, key):
        call("nanokv_cluster_remove", self.handle, _enc(key))

    # -- device bytes -----------------------------------------------------
    @property
    def backend(self):
        """The backend of this process's device buffers ("cuda", "hip",
        "host"; the backend keyword, opened on first use)."""
        if self._backend is None:
            name = ctypes.c_char_p()
            call("nanokv_cluster_backend", self.handle, ctypes.byref(name))
            self._backend = name.value.decode()
        return self._backend

    def _device_buffer(self, obj, what, writable, stream):
        b = _buffers.resolve(obj, self.backend, what, writable)
        _finish(self.backend, _buffers.stream_handle(stream) if stream is not None else b.stream)
        return b

    def use_slabs(self, device, payload_bytes=0, header_slots=0, ring_records=0):
        """Device puts with one replica and preferred_segment None, this node
        or one of its devices, up to payload_bytes, go into this node's store
        through slabs and ask neither the master nor kvd; the master learns
        of them from the node's events (0: the defaults, 64 MiB, 1024, 1024)."""
        call("nanokv_cluster_use_slabs", self.handle, device, payload_bytes, header_slots, ring_records)

    def use_slabs_on(self, segment, payload_bytes=0, header_slots=0, ring_records=0):
        """use_slabs on "<node>/<device>", a node of this host: device puts
        with preferred_segment "<node>" or "<node>/<device>" go into that
        node's store through its kvd's socket and pages."""
        call("nanokv_cluster_use_slabs_on", self.handle, _enc(segment), payload_bytes, header_slots, ring_records)

    def flush_slab_puts(self, timeout_ms=1000):
        """Returns once every store this client holds slabs of has indexed
        every slab put made before."""
        call("nanokv_cluster_flush_slab_puts", self.handle, timeout_ms)

    def put_from_device(self, key, tensor, preferred_segment=None, replica_num=1, stream=None):
        """Stores all of `tensor`'s bytes as object `key`, on any node."""
        b = self._device_buffer(tensor, f"put_from_device of {key!r}", False, stream)
        call("nanokv_cluster_put_from_device", self.handle, _enc(key), _lib.address(b.ptr, "src"), b.nbytes,
             ctypes.byref(_write_options(preferred_segment, replica_num)))

    def get_to_device(self, key, tensor, stream=None):
        """Copies object `key` (from whichever node holds it) into the start
        of `tensor`; returns its size. INVALID_ARGUMENT (nothing copied)
        when it is larger than the tensor."""
        b = self._device_buffer(tensor, f"get_to_device of {key!r}", True, stream)
        size = ctypes.c_uint64()
        call("nanokv_cluster_get_to_device", self.handle, _enc(key), _lib.address(b.ptr, "dst"), b.nbytes,
             ctypes.byref(size))
        return size.value

    def get_location(self, key):
        replicas = (_lib.Replica * 8)()
        count, size = ctypes.c_size_t(), ctypes.c_uint64()
        call("nanokv_cluster_locate", self.handle, _enc(key), replicas, 8, ctypes.byref(count), ctypes.byref(size))
        return Location(key, size.value, [_replica(replicas[i]) for i in range(min(count.value, 8))])

    def open_for_write(self, key, size, preferred_segment=None, replica_num=1):
        handle = ctypes.c_void_p()
        call("nanokv_cluster_open", self.handle, _enc(key), int(size),
             ctypes.byref(_write_options(preferred_segment, replica_num)), ctypes.byref(handle))
        return ClusterPlan(self, handle)

    # -- batches (one request to the master each) -------------------------
    def put_batch(self, items, preferred_segment=None, replica_num=1):
        """items: (key, data) pairs. A list of None (stored) or NanoKVError."""
        items = [(k, bytes(d)) for k, d in items]
        keys, n = _keys(k for k, _ in items)
        data = (ctypes.c_char_p * max(n, 1))(*[d for _, d in items])
        sizes = (ctypes.c_uint64 * max(n, 1))(*[len(d) for _, d in items])
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_cluster_put_batch", self.handle, keys, ctypes.cast(data, ctypes.POINTER(ctypes.c_void_p)),
             sizes, n, ctypes.byref(_write_options(preferred_segment, replica_num)), results)
        return _outcomes(results, n)

    def get_location_batch(self, keys):
        """A list of Location or NanoKVError."""
        keys = list(keys)
        names, n = _keys(keys)
        replicas = (_lib.Replica * (max(n, 1) * 8))()
        counts = (ctypes.c_size_t * max(n, 1))()
        sizes = (ctypes.c_uint64 * max(n, 1))()
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_cluster_locate_batch", self.handle, names, n, replicas, 8, counts, sizes, results)
        out = _outcomes(results, n)
        for i in range(n):
            if out[i] is None:
                out[i] = Location(keys[i], sizes[i], [_replica(replicas[i * 8 + k]) for k in range(min(counts[i], 8))])
        return out

    def get_batch(self, keys):
        """A list of bytes or NanoKVError."""
        keys = list(keys)
        located = self.get_location_batch(keys)
        names, n = _keys(keys)
        bufs = [ctypes.create_string_buffer(max(loc.bytes_total, 1) if isinstance(loc, Location) else 1)
                for loc in located]
        outs = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(b) for b in bufs])
        capacities = (ctypes.c_uint64 * max(n, 1))(*[len(b) for b in bufs])
        sizes = (ctypes.c_uint64 * max(n, 1))()
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_cluster_get_batch", self.handle, names, outs, capacities, n, sizes, results)
        out = _outcomes(results, n)
        return [bufs[i].raw[:sizes[i]] if out[i] is None else out[i] for i in range(n)]

    def remove_batch(self, keys):
        names, n = _keys(keys)
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_cluster_remove_batch", self.handle, names, n, results)
        return _outcomes(results, n)

    def open_batch(self, items, preferred_segment=None, replica_num=1):
        """items: (key, size) pairs. A list of ClusterPlan or NanoKVError."""
        items = list(items)
        keys, n = _keys(k for k, _ in items)
        sizes = (ctypes.c_uint64 * max(n, 1))(*[_lib.fit(s, ctypes.c_uint64, "size") for _, s in items])
        plans = (ctypes.c_void_p * max(n, 1))()
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_cluster_open_batch", self.handle, keys, sizes, n,
             ctypes.byref(_write_options(preferred_segment, replica_num)), plans, results)
        out = _outcomes(results, n)
        return [ClusterPlan(self, ctypes.c_void_p(plans[i])) if out[i] is None else out[i] for i in range(n)]

    def commit_batch(self, plans, published_on_device=False):
        handles = (ctypes.c_void_p * max(len(plans), 1))(*[p.handle.value for p in plans])
        results = (ctypes.c_int * max(len(plans), 1))()
        call("nanokv_cluster_commit_batch", handles, len(plans), int(bool(published_on_device)), results)
        return _outcomes(results, len(plans))

    def revoke_batch(self, plans):
        handles = (ctypes.c_void_p * max(len(plans), 1))(*[p.handle.value for p in plans])
        results = (ctypes.c_int * max(len(plans), 1))()
        call("nanokv_cluster_revoke_batch", handles, len(plans), results)
        return _outcomes(results, len(plans))

    # -- a request's KV: device bytes as one batch ------------------------
    def _device_batch(self, items, tensors, verb, writable):
        """items: (key, buffer) pairs, or keys with `tensors` beside them."""
        if tensors is None:
            pairs = [tuple(p) for p in items]
        else:
            keys, tensors = list(items), list(tensors)
            if len(keys) != len(tensors):
                raise NanoKVError(INVALID_ARGUMENT, f"InvalidArgument: {verb}: {len(keys)} keys and "
                                                    f"{len(tensors)} buffers")
            pairs = list(zip(keys, tensors))
        buffers = [_buffers.resolve(t, self.backend, f"{verb} of {k!r}", writable) for k, t in pairs]
        keys, n = _keys(k for k, _ in pairs)
        ptrs = (ctypes.c_void_p * max(n, 1))(*[b.ptr for b in buffers])
        sizes = (ctypes.c_uint64 * max(n, 1))(*[b.nbytes for b in buffers])
        return buffers, keys, n, ptrs, sizes

    def _stream(self, buffers, stream, verb, finish):
        """The stream a batch's copies are queued on: `stream` (a torch or
        cupy stream, or a raw cudaStream_t), else the buffers' (a torch
        tensor's: torch's current stream). `finish`: waits for it, or for
        each of the buffers', first."""
        streams = {_buffers.stream_handle(stream)} if stream is not None else {b.stream for b in buffers if b.stream}
        if finish:
            for s in streams:
                _finish(self.backend, s)
        elif len(streams) > 1:
            raise NanoKVError(INVALID_ARGUMENT, f"InvalidArgument: {verb}: the buffers are on {len(streams)} "
                                                "streams: name the one to queue on with stream=")
        return _lib.address(streams.pop() if len(streams) == 1 else 0, "stream")

    def put_from_device_batch(self, items, tensors=None, preferred_segment=None, replica_num=1, stream=None):
        """Stores each buffer's bytes as its key: one master round trip to
        plan, one to commit; copies on this host by the GPU, queued on one
        stream. items: (key, tensor) pairs, or keys with `tensors`. A list
        of None (stored) or NanoKVError (that item revoked)."""
        buffers, keys, n, ptrs, sizes = self._device_batch(items, tensors, "put_from_device_batch", False)
        s = self._stream(buffers, stream, "put_from_device_batch", finish=True)
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_cluster_put_from_device_batch", self.handle, keys, ptrs, sizes, n,
             ctypes.byref(_write_options(preferred_segment, replica_num)), s, results)
        return _outcomes(results, n)

    def get_to_device_batch(self, keys, outs=None, stream=None):
        """Copies each object into the start of its buffer: this node's
        copies with no question to the master, the rest located at once.
        keys with `outs`, or (key, buffer) pairs. A list of sizes or
        NanoKVError (INVALID_ARGUMENT, nothing copied, when it does not fit)."""
        buffers, names, n, ptrs, capacities = self._device_batch(keys, outs, "get_to_device_batch", True)
        s = self._stream(buffers, stream, "get_to_device_batch", finish=True)
        got = (ctypes.c_uint64 * max(n, 1))()
        results = (ctypes.c_int * max(n, 1))()
        call("nanokv_cluster_get_to_device_batch", self.handle, names, ptrs, capacities, n, s, got, results)
        out = _outcomes(results, n)
        return [got[i] if out[i] is None else out[i] for i in range(n)]

    def put_from_device_async(self, items, tensors=None, preferred_segment=None, replica_num=1, stream=None):
        """put_from_device_batch, stream-ordered: returns once the copies
        are queued on `stream` (default: the tensors' torch stream), without
        waiting for the host or the GPU; the library commits after the
        stream ran past them. A PendingPuts (wait(), done(), event); the
        tensors must stay as they are until wait() returns."""
        buffers, keys, n, ptrs, sizes = self._device_batch(items, tensors, "put_from_device_async", False)
        s = self._stream(buffers, stream, "put_from_device_async", finish=False)
        handle = ctypes.c_void_p()
        call("nanokv_cluster_put_from_device_async", self.handle, keys, ptrs, sizes, n,
             ctypes.byref(_write_options(preferred_segment, replica_num)), s, ctypes.byref(handle))
        return PendingPuts(self, handle, n, buffers)

    def view(self, key):
        """An ObjectView of a READY copy on this host (nanokv/views.py):
        in place, read-only, under a lease until closed or collected.
        FAILED_PRECONDITION when every copy is on another host."""
        return views.make_view("nanokv_cluster_view", self.handle, key, self.backend)

    def view_batch(self, keys):
        """Views of many keys (one lease request per kvd and 64 keys): a
        list of ObjectView or NanoKVError."""
        return views.make_views("nanokv_cluster_view_batch", self.handle, keys, self.backend)
