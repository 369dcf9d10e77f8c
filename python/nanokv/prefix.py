"""PrefixCache: a token-prefix KV cache over the node's object store
(nanokv.Objects) or the cluster (nanokv.Cluster), the same API on either
(nanokv::PrefixCache over the C ABI; docs/PYTHON.md, "Prefix reuse").

    store = nanokv.Objects()
    cache = nanokv.PrefixCache(store, model="llama-3-8b", dtype="bf16", layout="thd",
                               salt=tenant, layers=32, token_bytes=8 * 128 * 2)
    hit = cache.lookup(tokens)              # leading tokens stored (whole chunks)
    cache.load(tokens, hit, planes)         # into the engine's K/V
    ... prefill tokens[hit:] ...
    cache.store(tokens, planes, start=hit)  # the new full chunks, every plane

`planes`: layers * planes_per_layer buffers (layer-major: layer 0's K, its
V, layer 1's K, ...), each token-major (token t at byte t * token_bytes) and
contiguous: cuda tensors (or __cuda_array_interface__) on cuda, KV-tensor
memory on the host backend, as Objects' device calls take. A buffer's size
says how many tokens it holds. Keys are a SHA-256 chain over the tokens in a
namespace (model, dtype, layout, salt and the layout's sizes): two models or
tenants never share K/V by accident.
"""
import array
import ctypes

from nanokv import _buffers, _lib, views
from nanokv._handle import OwnedHandle
from nanokv._lib import call, fit
from nanokv.cluster import Cluster, _enc, _finish
from nanokv.errors import NanoKVError

MAX_TOKENS = 1 << 22  # kMaxPrefixTokens: a longer prompt is refused before it is copied


def _tokens(tokens):
    """A ctypes int32 array of the tokens and their count; a list longer
    than MAX_TOKENS is refused on its length, before anything is copied."""
    if hasattr(tokens, "tolist") and not isinstance(tokens, (list, tuple)):
        tokens = tokens.tolist()  # a torch tensor or numpy array of ids
    n = len(tokens)
    if n > MAX_TOKENS:
        raise NanoKVError(NanoKVError.INVALID_ARGUMENT,
                          f"InvalidArgument: prefix cache: {n} tokens (at most {MAX_TOKENS})")
    try:
        ids = array.array("i", tokens if n else [0])  # checks each id fits int32 (ctypes would truncate)
    except (TypeError, OverflowError) as e:
        raise NanoKVError(NanoKVError.INVALID_ARGUMENT,
                          f"InvalidArgument: prefix cache: tokens must be int32 ids ({e})") from None
    return (ctypes.c_int32 * len(ids)).from_buffer(ids), n


