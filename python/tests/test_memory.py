"""The zero-copy view builders, without kvd: __cuda_array_interface__ v3 as
consumers (torch, cupy, numba) read it, and numpy views over host memory."""
import ctypes
import unittest

import numpy as np

import kvd_process  # noqa: F401 (puts python/ on sys.path)
from nanokv import memory


class MemoryTest(unittest.TestCase):
    def test_cuda_array_interface(self):
        owner = object()
        arr = memory.view("cuda", 0x7f0000000000, (4, 2, 16, 64), "float16",
                          strides=(4096, 2048, 128, 2), owner=owner)
        cai = arr.__cuda_array_interface__
        self.assertEqual(cai["version"], 3)
        self.assertEqual(cai["shape"], (4, 2, 16, 64))
        self.assertEqual(cai["typestr"], "<f2")
        self.assertEqual(cai["data"], (0x7f0000000000, False))
        self.assertEqual(cai["strides"], (4096, 2048, 128, 2))
        self.assertIsNone(cai["stream"])
        self.assertIs(arr._owner, owner)
        self.assertEqual(memory.view("cuda", 1, (3,), "bfloat16").__cuda_array_interface__["typestr"],
                         "<u2")
        with self.assertRaises(ValueError):
            memory.view("cuda", 1, (3,), "complex64")
        with self.assertRaises(NotImplementedError):
            memory.view("hip", 1, (3,), "uint8")

    def test_host_view_shares_memory(self):
        buf = (ctypes.c_uint8 * 256)()
        arr = memory.view("host", ctypes.addressof(buf), (4, 8), "float32", owner=buf)
        arr[2, 3] = 2.5
        self.assertEqual(np.frombuffer(bytes(buf), np.float32)[2 * 8 + 3], 2.5)
        column = memory.view("host", ctypes.addressof(buf) + 3 * 4, (4,), "float32", strides=(32,))
        self.assertEqual(column.strides, (32,))
        self.assertEqual(column[2], 2.5)  # row 2, column 3 of the array above
        self.assertEqual(memory.view("host", ctypes.addressof(buf), (0, 4), "uint8").shape, (0, 4))


if __name__ == "__main__":
    unittest.main()
