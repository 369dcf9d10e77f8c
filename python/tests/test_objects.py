"""nanokv.Objects against a real kvd with an object store, on the host
backend: host and device bytes round trip byte-exact through every kind of
buffer the package takes, batches answer each item, and wrong sizes,
non-contiguous or read-only buffers, memory no device reaches, device
memory on a host store and a closed store are clear errors. Device memory is
what it is on a GPU: a KV tensor's pages mapped in this process (host pages
on the host backend), reached here through ctypes, memoryview and the array
interface (and numpy where installed)."""
import ctypes
import unittest

from kvd_process import PAGE, KvdTestCase

try:
    import numpy as np
except ImportError:  # Debian's python3-numpy is a test dependency; said, not hidden
    np = None


def pattern(size, seed):
    return bytes((i * 131 + seed * 7 + (i >> 9)) & 0xFF for i in range(size))


class DeviceMemory:
    """Memory announced by __cuda_array_interface__ (what cupy or numba hand
    over): a host store must refuse it rather than touch it."""

    def __init__(self, nbytes):
        self.__cuda_array_interface__ = {"version": 3, "shape": (nbytes,), "typestr": "|u1",
                                         "data": (0x7F0000000000, False), "strides": None}


class ArrayAt:
    """`count` bytes at `address` announced by __array_interface__ (numpy's
    protocol, which other array libraries speak too): `step` > 1 makes it
    strided, `readonly` marks it so."""

    def __init__(self, address, count, step=1, readonly=False):
        self.__array_interface__ = {"version": 3, "shape": (count,), "typestr": "|u1",
                                    "data": (address, readonly), "strides": None if step == 1 else (step,)}


