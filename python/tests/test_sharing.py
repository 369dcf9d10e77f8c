"""Two Python processes of one group share pages: this process writes a
pattern into its tensor's pages; a child process (attached from the
environment) maps the same page ids and reads the same bytes back, then
writes its own answer that this process sees in place."""
import json
import subprocess
import sys
import unittest

import numpy as np

from kvd_process import PAGE, KvdTestCase

READER = r"""
import json, sys
import numpy as np
import nanokv
ids = json.loads(sys.argv[1])
with nanokv.Client.from_env() as client:
    tensor = client.tensor(len(ids) * client.page_bytes)
    tensor.map_shared(0, ids)
    data = tensor.view("uint32")
    print(json.dumps({"tenant": client.tenant, "sum": int(data.astype(np.uint64).sum()),
                      "head": data[:4].tolist(), "tail": data[-4:].tolist()}))
    data[1] = 0xC0FFEE                      # visible to the writer without a copy
    tensor.close()
"""


class SharingTest(KvdTestCase):
    def test_second_process_reads_the_same_bytes(self):
        writer = self.attach("py-writer", group="shared")
        tensor = writer.tensor(3 * PAGE)
        tensor.grow(3)
        words = tensor.view("uint32")
        # In uint64, then narrowed: numpy 2 refuses a Python int past uint32 in uint32 arithmetic.
        words[:] = (np.arange(words.size, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32)
        expected = {"sum": int(words.astype(np.uint64).sum()), "head": words[:4].tolist(),
                    "tail": words[-4:].tolist()}
        env = dict(self.env, NANOKV_TENANT="py-reader", NANOKV_GROUP="shared")
        out = subprocess.run([sys.executable, "-c", READER, json.dumps(tensor.page_ids())],
                             env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertEqual(got["tenant"], "py-reader")
        self.assertEqual({k: got[k] for k in expected}, expected)
        self.assertEqual(int(words[1]), 0xC0FFEE)

    def test_another_group_cannot_map_them(self):
        writer = self.attach("py-owner", group="mine")
        tensor = writer.tensor(PAGE)
        tensor.grow(1)
        env = dict(self.env, NANOKV_TENANT="py-thief", NANOKV_GROUP="theirs")
        code = ("import json, sys, nanokv\n"
                "c = nanokv.Client.from_env()\n"
                "t = c.tensor(c.page_bytes)\n"
                "try:\n"
                "    t.map_shared(0, json.loads(sys.argv[1]))\n"
                "except nanokv.NanoKVError as e:\n"
                "    print(e.code_name)\n")
        out = subprocess.run([sys.executable, "-c", code, json.dumps(tensor.page_ids())],
                             env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip().splitlines()[-1], "PermissionDenied")


if __name__ == "__main__":
    unittest.main()
