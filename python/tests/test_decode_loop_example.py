"""examples/python/decode_loop.py on the host backend (PyTorch on the CPU, its
stand-in for the paged-append kernel): the paged K/V and attention match the
reference and a second process reads the same K/V. Skipped only where PyTorch
is missing (the example then prints a SKIP line itself, checked here); CI
installs Debian's python3-torch, so there it runs."""
import importlib.util
import os
import subprocess
import sys
import unittest

from kvd_process import REPO, kvd_binary

EXAMPLE = os.path.join(REPO, "examples", "python", "decode_loop.py")


class DecodeLoopExampleTest(unittest.TestCase):
    def test_host_backend(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        out = subprocess.run([sys.executable, EXAMPLE, "--backend", "host", "--kvd", kvd_binary(),
                              "--capacity", "256MiB", "--steps", "6", "--layers", "2",
                              "--num-blocks", "64", "--head-dim", "64"],
                             env=env, capture_output=True, text=True, timeout=240)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        if "decode_loop: SKIP:" in out.stdout:
            self.assertIn("PyTorch is not installed", out.stdout)
            self.assertIsNone(importlib.util.find_spec("torch"),
                              "torch imports here, yet the example skipped: " + out.stdout)
            self.skipTest(out.stdout.strip())
        self.assertIn("second process", out.stdout)
        self.assertTrue(out.stdout.rstrip().endswith("decode_loop: OK"), out.stdout)


if __name__ == "__main__":
    unittest.main()
