"""The KV highway from Python (nanokv.Cluster's device batches, the
stream-ordered put, views) against a real master and two kvds, on the host
backend: device memory is a KV tensor's pages mapped here, reached through
ctypes, numpy and CPU torch tensors over them. Two nodes of one host
without transfer agents (only the path through n1's kvd socket and pages
carries bytes), and two hosts (UCX)."""
import ctypes
import gc
import unittest

from kvd_process import PAGE
from test_cluster import ClusterCase
from test_objects import ArrayAt, np, pattern

try:
    import torch
except ImportError:  # Debian's python3-torch (CPU) is a test dependency; skipped, said why
    torch = None

import nanokv
from nanokv import NanoKVError


class DeviceMemoryMixin:
    """Pages of a KV tensor through n0's kvd: sources at src, destinations
    at dst, 4 MiB each."""

    def make_device_memory(self):
        self.engine = nanokv.Client(ipc_name=f"{self.ipc}_n0", tenant="py-highway")
        self.addCleanup(self.engine.close)
        self.src_pages, self.dst_pages = self.engine.tensor(2 * PAGE), self.engine.tensor(2 * PAGE)
        self.src_pages.grow(2)
        self.dst_pages.grow(2)
        self.src, self.dst = self.src_pages.data_ptr, self.dst_pages.data_ptr
        self.engine.fill(self.dst, 0xEE, 2 * PAGE)

    def stage(self, count, size, seed):
        """`count` objects of `size` at src (object i: pattern(size, seed + i)); their buffers."""
        out = []
        for i in range(count):
            self.engine.copy_to_device(self.src + i * size, pattern(size, seed + i))
            out.append(ArrayAt(self.src + i * size, size))
        return out

    def torch_at(self, address, count, dtype):
        nbytes = count * torch.tensor([], dtype=dtype).element_size()
        return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=dtype, count=count)