class ObjectsTest(KvdTestCase):
    EXTRA_CONFIG = f"object_store:\n  size: {8 * PAGE}\n"

    def setUp(self):
        super().setUp()
        import nanokv
        self.nanokv = nanokv
        self.store = nanokv.Objects(ipc_name=self.ipc)
        self.addCleanup(self.store.close)
        # Device memory: two pages of a KV tensor for sources, two for destinations.
        self.client = self.attach("py-objects")
        self.src, self.dst = self.client.tensor(2 * PAGE), self.client.tensor(2 * PAGE)
        self.src.grow(2)
        self.dst.grow(2)

    def stage(self, data, offset=0):
        """`data` written at src + offset; its device address."""
        self.client.copy_to_device(self.src.data_ptr + offset, data)
        return self.src.data_ptr + offset

    def device_bytes(self, address, nbytes):
        return self.client.copy_to_host(address, nbytes)

    def zero_dst(self):
        self.client.fill(self.dst.data_ptr, 0, 2 * PAGE)

    def assertFails(self, code, text, fn, *args):
        with self.assertRaises(self.nanokv.NanoKVError) as caught:
            fn(*args)
        self.assertEqual(caught.exception.code, code, caught.exception.message)
        self.assertIn(text, caught.exception.message)

    def test_host_bytes_round_trip(self):
        E = self.nanokv.NanoKVError
        self.assertEqual(self.store.backend, "host")
        self.assertFalse(self.store.uses_kernels)
        small, large = pattern(1000, 1), pattern(300_000, 2)  # the second is over the get's first guess
        self.store.put("py:small", small)
        self.store.put("py:large", large)
        self.assertEqual(self.store.get("py:small"), small)
        self.assertEqual(self.store.get("py:large"), large)
        self.assertFails(E.ALREADY_EXISTS, "", self.store.put, "py:small", b"x")
        self.store.remove("py:small")
        self.assertFails(E.NOT_FOUND, "", self.store.get, "py:small")
        self.assertFails(E.NOT_FOUND, "", self.store.remove, "py:small")

    def test_device_round_trip_through_every_buffer_kind(self):
        data = pattern(3 * PAGE // 2 + 17, 3)  # spans two store pages
        n = len(data)
        at = self.stage(data)
        out = self.dst.data_ptr
        sources = {"ctypes": (ctypes.c_uint8 * n).from_address(at),
                   "memoryview": memoryview((ctypes.c_uint8 * n).from_address(at)),
                   "__array_interface__": ArrayAt(at, n)}
        destinations = {"ctypes": lambda size: (ctypes.c_uint8 * size).from_address(out),
                        "memoryview": lambda size: memoryview((ctypes.c_uint8 * size).from_address(out)),
                        "__array_interface__": lambda size: ArrayAt(out, size)}
        if np is not None:
            sources["numpy"] = self.src.view("uint8", shape=(n,))
            destinations["numpy"] = lambda size: self.dst.view("uint8", shape=(size,))
        for kind, src in sources.items():
            key = f"py:{kind}"
            self.store.put_from_device(key, src)
            for into, make in destinations.items():
                self.zero_dst()
                # Room to spare: the start is written, the rest left as it was.
                self.assertEqual(self.store.get_to_device(key, make(n + 100)), n)
                self.assertEqual(self.device_bytes(out, n + 100), data + bytes(100), f"{kind} -> {into}")
            self.assertEqual(self.store.get(key), data)  # host and device calls read the same object
            self.store.remove(key)

    def test_wrong_sizes_and_buffers_are_clear_errors(self):
        E = self.nanokv.NanoKVError
        data = pattern(4096, 4)
        self.store.put_from_device("py:sized", ArrayAt(self.stage(data), 4096))
        self.zero_dst()
        short = ArrayAt(self.dst.data_ptr, 4095)
        self.assertFails(E.INVALID_ARGUMENT, "holds 4096 bytes, the destination 4095",
                         self.store.get_to_device, "py:sized", short)
        self.assertEqual(self.device_bytes(self.dst.data_ptr, 4096), bytes(4096))  # nothing copied
        # Host memory no device reaches: the backend refuses it, as a GPU would fault.
        self.assertFails(E.INVALID_ARGUMENT, "is not device memory", self.store.put_from_device, "py:host",
                         bytearray(data))
        self.assertFails(E.INVALID_ARGUMENT, "is not device memory", self.store.get_to_device, "py:sized",
                         bytearray(4096))
        self.assertFails(E.NOT_FOUND, "", self.store.get, "py:host")  # nothing left behind
        self.assertFails(E.INVALID_ARGUMENT, "is read-only", self.store.get_to_device, "py:sized", bytes(4096))
        self.assertFails(E.INVALID_ARGUMENT, "an empty buffer", self.store.put_from_device, "py:empty", bytearray())
        self.assertFails(E.INVALID_ARGUMENT, "device memory (__cuda_array_interface__) given to a store "
                         "on the host backend", self.store.put_from_device, "py:dev", DeviceMemory(64))
        self.assertFails(E.INVALID_ARGUMENT, "neither a tensor nor a buffer",
                         self.store.put_from_device, "py:int", 42)
        self.assertFails(E.INVALID_ARGUMENT, "not contiguous", self.store.put_from_device, "py:strided",
                         ArrayAt(self.src.data_ptr, 2048, step=2))
        self.assertFails(E.INVALID_ARGUMENT, "not contiguous", self.store.get_to_device, "py:sized",
                         ArrayAt(self.dst.data_ptr, 8192, step=2))
        self.assertFails(E.INVALID_ARGUMENT, "read-only memory cannot be written", self.store.get_to_device,
                         "py:sized", ArrayAt(self.dst.data_ptr, 4096, readonly=True))
        self.assertFails(E.INVALID_ARGUMENT, "not contiguous", self.store.get_to_device, "py:sized",
                         memoryview((ctypes.c_uint8 * 8192).from_address(self.dst.data_ptr))[::2])
        if np is not None:
            self.assertFails(E.INVALID_ARGUMENT, "not contiguous", self.store.get_to_device, "py:sized",
                             self.dst.view("uint8", shape=(8192,))[::2])
        self.assertFails(E.NOT_FOUND, "", self.store.get_to_device, "py:absent", ArrayAt(self.dst.data_ptr, 16))

    def test_batches_with_one_bad_item(self):
        E = self.nanokv.NanoKVError
        datas = [pattern(n, 10 + i) for i, n in enumerate((4096, PAGE // 2, 777, 65539))]
        offsets = [0, 8192, PAGE // 2 + 16384, PAGE + 4096]
        srcs = [ArrayAt(self.stage(d, o), len(d)) for d, o in zip(datas, offsets)]
        self.store.put("py:b2", b"already here")
        put = self.store.put_from_device_batch([(f"py:b{i}", s) for i, s in enumerate(srcs)])
        self.assertIsNone(put[0])
        self.assertIsNone(put[1])
        self.assertEqual(put[2].code, E.ALREADY_EXISTS)
        self.assertIn("py:b2", put[2].message)
        self.assertIsNone(put[3])
        self.zero_dst()
        sizes = [len(d) for d in datas]
        sizes[1] -= 1  # one byte short
        outs = [ArrayAt(self.dst.data_ptr + o, s) for o, s in zip(offsets, sizes)]
        got = self.store.get_to_device_batch([(f"py:b{i}", outs[i]) for i in range(4)] +
                                             [("py:missing", ArrayAt(self.dst.data_ptr + PAGE, 8))])
        self.assertEqual(got[0], len(datas[0]))
        self.assertEqual(got[1].code, E.INVALID_ARGUMENT)
        self.assertIn("py:b1", got[1].message)
        self.assertEqual(got[2], len(b"already here"))
        self.assertEqual(got[3], len(datas[3]))
        self.assertEqual(got[4].code, E.NOT_FOUND)
        self.assertEqual(self.device_bytes(self.dst.data_ptr + offsets[0], len(datas[0])), datas[0])
        self.assertEqual(self.device_bytes(self.dst.data_ptr + offsets[3], len(datas[3])), datas[3])
        self.assertEqual(self.device_bytes(self.dst.data_ptr + offsets[2], 12), b"already here")
        self.assertEqual(self.device_bytes(self.dst.data_ptr + offsets[1], sizes[1]), bytes(sizes[1]))
        # Host-bytes batches over the same objects.
        read = self.store.get_batch(["py:b0", "py:b1", "py:missing"])
        self.assertEqual(read[0], datas[0])
        self.assertEqual(read[1], datas[1])  # over the batch's first buffer: fetched again at its size
        self.assertEqual(read[2].code, E.NOT_FOUND)
        removed = self.store.remove_batch(["py:b0", "py:b1", "py:b2", "py:b3", "py:missing"])
        self.assertEqual([r is None for r in removed], [True, True, True, True, False])
        self.assertEqual([r is None for r in self.store.put_batch([("py:h0", b"a"), ("py:h0", b"b")])],
                         [True, False])
        self.assertEqual(self.store.get("py:h0"), b"a")
        self.assertEqual(self.store.put_from_device_batch([]), [])

    def test_plans(self):
        data = pattern(100_000, 20)
        plan = self.store.open_for_write("py:plan", len(data))
        self.assertEqual(plan.info.state, "WRITING")
        self.assertEqual(plan.info.bytes_total, len(data))
        ctypes.memmove(plan.payload, data, len(data))
        plan.commit()
        plan.close()
        located = self.store.get_location("py:plan")
        self.assertEqual(located.info.state, "READY")
        self.assertEqual(located.info.tier, "gpu")
        self.assertEqual(ctypes.string_at(located.payload, len(data)), data)
        revoked = self.store.open_for_write("py:revoked", 64)
        revoked.revoke()
        self.assertFails(self.nanokv.NanoKVError.NOT_FOUND, "", self.store.get, "py:revoked")
        self.store.close()  # closes the plans still open on it first
        with self.assertRaisesRegex(ValueError, "the plan is closed"):
            located.payload

    def test_views_read_in_place_and_outlive_the_store(self):
        E = self.nanokv.NanoKVError
        data = pattern(PAGE + 999, 30)  # spans two store pages
        self.store.put("py:view", data)
        view = self.store.view("py:view")
        self.assertEqual((view.nbytes, view.device, view.backend), (len(data), 0, "host"))
        self.assertEqual(ctypes.string_at(view.data_ptr, len(data)), data)
        self.assertFails(E.FAILED_PRECONDITION, "", self.store.remove, "py:view")  # the view's lease
        if np is not None:
            array = np.asarray(view)
            self.assertIs(array.base, view)  # the array keeps the view, and its lease
            self.assertFalse(array.flags.writeable)
            self.assertEqual(array.tobytes(), data)
            del array  # before close() ends the lease
        views = self.store.view_batch(["py:view", "py:absent"])
        self.assertEqual(views[1].code, E.NOT_FOUND)
        self.store.close()  # the views stay
        self.assertEqual(ctypes.string_at(views[0].data_ptr, len(data)), data)
        self.nanokv.close_views([view, views[0], views[1], None])  # one request; views[1] is an error
        self.assertTrue(view.closed and views[0].closed)
        self.nanokv.close_views([view])  # closed already: nothing sent
        with self.nanokv.Objects(ipc_name=self.ipc) as store:
            store.remove("py:view")
            self.assertFails(E.NOT_FOUND, "", store.view, "py:view")

    def test_slab_puts_and_a_slab_for_a_kernel(self):
        E = self.nanokv.NanoKVError
        self.store.use_slabs(0, payload_bytes=PAGE, header_slots=16, ring_records=16)
        items = [pattern(5000 + 77 * i, 40 + i) for i in range(6)]
        offset = 0
        for i, data in enumerate(items):
            self.store.put_from_device(f"py:slab:{i}", ArrayAt(self.stage(data, offset), len(data)))
            offset += len(data)
        self.store.flush_slab_puts()
        for i, data in enumerate(items):
            self.assertEqual(self.store.get(f"py:slab:{i}"), data)
        # A slab for the producer's own kernel: where it lies and its shape.
        with self.store.acquire_slab(0, payload_bytes=PAGE, header_slots=4, ring_records=4) as slab:
            info = slab.info
            self.assertEqual((info.device, info.payload_bytes, info.header_slots, info.ring_records), (0, PAGE, 4, 4))
            self.assertTrue(info.payload and info.headers and info.cursor and info.ring)
            self.assertGreater(info.ttl_ms, 0)
        with self.assertRaisesRegex(ValueError, "the slab is closed"):
            slab.info
        self.assertEqual(self.nanokv.Slab.key_hash("abc"), 0x44BC2CF5AD770999)  # xxhash64, seed 0
        self.assertFails(E.INVALID_ARGUMENT, "", self.store.use_slabs, -1)

    def test_closed_store(self):
        self.store.close()
        self.store.close()  # twice is fine
        buffer = ArrayAt(self.src.data_ptr, 8)
        for call in (lambda: self.store.put("k", b"x"), lambda: self.store.get("k"),
                     lambda: self.store.put_from_device("k", buffer),
                     lambda: self.store.get_to_device("k", buffer),
                     lambda: self.store.get_to_device_batch([("k", buffer)]),
                     lambda: self.store.view("k")):
            with self.assertRaisesRegex(ValueError, "the object store is closed"):
                call()


class WithoutStoreTest(KvdTestCase):
    def test_a_kvd_without_a_store_is_named(self):
        import nanokv
        with self.assertRaises(nanokv.NanoKVError) as caught:
            nanokv.Objects(ipc_name=self.ipc)
        self.assertEqual(caught.exception.code, nanokv.NanoKVError.FAILED_PRECONDITION)
        self.assertIn("object_store.size", caught.exception.message)

    def test_no_kvd(self):
        import nanokv
        with self.assertRaises(nanokv.NanoKVError) as caught:
            nanokv.Objects(ipc_name=self.ipc + "_nobody", request_timeout_ms=2000)
        self.assertEqual(caught.exception.code, nanokv.NanoKVError.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
