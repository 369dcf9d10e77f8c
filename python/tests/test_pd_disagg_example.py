"""examples/python/pd_disagg.py on the host backend with its tiny model: for
each topology (one kvd serving two devices; two kvds of one host) a prefill
process puts a prompt's K/V with one batch (once stream-ordered, once
through slabs of the decode node's store), a
decode process gets them with one batch (and once through views), and the
decode's tokens and K/V bytes equal one process doing both. Skipped only
where PyTorch is missing (the example prints a SKIP line itself, checked
here); CI installs Debian's python3-torch, so there it runs."""
import importlib.util
import json
import os
import subprocess
import sys
import unittest

from kvd_process import REPO, kvd_binary

EXAMPLE = os.path.join(REPO, "examples", "python", "pd_disagg.py")


class PdDisaggExampleTest(unittest.TestCase):
    def test_host_backend_both_topologies(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        out = subprocess.run([sys.executable, EXAMPLE, "--backend", "host", "--kvd", kvd_binary(), "--model", "tiny",
                              "--topology", "both", "--put", "all", "--read", "both", "--prompt-tokens", "40",
                              "--new-tokens", "6"],
                             env=env, capture_output=True, text=True, timeout=280)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        if "pd_disagg: SKIP:" in out.stdout:
            self.assertIn("PyTorch is not installed", out.stdout)
            self.assertIsNone(importlib.util.find_spec("torch"),
                              "torch imports here, yet the example skipped: " + out.stdout)
            self.skipTest(out.stdout.strip())
        self.assertTrue(out.stdout.rstrip().endswith("pd_disagg: OK"), out.stdout + out.stderr)
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        requests = [r for r in rows if "topology" in r]
        self.assertEqual(sorted((r["topology"], r["put"], r["read"]) for r in requests),
                         [("one-node", "async", "view"), ("one-node", "batch", "get"), ("one-node", "slab", "get"),
                          ("two-nodes", "async", "view"), ("two-nodes", "batch", "get"),
                          ("two-nodes", "slab", "get")])
        for r in requests:
            self.assertTrue(r["tokens_match"] and r["kv_bytes_match"], r)
            self.assertEqual(r["objects"], 8)  # 4 layers, K and V
            self.assertGreater(r["kv_bytes"], 0)
        self.assertEqual(len(rows[-1]["reference_tokens"]), 6)


if __name__ == "__main__":
    unittest.main()
