"""nanokv.Objects with torch tensors in and out. On the host backend the
tensors are CPU tensors over a KV tensor's pages (device memory there, as
cuda memory is on a GPU; torch.frombuffer, no copy); with
NANOKV_TEST_BACKEND=cuda (scripts/gpu-check.sh) kvd runs on the GPU and the
tensors are ordinary cuda tensors, moved by kernels with no copy through the
host. Skips, saying why, where torch (or, for cuda, a GPU torch sees) is
missing."""
import ctypes
import os
import unittest

from kvd_process import PAGE, KvdTestCase

try:
    import torch
except ImportError:
    torch = None

BACKEND = os.environ.get("NANOKV_TEST_BACKEND", "host")


@unittest.skipIf(torch is None, "torch is not installed")
class TorchObjectsTest(KvdTestCase):
    EXTRA_CONFIG = f"object_store:\n  size: {8 * PAGE}\n"
    BACKEND = BACKEND

    def setUp(self):
        if BACKEND == "cuda" and not torch.cuda.is_available():
            self.skipTest("NANOKV_TEST_BACKEND=cuda but torch sees no GPU")
        super().setUp()
        import nanokv
        self.nanokv = nanokv
        self.store = nanokv.Objects(ipc_name=self.ipc)
        self.addCleanup(self.store.close)
        self.device = torch.device("cuda:0" if BACKEND == "cuda" else "cpu")
        if BACKEND == "host":
            # Device memory on the host backend: a KV tensor's pages, handed
            # out from the start (8-byte aligned) as CPU tensors over them.
            self.client = self.attach("py-torch-objects")
            self.pages = self.client.tensor(4 * PAGE)
            self.pages.grow(4)
            self.next_free = 0

    def empty(self, shape, dtype):
        if BACKEND != "host":
            return torch.zeros(shape, dtype=dtype, device=self.device)
        count = 1
        for extent in shape:
            count *= extent
        nbytes = count * torch.tensor([], dtype=dtype).element_size()
        assert self.next_free + nbytes <= self.pages.nbytes, "the test's device memory is used up"
        memory = (ctypes.c_uint8 * nbytes).from_address(self.pages.data_ptr + self.next_free)
        self.next_free = (self.next_free + nbytes + 7) // 8 * 8
        return torch.frombuffer(memory, dtype=dtype, count=count).view(shape).zero_()

    def tensor(self, shape, dtype, seed):
        g = torch.Generator().manual_seed(seed)
        t = self.empty(shape, dtype)
        t.copy_(torch.randint(-1000, 1000, shape, generator=g).to(dtype))
        return t

    def test_round_trip_byte_exact(self):
        if BACKEND == "cuda":
            self.assertTrue(self.store.uses_kernels)
        for n, dtype in enumerate((torch.float16, torch.bfloat16, torch.float32, torch.int64, torch.uint8)):
            src = self.tensor((3, 200, 129), dtype, n)  # not a whole number of pages
            key = f"torch:{n}"
            self.store.put_from_device(key, src)
            out = self.empty(src.shape, dtype)
            self.assertEqual(self.store.get_to_device(key, out), src.numel() * src.element_size())
            self.assertTrue(torch.equal(src, out), dtype)  # whole numbers: no NaN to compare
            self.store.remove(key)

    def test_refusals(self):
        E = self.nanokv.NanoKVError
        src = self.tensor((64, 64), torch.float32, 7)
        with self.assertRaises(E) as caught:
            self.store.put_from_device("torch:t", src.t())
        self.assertIn("not contiguous", caught.exception.message)
        self.store.put_from_device("torch:t", src)
        short = self.empty((64 * 64 - 1,), torch.float32)
        with self.assertRaises(E) as caught:
            self.store.get_to_device("torch:t", short)
        self.assertEqual(caught.exception.code, E.INVALID_ARGUMENT)
        self.assertIn("holds 16384 bytes, the destination 16380", caught.exception.message)
        self.assertFalse(short.any().item())
        # A tensor of the wrong kind of device, then memory no device reaches.
        wrong = torch.zeros(64 * 64, dtype=torch.float32, device="cpu" if BACKEND == "cuda" else "meta")
        with self.assertRaises(E) as caught:
            self.store.get_to_device("torch:t", wrong)
        self.assertIn("given to a store on the", caught.exception.message)
        if BACKEND == "host":
            with self.assertRaises(E) as caught:
                self.store.get_to_device("torch:t", torch.zeros(64 * 64, dtype=torch.float32))
            self.assertIn("is not device memory", caught.exception.message)

    def test_batch_with_one_bad_item(self):
        E = self.nanokv.NanoKVError
        tensors = [self.tensor((n,), torch.int32, n) for n in (1024, PAGE // 4 + 5, 33)]
        self.store.put_from_device("torch:b1", tensors[1])
        put = self.store.put_from_device_batch([(f"torch:b{i}", t) for i, t in enumerate(tensors)])
        self.assertIsNone(put[0])
        self.assertEqual(put[1].code, E.ALREADY_EXISTS)
        self.assertIsNone(put[2])
        outs = [self.empty(t.shape, t.dtype) for t in tensors]
        got = self.store.get_to_device_batch([(f"torch:b{i}", o) for i, o in enumerate(outs)])
        self.assertEqual(got, [t.numel() * 4 for t in tensors])
        for t, o in zip(tensors, outs):
            self.assertTrue(torch.equal(t, o))

    def test_view_as_tensor_holds_the_lease(self):
        E = self.nanokv.NanoKVError
        src = self.tensor((4, 33, 64), torch.bfloat16, 11)
        self.store.put_from_device("torch:view", src)
        k = self.store.view("torch:view").as_tensor(torch.bfloat16, (4, 33, 64))
        self.assertEqual(k.device, src.device)
        self.assertTrue(torch.equal(k, src))  # in place: the store's pages
        with self.assertRaises(E) as caught:
            self.store.remove("torch:view")  # the view lives on in the tensor
        self.assertEqual(caught.exception.code, E.FAILED_PRECONDITION)
        if BACKEND == "cuda":
            torch.cuda.synchronize()
        del k
        import gc
        gc.collect()
        self.store.remove("torch:view")


if __name__ == "__main__":
    unittest.main()
