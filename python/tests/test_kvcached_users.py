"""What a user of kvcached or of docs/PYTHON.md meets first (issue 21, item
8): the documented grant/share lines run as written, an error says its code
once, a limit over the capacity is clamped with a warning, the kernels are
not "available" without a GPU, and KVCACHED_GPU_UTILIZATION is a share of
the engine's GPU, not of kvd's every device."""
import os
import warnings
import unittest

from kvd_process import PAGE, KvdTestCase

import nanokv
from nanokv import NanoKVError


class KvcachedUsersTest(KvdTestCase):
    EXTRA_CONFIG = "host_devices: 2\n"  # 16 pages on each of two devices

    def test_documented_grant_and_share(self):
        # docs/PYTHON.md, "The API", as written there.
        client = nanokv.Client(ipc_name=self.ipc, tenant="engine-0", group="g")
        peer = nanokv.Client(ipc_name=self.ipc, tenant="engine-1", group="g")
        with client, peer:
            ids = client.grant(4); peer.share(ids); peer.return_pages(ids); client.return_pages(ids)
            client.set_limit(2 << 20)
            self.assertEqual(client.limit_bytes, 2 << 20)

    def test_an_error_says_its_code_once(self):
        with nanokv.Client(ipc_name=self.ipc, tenant="py-once") as c:
            with self.assertRaises(NanoKVError) as e:
                c.grant(self.PAGES + 1)
            self.assertEqual(e.exception.code_name, "ResourceExhausted")
            self.assertEqual(e.exception.message.count("ResourceExhausted"), 1, e.exception.message)
            self.assertTrue(e.exception.message.startswith("ResourceExhausted: kvd: "), e.exception.message)

    def test_a_clamped_limit_warns(self):
        capacity = 2 * self.PAGES * PAGE
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with nanokv.Client(ipc_name=self.ipc, tenant="py-big", limit_bytes=10 * capacity) as c:
                self.assertEqual(c.limit_bytes, capacity)
                self.assertEqual(c.set_limit(capacity + PAGE), capacity)
        texts = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        self.assertEqual(len(texts), 2, texts)
        self.assertIn(f"kvd granted {capacity}", texts[0])
        self.assertIn("clamped to the capacity", self.kvd_log())

    def test_kernels_are_not_available_without_a_gpu(self):
        if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
            self.skipTest("this machine has an NVIDIA GPU")
        self.assertFalse(nanokv.kernels.available())

    def test_gpu_utilization_is_a_share_of_the_engines_gpu(self):
        saved = dict(os.environ)
        try:
            for name in ("ENABLE_NANOKV", "NANOKV_IPC_NAME", "NANOKV_LIMIT", "NANOKV_DEVICE"):
                os.environ.pop(name, None)
            os.environ.update(ENABLE_KVCACHED="1", KVCACHED_IPC_NAME=self.ipc,
                              KVCACHED_GPU_UTILIZATION="0.25", NANOKV_TENANT="py-kvcached")
            with nanokv.Client.from_env() as c:
                # A quarter of one device's 16 pages, not of both devices' 32.
                self.assertEqual(c.limit_bytes, 4 * PAGE)
        finally:
            os.environ.clear()
            os.environ.update(saved)


if __name__ == "__main__":
    unittest.main()