class PrefixCache(OwnedHandle):
    """nanokv::PrefixCache on `store` (nanokv.Objects or nanokv.Cluster),
    which closes it when it closes."""

    _NAME = "prefix cache"
    _DESTROY = "nanokv_prefix_close"

    def __init__(self, store, model, layers, token_bytes, planes_per_layer=2, dtype="", layout="", salt="",
                 chunk_tokens=256, preferred_device=-1, preferred_segment=None, replica_num=1, staging_bytes=0):
        from nanokv.objects import Objects  # objects imports cluster; prefix sits above both
        o = _lib.PrefixOptions()
        call("nanokv_prefix_options_init", ctypes.byref(o))
        o.model, o.dtype, o.layout, o.salt = _enc(model), _enc(dtype), _enc(layout), _enc(salt)
        o.chunk_tokens = fit(chunk_tokens, ctypes.c_uint32, "chunk_tokens")
        o.layers = fit(layers, ctypes.c_uint32, "layers")
        o.planes_per_layer = fit(planes_per_layer, ctypes.c_uint32, "planes_per_layer")
        o.token_bytes = fit(token_bytes, ctypes.c_uint64, "token_bytes")
        o.preferred_device = fit(preferred_device, ctypes.c_int, "preferred_device")
        o.preferred_segment = _enc(preferred_segment)
        o.replica_num = fit(replica_num, ctypes.c_uint32, "replica_num")
        o.staging_bytes = fit(staging_bytes, ctypes.c_uint64, "staging_bytes")  # 0: 256 MiB
        if isinstance(store, Objects):
            opener = "nanokv_prefix_open_objects"
        elif isinstance(store, Cluster):
            opener = "nanokv_prefix_open_cluster"
        else:
            raise TypeError(f"nanokv: a PrefixCache runs on nanokv.Objects or nanokv.Cluster, not {type(store).__name__}")
        handle = ctypes.c_void_p()
        call(opener, store.handle, ctypes.byref(o), ctypes.byref(handle))
        self._client = store
        self._own(handle)
        self.backend = store.backend
        self.chunk_tokens = o.chunk_tokens
        self.token_bytes = o.token_bytes
        self.planes = o.layers * o.planes_per_layer
        self._on_cluster = opener == "nanokv_prefix_open_cluster"

    def object_key(self, tokens, chunk):
        """The object key of chunk `chunk` of `tokens` (every plane of it)."""
        array, n = _tokens(tokens)
        out = ctypes.create_string_buffer(128)
        call("nanokv_prefix_object_key", self.handle, array, n, chunk, out, len(out))
        return out.value.decode()

    def lookup(self, tokens):
        """How many leading tokens are stored (whole chunks, every plane)."""
        array, n = _tokens(tokens)
        hit = ctypes.c_uint64()
        call("nanokv_prefix_lookup", self.handle, array, n, ctypes.byref(hit))
        return hit.value

    def _queue(self, buffers, stream):
        """The stream the call's copies go on: `stream`, else the buffers' one
        stream (0 when they name none or several)."""
        streams = {_buffers.stream_handle(stream)} if stream is not None else {b.stream for b in buffers if b.stream}
        # The cluster's copies to other hosts run outside any stream: what
        # was queued on the buffers must be done before they start.
        if self._on_cluster:
            for s in streams:
                _finish(self.backend, s)
        queue = streams.pop() if len(streams) == 1 else 0
        return _lib.address(queue or 0, "stream")

    def _planes(self, planes, verb, writable, stream):
        buffers = [_buffers.resolve(p, self.backend, f"prefix {verb} plane {i}", writable)
                   for i, p in enumerate(planes)]
        out = (_lib.PrefixPlane * max(len(buffers), 1))()
        for i, b in enumerate(buffers):
            out[i].base = b.ptr
            out[i].capacity_tokens = b.nbytes // self.token_bytes
        return buffers, out, len(buffers), self._queue(buffers, stream)

    def store(self, tokens, planes, start=0, stream=None):
        """Stores the full chunks from chunk start // chunk_tokens on (the
        ones before were loaded from here), every plane, as one batch.
        Returns the chunks written; chunks already stored stand as they are."""
        array, n = _tokens(tokens)
        keep, kv, count, s = self._planes(planes, "store", False, stream)
        written = ctypes.c_uint64()
        call("nanokv_prefix_store", self.handle, array, n, kv, count, start, s, ctypes.byref(written))
        del keep
        return written.value

    def load(self, tokens, n, planes, stream=None):
        """Loads the first n tokens' chunks (n from lookup) into `planes`, as
        one batch; returns the tokens loaded (fewer where a chunk went since)."""
        array, count = _tokens(tokens)
        keep, into, planes_n, s = self._planes(planes, "load", True, stream)
        loaded = ctypes.c_uint64()
        call("nanokv_prefix_load", self.handle, array, count, n, into, planes_n, s, ctypes.byref(loaded))
        del keep
        return loaded.value

    def _blocks(self, blocks, verb, writable, stream):
        buffers = [_buffers.resolve(b, self.backend, f"prefix {verb} block {i}", writable)
                   for i, b in enumerate(blocks)]
        part = self.chunk_tokens * self.token_bytes
        for i, b in enumerate(buffers):
            if b.nbytes < part:
                raise NanoKVError(NanoKVError.INVALID_ARGUMENT,
                                  f"InvalidArgument: prefix {verb}: block {i} holds {b.nbytes} bytes, a chunk of a "
                                  f"plane is {part}")
        out = (ctypes.c_void_p * max(len(buffers), 1))(*[b.ptr for b in buffers])
        return buffers, out, len(buffers), self._queue(buffers, stream)

    def store_blocks(self, tokens, blocks, start=0, stream=None):
        """store() for a paged engine: blocks[c * planes + p] holds chunk c of
        plane p (chunk_tokens tokens of it), for every full chunk of tokens."""
        array, n = _tokens(tokens)
        keep, table, count, s = self._blocks(blocks, "store", False, stream)
        written = ctypes.c_uint64()
        call("nanokv_prefix_store_blocks", self.handle, array, n, table, count, start, s, ctypes.byref(written))
        del keep
        return written.value

    def load_blocks(self, tokens, n, blocks, stream=None):
        """load() into a paged engine's blocks: blocks[c * planes + p] for the
        first n // chunk_tokens chunks."""
        array, count = _tokens(tokens)
        keep, table, blocks_n, s = self._blocks(blocks, "load", True, stream)
        loaded = ctypes.c_uint64()
        call("nanokv_prefix_load_blocks", self.handle, array, count, n, table, blocks_n, s, ctypes.byref(loaded))
        del keep
        return loaded.value

    def views(self, tokens, n):
        """The first n tokens' chunks read in place (ObjectView, read-only,
        each under a lease until closed): one per chunk, plane p of it at
        byte p * chunk_tokens * token_bytes."""
        array, count = _tokens(tokens)
        room = fit(n, ctypes.c_uint64, "n") // self.chunk_tokens
        handles = (ctypes.c_void_p * max(room, 1))()
        made = ctypes.c_size_t()
        call("nanokv_prefix_views", self.handle, array, count, n, handles, room, ctypes.byref(made))
        return [views.ObjectView(ctypes.c_void_p(handles[i]), self.backend,
                                 f"prefix chunk {i}")
                for i in range(made.value)]

    def __repr__(self):
        return (f"nanokv.PrefixCache({self.planes} planes of {self.token_bytes} bytes a token, "
                f"chunks of {self.chunk_tokens}, {self.backend})")