class OneHostTest(ClusterCase, DeviceMemoryMixin):
    HOSTS = ("py-one-host", "py-one-host")
    DATA_ADDRESS = ""

    def setUp(self):
        super().setUp()
        self.make_device_memory()

    def test_batches_move_through_the_other_kvds_pages(self):
        count, size = 9, 100_003
        sources = self.stage(count, size, 3)
        keys = [f"hw:L{i}" for i in range(count)]
        self.assertEqual(self.cluster.put_from_device_batch(keys, sources, preferred_segment="n1"), [None] * count)
        where = self.cluster.get_location("hw:L0")
        self.assertEqual([(r.node_id, r.local, r.same_host) for r in where.replicas], [("n1", False, True)])
        outs = [ArrayAt(self.dst + i * size, size) for i in range(count)]
        self.assertEqual(self.cluster.get_to_device_batch(keys, outs), [size] * count)
        for i in range(count):
            self.assertEqual(self.engine.copy_to_host(self.dst + i * size, size), pattern(size, 3 + i), keys[i])
        # Pairs; one short of room, one absent: each answers alone, nothing copied for them.
        self.engine.fill(self.dst, 0xEE, 2 * PAGE)
        got = self.cluster.get_to_device_batch([("hw:L1", ArrayAt(self.dst, size)),
                                                ("hw:L2", ArrayAt(self.dst + size, size - 1)),
                                                ("hw:absent", ArrayAt(self.dst + 2 * size, size))])
        self.assertEqual(got[0], size)
        self.assertEqual((got[1].code, got[2].code), (NanoKVError.INVALID_ARGUMENT, NanoKVError.NOT_FOUND))
        self.assertIn("hw:L2", got[1].message)
        self.assertEqual(self.engine.copy_to_host(self.dst + size, size), b"\xee" * size)
        # One key twice: one stands, the other fails alone.
        twice = self.cluster.put_from_device_batch([("hw:twice", sources[0]), ("hw:twice", sources[1])],
                                                   preferred_segment="n1")
        self.assertEqual(sorted(t is None for t in twice), [False, True])
        self.assertEqual(self.cluster.put_from_device_batch([]), [])

    def test_refusals_name_the_fault(self):
        sources = self.stage(1, 64, 1)
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "2 keys and 1 buffers", self.cluster.put_from_device_batch,
                         ["a", "b"], sources)
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "is read-only", self.cluster.get_to_device_batch,
                         ["a"], [bytes(64)])
        host = bytearray(4096)  # memory no device reaches: the item refused, nothing stored
        put = self.cluster.put_from_device_batch([("hw:host", host)], preferred_segment="n1")
        self.assertEqual(put[0].code, NanoKVError.INVALID_ARGUMENT)
        self.assertIn("is not device memory", put[0].message)
        self.assertFails(NanoKVError.NOT_FOUND, "", self.cluster.get_location, "hw:host")
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "count is 0", self.cluster.put_from_device_async, [])

    def test_a_stream_ordered_put(self):
        count, size = 6, 70_001
        sources = self.stage(count, size, 20)
        keys = [f"async:{i}" for i in range(count)]
        pending = self.cluster.put_from_device_async(keys, sources, preferred_segment="n1")
        self.assertEqual(len(pending), count)
        self.assertIsNone(pending.event)  # the host backend copies during the call
        self.assertEqual(pending.wait(), [None] * count)
        self.assertTrue(pending.done())
        self.assertEqual(pending.wait(), [None] * count)  # asked again: the same answer
        pending.close()
        with self.assertRaises(ValueError):
            pending.wait()
        outs = [ArrayAt(self.dst + i * size, size) for i in range(count)]
        self.assertEqual(self.cluster.get_to_device_batch(keys, outs), [size] * count)
        self.assertEqual(self.engine.copy_to_host(self.dst + 5 * size, size), pattern(size, 25))
        # Left open: the cluster's close waits for it, then the batch is whole.
        more = self.cluster.put_from_device_async([(f"left:{i}", s) for i, s in enumerate(sources)],
                                                  preferred_segment="n1")
        self.cluster.close()
        with self.assertRaises(ValueError):  # closed with its cluster, after it finished
            more.wait()
        again = nanokv.Cluster(masters=[self.address], node_id="n0", ipc_name=f"{self.ipc}_n0", backend="host",
                               host_id=self.HOSTS[0])
        self.addCleanup(again.close)
        self.assertEqual(again.get_to_device_batch([f"left:{i}" for i in range(count)], outs), [size] * count)

    def test_views_read_in_place_and_hold_their_lease(self):
        size = 300_000
        sources = self.stage(2, size, 40)
        self.assertEqual(self.cluster.put_from_device_batch(["view:0", "view:1"], sources,
                                                            preferred_segment="n1"), [None, None])
        view = self.cluster.view("view:1")
        self.assertEqual((view.key, view.nbytes, len(view), view.device, view.backend),
                         ("view:1", size, size, 0, "host"))
        self.assertFalse(hasattr(view, "__cuda_array_interface__"))
        self.assertTrue(view.__array_interface__["data"][1], "read-only")
        self.assertEqual(ctypes.string_at(view.data_ptr, size), pattern(size, 41))
        self.assertFails(NanoKVError.FAILED_PRECONDITION, "", self.cluster.remove, "view:1")
        if np is not None:
            array = view.numpy("uint16", (size // 4, 2))
            self.assertFalse(array.flags.writeable)
            self.assertEqual(array.tobytes(), pattern(size, 41))
            with self.assertRaises(ValueError):
                array[0, 0] = 1
        with self.assertRaises(ValueError):
            view.numpy("float32", (7,))
        view.close()
        view.close()  # idempotent
        with self.assertRaises(ValueError):
            view.data_ptr
        self.cluster.remove("view:1")
        got = self.cluster.view_batch(["view:0", "view:absent"])
        self.assertEqual(got[1].code, NanoKVError.NOT_FOUND)
        with got[0] as v:
            self.assertEqual(ctypes.string_at(v.data_ptr, size), pattern(size, 40))
        self.cluster.remove("view:0")
        self.assertFails(NanoKVError.NOT_FOUND, "", self.cluster.view, "view:0")

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_torch_tensors_and_a_view_that_outlives_its_name(self):
        layers, count = 4, 2 * 64 * 96  # per layer: [2, 64, 96] float16
        g = torch.Generator().manual_seed(5)
        srcs = [self.torch_at(self.src + layer * count * 2, count, torch.float16) for layer in range(layers)]
        for s in srcs:
            s.copy_(torch.randint(-500, 500, (count,), generator=g).to(torch.float16))
        keys = [f"kv:L{layer}" for layer in range(layers)]
        self.assertEqual(self.cluster.put_from_device_batch(keys, [s.view(2, 64, 96) for s in srcs],
                                                            preferred_segment="n1"), [None] * layers)
        outs = [self.torch_at(self.dst + layer * count * 2, count, torch.float16) for layer in range(layers)]
        self.assertEqual(self.cluster.get_to_device_batch(keys, outs), [count * 2] * layers)
        for s, o in zip(srcs, outs):
            self.assertTrue(torch.equal(s, o))
        # A tensor made from a view keeps the view, and its lease, alive.
        k = self.cluster.view("kv:L2").as_tensor(torch.float16, (2, 64, 96))
        gc.collect()
        self.assertTrue(torch.equal(k, srcs[2].view(2, 64, 96)))
        self.assertEqual(k.device.type, "cpu")
        self.assertFails(NanoKVError.FAILED_PRECONDITION, "", self.cluster.remove, "kv:L2")
        flat = self.cluster.view("kv:L3").as_tensor("bfloat16")
        self.assertEqual(flat.shape, (count,))
        self.assertTrue(torch.equal(flat.view(torch.float16), srcs[3]))
        del k, flat
        gc.collect()
        self.cluster.remove("kv:L2")  # the lease ended with the tensor
        self.cluster.remove("kv:L3")
        with self.cluster.view("kv:L0") as v:
            with self.assertRaises(ValueError) as caught:
                v.as_tensor(torch.float16, (3, 3))
            self.assertIn("holds 24576 bytes", str(caught.exception))


class TwoHostsTest(ClusterCase, DeviceMemoryMixin):
    HOSTS = ("py-host-a", "py-host-b")

    def setUp(self):
        super().setUp()
        self.make_device_memory()

    def test_another_hosts_copies_move_over_ucx_and_are_not_viewed(self):
        count, size = 3, 500_001
        sources = self.stage(count, size, 60)
        keys = [f"far:{i}" for i in range(count)]
        self.assertEqual(self.cluster.put_from_device_batch(keys, sources, preferred_segment="n1"), [None] * count)
        self.assertFalse(self.cluster.get_location("far:0").replicas[0].same_host)
        outs = [ArrayAt(self.dst + i * size, size) for i in range(count)]
        self.assertEqual(self.cluster.get_to_device_batch(keys, outs), [size] * count)
        self.assertEqual(self.engine.copy_to_host(self.dst + 2 * size, size), pattern(size, 62))
        self.assertFails(NanoKVError.FAILED_PRECONDITION, "on another host", self.cluster.view, "far:0")
        got = self.cluster.view_batch(keys[:1])
        self.assertEqual(got[0].code, NanoKVError.FAILED_PRECONDITION)


if __name__ == "__main__":
    unittest.main()
