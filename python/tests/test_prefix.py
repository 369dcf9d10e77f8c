"""nanokv.PrefixCache against a real kvd's object store, on the host backend:
its keys are the SHA-256 chain computed here independently (so they are the
same in every process, run and machine), a prefix stored by one process is
found and loaded byte-exact by another, views read it in place, and hostile
inputs (no tokens, a billion, ids beyond int32, planes that do not match the
layout) are refused with errors naming them; on the cluster, a prefix one
node's engine stored on another host is loaded byte-exact through a client
of the other node. Device memory is a KV tensor's pages, as on a GPU."""
import ctypes
import hashlib
import os
import struct
import subprocess
import sys
import textwrap
import unittest

from kvd_process import PAGE, KvdTestCase
from test_cluster import ClusterCase

LAYERS, PLANES, TOKEN_BYTES, CHUNK = 2, 4, 256, 16
SPACE = dict(model="llama", dtype="bf16", layout="thd", salt="tenant-a")


def pattern(size, seed):
    return bytes((i * 131 + seed * 7 + (i >> 9)) & 0xFF for i in range(size))


def chain(tokens, space=SPACE, chunk=CHUNK, layers=LAYERS, planes_per_layer=2, token_bytes=TOKEN_BYTES):
    """The key chain as docs/ARCHITECTURE.md specifies it, in plain Python."""
    def field(s):
        b = s.encode()
        return struct.pack("<I", len(b)) + b
    h = hashlib.sha256(b"nanokv.prefix.v1\0" + b"".join(field(space[k]) for k in ("model", "dtype", "layout", "salt"))
                       + struct.pack("<IIIQ", chunk, layers, planes_per_layer, token_bytes)).digest()
    keys = []
    for c in range(len(tokens) // chunk):
        h = hashlib.sha256(h + b"".join(struct.pack("<i", t) for t in tokens[c * chunk:(c + 1) * chunk])).digest()
        keys.append(h.hex())
    return keys


# The writer process: its own KV tensor, a prompt's K/V in it, stored.
WRITER = textwrap.dedent("""
    import ctypes, sys
    import nanokv
    ipc, n = sys.argv[1], int(sys.argv[2])
    client = nanokv.Client(ipc_name=ipc, tenant="writer")
    kv = client.tensor(2 << 20)
    kv.grow(1)
    plane_bytes = n * {token_bytes}
    planes = []
    for p in range({planes}):
        data = bytes((i * 131 + p * 7 + (i >> 9)) & 0xFF for i in range(plane_bytes))
        client.copy_to_device(kv.data_ptr + p * plane_bytes, data)
        planes.append(memoryview((ctypes.c_uint8 * plane_bytes).from_address(kv.data_ptr + p * plane_bytes)))
    with nanokv.Objects(ipc_name=ipc) as store:
        cache = nanokv.PrefixCache(store, layers={layers}, token_bytes={token_bytes}, chunk_tokens={chunk},
                                   **{space!r})
        print(cache.store(list(range(1000, 1000 + n)), planes))
    kv.close()
    client.close()
""").format(token_bytes=TOKEN_BYTES, planes=PLANES, layers=LAYERS, chunk=CHUNK, space=SPACE)


class PrefixCacheTest(KvdTestCase):
    EXTRA_CONFIG = f"object_store:\n  size: {8 * PAGE}\n"

    def setUp(self):
        super().setUp()
        import nanokv
        self.nanokv = nanokv
        self.store = nanokv.Objects(ipc_name=self.ipc)
        self.addCleanup(self.store.close)
        self.client = self.attach("py-prefix")
        self.kv = self.client.tensor(2 * PAGE)
        self.kv.grow(1)
        self.client.fill(self.kv.data_ptr, 0xEE, PAGE)

    def cache(self, **overrides):
        options = dict(SPACE, layers=LAYERS, token_bytes=TOKEN_BYTES, chunk_tokens=CHUNK)
        options.update(overrides)
        return self.nanokv.PrefixCache(self.store, **options)

    def planes(self, tokens):
        """PLANES token-major planes of `tokens` tokens in the KV tensor."""
        size = tokens * TOKEN_BYTES
        return [memoryview((ctypes.c_uint8 * size).from_address(self.kv.data_ptr + p * size)) for p in range(PLANES)]

    def assertFails(self, text, fn, *args, **kwargs):
        with self.assertRaises(self.nanokv.NanoKVError) as caught:
            fn(*args, **kwargs)
        self.assertEqual(caught.exception.code, self.nanokv.NanoKVError.INVALID_ARGUMENT, caught.exception.message)
        self.assertIn(text, caught.exception.message)

    def test_keys_are_the_chain_computed_independently(self):
        cache = self.cache()
        tokens = list(range(1000, 1050))
        want = chain(tokens)
        self.assertEqual(len(want), 3)
        for c, digest in enumerate(want):
            self.assertEqual(cache.object_key(tokens, c), f"kvc:{digest}")
        other = self.cache(salt="tenant-b")
        self.assertNotEqual(other.object_key(tokens, 0), cache.object_key(tokens, 0))
        self.assertEqual(other.object_key(tokens, 0), f"kvc:{chain(tokens, dict(SPACE, salt='tenant-b'))[0]}")

    def test_a_block_table_stores_what_planes_load_and_loads_into_blocks(self):
        # A paged engine: each (chunk, plane) a block of its own, shuffled in the tensor.
        part = CHUNK * TOKEN_BYTES
        tokens = list(range(5000, 5000 + 2 * CHUNK + 3))
        base = self.kv.data_ptr + (1 << 20)

        def table(offset, stride):
            return [memoryview((ctypes.c_uint8 * part).from_address(base + offset + ((i * stride) % 8) * part))
                    for i in range(2 * PLANES)]

        blocks = table(0, 3)
        for c in range(2):
            for p in range(PLANES):
                self.client.copy_to_device(ctypes.addressof(ctypes.c_uint8.from_buffer(blocks[c * PLANES + p])),
                                           pattern(2 * part, p)[c * part:(c + 1) * part])
        cache = self.cache()
        self.assertEqual(cache.store_blocks(tokens, blocks), 2)
        self.assertEqual(cache.lookup(tokens), 2 * CHUNK)
        into = self.planes(2 * CHUNK)
        self.assertEqual(cache.load(tokens, 2 * CHUNK, into), 2 * CHUNK)
        for p in range(PLANES):
            got = self.client.copy_to_host(self.kv.data_ptr + p * 2 * part, 2 * part)
            self.assertEqual(got, pattern(2 * part, p), f"plane {p}")
        other = table(8 * part, 5)
        self.assertEqual(cache.load_blocks(tokens, 2 * CHUNK, other), 2 * CHUNK)
        for c in range(2):
            for p in range(PLANES):
                got = bytes(other[c * PLANES + p])
                self.assertEqual(got, pattern(2 * part, p)[c * part:(c + 1) * part], f"chunk {c} plane {p}")
        self.assertFails("7 blocks given, 2 chunks of 4 planes need 8", cache.load_blocks, tokens, 2 * CHUNK,
                         other[:7])

    def test_a_prefix_stored_by_another_process_loads_byte_exact(self):
        n = 70  # four full chunks and a tail
        writer = subprocess.run([sys.executable, "-c", WRITER, self.ipc, str(n)], env=self.env,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(writer.returncode, 0, writer.stderr + self.kvd_log())
        self.assertEqual(writer.stdout.strip(), "4")
        cache = self.cache()
        # This process's prompt shares the first 50 tokens: three chunks.
        prompt = list(range(1000, 1050)) + [7] * 30
        self.assertEqual(cache.lookup(prompt), 48)
        self.assertEqual(self.cache(salt="tenant-b").lookup(prompt), 0)
        into = self.planes(80)
        self.assertEqual(cache.load(prompt, 48, into), 48)
        for p in range(PLANES):
            got = self.client.copy_to_host(self.kv.data_ptr + p * 80 * TOKEN_BYTES, 80 * TOKEN_BYTES)
            self.assertEqual(got[:48 * TOKEN_BYTES], pattern(n * TOKEN_BYTES, p)[:48 * TOKEN_BYTES], f"plane {p}")
            self.assertEqual(got[48 * TOKEN_BYTES:], b"\xee" * (32 * TOKEN_BYTES), f"plane {p}")
        # Views: the same bytes in place, read-only, a view per chunk with
        # its planes end to end.
        views = cache.views(prompt, 32)
        self.assertEqual(len(views), 2)
        part = CHUNK * TOKEN_BYTES
        for chunk, view in enumerate(views):
            self.assertEqual(view.nbytes, PLANES * part)
            data = ctypes.string_at(view.data_ptr, view.nbytes)
            for plane in range(PLANES):
                self.assertEqual(data[plane * part:(plane + 1) * part],
                                 pattern(n * TOKEN_BYTES, plane)[chunk * part:(chunk + 1) * part], f"plane {plane}")
            view.close()
        # This process stores its own new chunks, from the hit on.
        self.assertEqual(cache.store(prompt, into, start=48), 2)
        self.assertEqual(cache.lookup(prompt), 80)

    def test_hostile_inputs_are_refused(self):
        cache = self.cache()
        planes = self.planes(32)
        tokens = list(range(32))
        self.assertFails("no tokens", cache.lookup, [])
        self.assertFails("1000000000 tokens (at most 4194304)", cache.lookup, range(10**9))
        self.assertFails("1000000000 tokens", cache.store, range(10**9), planes)
        self.assertFails("int32", cache.lookup, [1 << 40])
        self.assertFails("3 planes given, the layout has 4", cache.store, tokens, planes[:3])
        self.assertFails("plane 0 holds 16 tokens, 32 needed", cache.store, tokens, [planes[0][:16 * TOKEN_BYTES]] +
                         planes[1:])
        self.assertFails("not a whole number of 16-token chunks", cache.load, tokens, 20, planes)
        self.assertFails("names no model", self.cache, model="")
        self.assertFails("chunk_tokens 0", self.cache, chunk_tokens=0)
        self.assertFails("chunk_tokens", self.cache, chunk_tokens=-1)
        with self.assertRaises(TypeError):
            self.nanokv.PrefixCache(object(), model="m", layers=1, token_bytes=1)
        self.assertEqual(cache.lookup(tokens), 0)

    def test_the_store_closes_its_prefix_caches(self):
        cache = self.cache()
        self.store.close()
        with self.assertRaises(ValueError):
            cache.lookup([1] * CHUNK)


class PrefixCacheClusterTest(ClusterCase):
    """The same API on the cluster: an engine on n0 stores its prompt's
    chunks onto n1 (another host, over UCX); a cache on n1's engine finds
    and loads them byte-exact."""
    HOSTS = ("py-host-0", "py-host-1")

    def test_two_nodes_share_a_prefix(self):
        import nanokv
        engine = nanokv.Client(ipc_name=f"{self.ipc}_n0", tenant="py-prefix-cluster")
        self.addCleanup(engine.close)
        kv = engine.tensor(2 * PAGE)
        kv.grow(1)
        n = 40
        size = n * TOKEN_BYTES
        for p in range(PLANES):
            engine.copy_to_device(kv.data_ptr + p * size, pattern(size, p))
        planes = [memoryview((ctypes.c_uint8 * size).from_address(kv.data_ptr + p * size)) for p in range(PLANES)]
        options = dict(SPACE, layers=LAYERS, token_bytes=TOKEN_BYTES, chunk_tokens=CHUNK)
        writer = nanokv.PrefixCache(self.cluster, preferred_segment="n1", **options)
        tokens = list(range(1000, 1000 + n))
        self.assertEqual(writer.store(tokens, planes), 2)
        where = self.cluster.get_location(writer.object_key(tokens, 1))
        self.assertEqual([r.node_id for r in where.replicas], ["n1"])
        reader_cluster = nanokv.Cluster(masters=[self.address], node_id="n1", ipc_name=f"{self.ipc}_n1",
                                        backend="host", host_id=self.HOSTS[1])
        self.addCleanup(reader_cluster.close)
        reader = nanokv.PrefixCache(reader_cluster, **options)
        self.assertEqual(reader.lookup(tokens + [1, 2, 3]), 32)
        # Into the second half of the tensor (device memory of this process on n0's kvd).
        into = [memoryview((ctypes.c_uint8 * size).from_address(kv.data_ptr + (PLANES + p) * size))
                for p in range(PLANES)]
        self.assertEqual(reader.load(tokens, 32, into), 32)
        for p in range(PLANES):
            got = engine.copy_to_host(kv.data_ptr + (PLANES + p) * size, 32 * TOKEN_BYTES)
            self.assertEqual(got, pattern(size, p)[:32 * TOKEN_BYTES], f"plane {p}")


if __name__ == "__main__":
    unittest.main()
