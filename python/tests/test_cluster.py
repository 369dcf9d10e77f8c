"""nanokv.Cluster against a real master and two kvds (nodes n0 and n1):
put/get on this node and on another (its transfer agent, over UCX), locations
nearest first, replicas, plans and every batch form."""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from kvd_process import PAGE, kvd_binary

import nanokv
from nanokv import NanoKVError


class ClusterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="nanokv_pycl_")
        self.procs = []
        self.addCleanup(self._stop)
        self.ipc = f"pycl_{os.getpid()}_{id(self) & 0xffff:x}"
        # The local kvd's socket is in the test's run directory.
        self._old_run_dir = os.environ.get("NANOKV_RUN_DIR")
        os.environ["NANOKV_RUN_DIR"] = self.dir
        # The data path between nodes over loopback TCP (tests/integration/cluster_processes.h says why).
        os.environ.setdefault("UCX_TLS", "tcp")
        master_log = os.path.join(self.dir, "master.log")
        self.master = self._spawn([kvd_binary(), "--role", "master", "--listen", "127.0.0.1:0",
                                   "--rebuild-window", "0", "--id", "pym"], master_log)
        self.address = self._wait_log(master_log, r"serving on (\S+)")
        for n in range(2):
            config = os.path.join(self.dir, f"n{n}.yaml")
            with open(config, "w") as f:
                f.write(f"backend: host\nipc_name: {self.ipc}_n{n}\nrun_dir: {self.dir}\n"
                        f"capacity: {24 * PAGE}\nhost_device_memory: {48 * PAGE}\nreserve_pages: 2\n"
                        f"object_store:\n  size: {8 * PAGE}\n"
                        f"master:\n  addresses: [\"{self.address}\"]\n  node_id: n{n}\n  retry_interval: 100ms\n"
                        f"  data_address: 127.0.0.1:0\n")
            log = os.path.join(self.dir, f"n{n}.log")
            self._spawn([kvd_binary(), "--config", config], log)
            self._wait_log(master_log, rf"node n{n} is alive")
        self.cluster = nanokv.Cluster(masters=[self.address], node_id="n0", ipc_name=f"{self.ipc}_n0",
                                      backend="host")
        self.addCleanup(self.cluster.close)

    def _spawn(self, argv, log_path):
        with open(log_path, "w") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def _wait_log(self, path, pattern):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(path) as f:
                m = re.search(pattern, f.read())
            if m:
                return m.group(1) if m.groups() else m.group(0)
            time.sleep(0.01)
        with open(path) as f:
            self.fail(f"{path} never said {pattern}:\n{f.read()[-3000:]}")

    def _stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._old_run_dir is None:
            os.environ.pop("NANOKV_RUN_DIR", None)
        else:
            os.environ["NANOKV_RUN_DIR"] = self._old_run_dir

    def test_put_get_locate_remove_on_this_node(self):
        data = os.urandom(3 * PAGE + 11)
        self.cluster.put("py:1", data, preferred_segment="n0")
        self.assertEqual(self.cluster.get("py:1"), data)
        where = self.cluster.get_location("py:1")
        self.assertEqual(where.bytes_total, len(data))
        self.assertEqual([r.node_id for r in where.replicas], ["n0"])
        self.assertTrue(where.replicas[0].local)
        self.assertEqual(where.replicas[0].device_uuid, "host-0")
        small = b"tiny"
        self.cluster.put("py:small", small, preferred_segment="n0")
        self.assertEqual(self.cluster.get("py:small"), small)
        self.cluster.remove("py:1")
        with self.assertRaises(NanoKVError) as e:
            self.cluster.get_location("py:1")
        self.assertEqual(e.exception.code, NanoKVError.NOT_FOUND)

    def test_another_node_moves_bytes(self):
        data = bytes(range(256)) * 4000 + b"tail"
        self.cluster.put("py:remote", data, preferred_segment="n1")
        self.assertEqual([r.node_id for r in self.cluster.get_location("py:remote").replicas], ["n1"])
        self.assertEqual(self.cluster.get("py:remote"), data)

    def test_plans_replicas_and_errors(self):
        plan = self.cluster.open_for_write("py:plan", 4096, preferred_segment="n0", replica_num=2)
        replicas = plan.replicas
        self.assertEqual(sorted(r.node_id for r in replicas), ["n0", "n1"])
        mine = [i for i, r in enumerate(replicas) if r.local][0]
        ctypes.memmove(plan.payload(mine), b"\x07" * 4096, 4096)
        with self.assertRaises(NanoKVError) as e:
            plan.payload(1 - mine)
        self.assertEqual(e.exception.code, NanoKVError.UNIMPLEMENTED)
        plan.commit()
        self.assertEqual(len(self.cluster.get_location("py:plan").replicas), 2)
        self.assertEqual(self.cluster.get("py:plan"), b"\x07" * 4096)
        with self.assertRaises(NanoKVError) as e:
            self.cluster.open_for_write("py:plan", 10)
        self.assertEqual(e.exception.code, NanoKVError.ALREADY_EXISTS)
        again = self.cluster.open_for_write("py:revoked", 10)
        again.revoke()
        with self.assertRaises(NanoKVError) as e:
            self.cluster.put("bad key", b"x")
        self.assertEqual(e.exception.code, NanoKVError.INVALID_ARGUMENT)

    def test_batches(self):
        items = [(f"py:b{i}", os.urandom(100 + i)) for i in range(5)]
        self.assertEqual(self.cluster.put_batch(items, preferred_segment="n0"), [None] * 5)
        got = self.cluster.get_batch([k for k, _ in items] + ["py:none"])
        self.assertEqual(got[:5], [d for _, d in items])
        self.assertEqual(got[5].code, NanoKVError.NOT_FOUND)
        located = self.cluster.get_location_batch(["py:b0", "py:none"])
        self.assertEqual(located[0].replicas[0].node_id, "n0")
        self.assertEqual(located[1].code, NanoKVError.NOT_FOUND)
        plans = self.cluster.open_batch([("py:o1", 10), ("py:o2", 20), ("bad key", 1)])
        self.assertEqual(plans[2].code, NanoKVError.INVALID_ARGUMENT)
        self.assertEqual(self.cluster.commit_batch(plans[:1]), [None])
        self.assertEqual(self.cluster.revoke_batch(plans[1:2]), [None])
        removed = self.cluster.remove_batch(["py:b0", "py:o1", "py:o2"])
        self.assertEqual(removed[:2], [None, None])
        self.assertEqual(removed[2].code, NanoKVError.NOT_FOUND)


if __name__ == "__main__":
    unittest.main()
