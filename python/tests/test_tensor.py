"""nanokv.KVTensor against a real kvd on the host backend: mapping, page ids,
zero-copy numpy and torch views over the mapped pages, copies, bad input."""
import unittest

import numpy as np

try:
    import torch
except ImportError:  # the torch view test skips; CI installs python3-torch
    torch = None

from kvd_process import PAGE, KvdTestCase

from nanokv import NanoKVError


class TensorTest(KvdTestCase):
    def test_map_grow_shrink_and_page_ids(self):
        c = self.attach("py-tensor")
        t = c.tensor(8 * PAGE - 1)
        self.assertEqual((t.page_count, t.page_bytes, t.device), (8, PAGE, 0))
        self.assertEqual(t.mapped_pages, 0)
        t.grow(2)
        t.map(5, 1)
        self.assertEqual((t.mapped_pages, t.mapped_prefix), (3, 2))
        ids = t.page_ids()
        self.assertEqual(len(ids), 8)
        self.assertTrue(all(ids[i] is not None for i in (0, 1, 5)))
        self.assertTrue(all(ids[i] is None for i in (2, 3, 4, 6, 7)))
        t.shrink(1)
        self.assertEqual(t.mapped_prefix, 1)
        t.unmap(0, 8)
        self.assertEqual(t.mapped_pages, 0)
        with self.assertRaises(NanoKVError) as e:
            t.map(7, 2)
        self.assertEqual(e.exception.code, NanoKVError.INVALID_ARGUMENT)
        t.close()
        t.close()
        self.assertRaises(ValueError, t.grow, 1)

    def test_numpy_view_is_the_mapped_memory(self):
        c = self.attach("py-view")
        t = c.tensor(4 * PAGE)
        t.grow(2)
        view = t.view("float16", shape=(2, PAGE // 2))
        self.assertIsInstance(view, np.ndarray)
        self.assertEqual(view.__array_interface__["data"][0], t.data_ptr)  # no copy
        view[0, :8] = np.arange(8, dtype=np.float16)
        view[1, -1] = 3.5
        # The backend's copy reads what numpy wrote, and numpy sees the backend's writes.
        raw = c.copy_to_host(t.data_ptr, 16)
        self.assertEqual(np.frombuffer(raw, np.float16).tolist(), list(range(8)))
        self.assertEqual(np.frombuffer(c.copy_to_host(t.data_ptr + 2 * PAGE - 2, 2), np.float16)[0], 3.5)
        c.copy_to_device(t.data_ptr + PAGE, bytes([7]) * 64)
        self.assertTrue((t.page_view(1)[:64] == 7).all())
        c.fill(t.data_ptr + PAGE, 0xCD, PAGE)
        self.assertTrue((t.page_view(1) == 0xCD).all())
        with self.assertRaises(ValueError):
            t.view("float32", shape=(PAGE,), offset=3 * PAGE)  # leaves the range
        with self.assertRaises(ValueError):
            t.view("complex128")
        with self.assertRaises(NanoKVError):
            c.copy_to_host(t.data_ptr + 2 * PAGE, 16)  # page 2 is not mapped

    @unittest.skipIf(torch is None, "PyTorch is not installed (Debian: python3-torch)")
    def test_torch_view_is_the_mapped_memory(self):
        c = self.attach("py-torch")
        t = c.tensor(2 * PAGE)
        t.grow(2)
        halves = torch.from_numpy(t.view("float16", shape=(2, PAGE // 2)))
        self.assertEqual(halves.data_ptr(), t.data_ptr)  # no copy
        # torch writes, the backend's copy reads...
        halves[1, :4] = torch.tensor([1.5, -2.0, 3.0, 0.25], dtype=torch.float16)
        self.assertEqual(np.frombuffer(c.copy_to_host(t.data_ptr + PAGE, 8), np.float16).tolist(),
                         [1.5, -2.0, 3.0, 0.25])
        # ...and the backend writes, torch reads: bfloat16 reinterpreted from 16-bit
        # words (int16: torch.from_numpy refuses the uint16 of a "bfloat16" view).
        c.copy_to_device(t.data_ptr, torch.tensor([0.5, 8.0], dtype=torch.bfloat16).view(torch.int16)
                         .numpy().tobytes())
        words = torch.from_numpy(t.view("int16", shape=(PAGE,)))
        self.assertEqual(words[:2].view(torch.bfloat16).tolist(), [0.5, 8.0])
        self.assertEqual(halves[1, :4].sum().item(), 2.75)

    def test_tensor_limit_refusal_changes_nothing(self):
        c = self.attach("py-limit", limit_bytes=3 * PAGE)
        t = c.tensor(8 * PAGE)
        with self.assertRaises(NanoKVError) as e:
            t.grow(4)
        self.assertEqual(e.exception.code, NanoKVError.RESOURCE_EXHAUSTED)
        self.assertEqual(t.mapped_pages, 0)
        t.grow(3)
        self.assertEqual(t.mapped_pages, 3)


if __name__ == "__main__":
    unittest.main()
