"""nanokv.Cluster against a real master and two kvds (nodes n0 and n1, each
a host of its own): put/get on this node and on another (its transfer agent,
over UCX), locations nearest first, replicas, plans, every batch form, and
device bytes by device pointer across nodes (host backend: a KV tensor's
pages mapped here)."""
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
# Helpers only (not the test case): the buffers Objects' device tests use.
from test_objects import ArrayAt, DeviceMemory, np, pattern

try:
    import torch
except ImportError:  # Debian's python3-torch (CPU) is a test dependency; skipped, said why
    torch = None

import nanokv
from nanokv import NanoKVError

# scripts/gpu-check.sh runs test_torch_tensors_cross_nodes with
# NANOKV_TEST_BACKEND=cuda (-k): kvds on the GPU, cuda tensors; the other
# tests reach device memory through ctypes, which is the host backend's only.
BACKEND = os.environ.get("NANOKV_TEST_BACKEND", "host")


class ClusterCase(unittest.TestCase):
    """A master and kvds n0 and n1, and self.cluster on n0 (no tests of its own)."""
    # master.host_id of n0 and n1 (None: the boot id, both on this machine)
    # and their data_address ("": no transfer agent); the client is on n0's host.
    HOSTS = (None, None)
    DATA_ADDRESS = "127.0.0.1:0"

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
                host_memory = f"host_device_memory: {48 * PAGE}\n" if BACKEND == "host" else ""
                f.write(f"backend: {BACKEND}\nipc_name: {self.ipc}_n{n}\nrun_dir: {self.dir}\n"
                        f"capacity: {24 * PAGE}\n{host_memory}reserve_pages: 2\n"
                        f"object_store:\n  size: {8 * PAGE}\n"
                        f"master:\n  addresses: [\"{self.address}\"]\n  node_id: n{n}\n  retry_interval: 100ms\n"
                        f"  data_address: \"{self.DATA_ADDRESS}\"\n" +
                        (f"  host_id: {self.HOSTS[n]}\n" if self.HOSTS[n] else ""))
            log = os.path.join(self.dir, f"n{n}.log")
            self._spawn([kvd_binary(), "--config", config], log)
            self._wait_log(master_log, rf"node n{n} is alive")
        self.cluster = nanokv.Cluster(masters=[self.address], node_id="n0", ipc_name=f"{self.ipc}_n0",
                                      backend=BACKEND, host_id=self.HOSTS[0])
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

    def assertFails(self, code, text, fn, *args):
        with self.assertRaises(NanoKVError) as caught:
            fn(*args)
        self.assertEqual(caught.exception.code, code, caught.exception.message)
        self.assertIn(text, caught.exception.message)


class ClusterTest(ClusterCase):
    # Each node a host of its own: n1's bytes move over UCX, and a plan's
    # payload there is not mapped here (test_cluster_highway.py: one host).
    HOSTS = ("py-host-0", "py-host-1")

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

    def test_device_bytes_cross_nodes_by_device_pointer(self):
        # Device memory on the host backend: a KV tensor's pages mapped here
        # (through n0's kvd), reached through each buffer kind Objects takes.
        engine = nanokv.Client(ipc_name=f"{self.ipc}_n0", tenant="py-cluster-device")
        self.addCleanup(engine.close)
        src, dst = engine.tensor(2 * PAGE), engine.tensor(2 * PAGE)
        src.grow(2)
        dst.grow(2)
        self.assertEqual(self.cluster.backend, "host")
        data = pattern(3 * PAGE // 2 + 17, 5)  # spans two store pages
        n = len(data)
        engine.copy_to_device(src.data_ptr, data)
        at, out = src.data_ptr, dst.data_ptr
        sources = {"ctypes": (ctypes.c_uint8 * n).from_address(at),
                   "memoryview": memoryview((ctypes.c_uint8 * n).from_address(at)),
                   "__array_interface__": ArrayAt(at, n)}
        destinations = {"ctypes": lambda size: (ctypes.c_uint8 * size).from_address(out),
                        "memoryview": lambda size: memoryview((ctypes.c_uint8 * size).from_address(out)),
                        "__array_interface__": lambda size: ArrayAt(out, size)}
        if np is not None:
            sources["numpy"] = src.view("uint8", shape=(n,))
            destinations["numpy"] = lambda size: dst.view("uint8", shape=(size,))
        for kind, source in sources.items():
            key = f"py:dev:{kind}"
            self.cluster.put_from_device(key, source, preferred_segment="n1")
            self.assertEqual([r.node_id for r in self.cluster.get_location(key).replicas], ["n1"])
            for into, make in destinations.items():
                engine.fill(out, 0, 2 * PAGE)
                # Room to spare: the start is written, the rest left as it was.
                self.assertEqual(self.cluster.get_to_device(key, make(n + 100)), n)
                self.assertEqual(engine.copy_to_host(out, n + 100), data + bytes(100), f"{kind} -> {into}")
            self.assertEqual(self.cluster.get(key), data)  # host and device calls read the same object
        # One byte short: refused, nothing written.
        engine.fill(out, 0xAB, 2 * PAGE)
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "of room", self.cluster.get_to_device, "py:dev:ctypes",
                         ArrayAt(out, n - 1))
        self.assertEqual(engine.copy_to_host(out, 2 * PAGE), b"\xab" * (2 * PAGE))

    def test_slab_puts_land_on_this_node(self):
        engine = nanokv.Client(ipc_name=f"{self.ipc}_n0", tenant="py-cluster-slabs")
        self.addCleanup(engine.close)
        src = engine.tensor(PAGE)
        src.grow(1)
        data = pattern(5000, 9)
        engine.copy_to_device(src.data_ptr, data)
        self.cluster.use_slabs(0, payload_bytes=PAGE, header_slots=16, ring_records=16)
        # The same by segment (this node here; another node of this host's alike).
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "<node>/<device>", self.cluster.use_slabs_on, "n0")
        self.assertFails(NanoKVError.NOT_FOUND, "no node n9", self.cluster.use_slabs_on, "n9/0")
        self.cluster.use_slabs_on("n0/0", payload_bytes=PAGE, header_slots=16, ring_records=16)
        for i in range(4):
            self.cluster.put_from_device(f"py:slab:{i}", ArrayAt(src.data_ptr, len(data)))
        self.cluster.flush_slab_puts()
        for i in range(4):
            key = f"py:slab:{i}"
            deadline = time.monotonic() + 10
            while True:  # the node's next event batch tells the master
                try:
                    replicas = self.cluster.get_location(key).replicas
                    break
                except NanoKVError as e:
                    if e.code != NanoKVError.NOT_FOUND or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            self.assertEqual([r.node_id for r in replicas], ["n0"])
            self.assertEqual(self.cluster.get(key), data)

    def test_bad_device_buffers_are_refused(self):
        engine = nanokv.Client(ipc_name=f"{self.ipc}_n0", tenant="py-cluster-bad")
        self.addCleanup(engine.close)
        dst = engine.tensor(PAGE)
        dst.grow(1)
        self.cluster.put("py:dev:small", b"x" * 100, preferred_segment="n1")
        host = bytearray(4096)
        # Host memory no device reaches: the backend refuses it, as a GPU would fault; nothing stored.
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "is not device memory", self.cluster.put_from_device,
                         "py:dev:host", host, "n1")
        self.assertFails(NanoKVError.NOT_FOUND, "", self.cluster.get_location, "py:dev:host")
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "is not device memory", self.cluster.get_to_device,
                         "py:dev:small", host)
        self.assertEqual(host, bytearray(4096))
        # What _buffers refuses before the library is called, as for Objects.
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "device memory (__cuda_array_interface__) given to a store "
                         "on the host backend", self.cluster.put_from_device, "py:dev:cai", DeviceMemory(64))
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "neither a tensor nor a buffer",
                         self.cluster.put_from_device, "py:dev:int", 42)
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "is read-only", self.cluster.get_to_device,
                         "py:dev:small", bytes(4096))
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "not contiguous", self.cluster.get_to_device,
                         "py:dev:small", ArrayAt(dst.data_ptr, 200, step=2))
        self.assertFails(NanoKVError.NOT_FOUND, "", self.cluster.get_to_device, "py:dev:absent",
                         ArrayAt(dst.data_ptr, 16))
        self.cluster.close()
        with self.assertRaises(ValueError):
            self.cluster.put_from_device("k", ArrayAt(dst.data_ptr, 16))

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_torch_tensors_cross_nodes(self):
        count = 3 * 200 * 129  # not a whole number of pages
        if BACKEND == "cuda":
            if not torch.cuda.is_available():
                self.skipTest("NANOKV_TEST_BACKEND=cuda but torch sees no GPU")
            src = torch.zeros(count, dtype=torch.bfloat16, device="cuda:0")
            out = torch.zeros(count, dtype=torch.bfloat16, device="cuda:0")
        else:
            # CPU tensors over a KV tensor's pages: device memory on the host
            # backend, as cuda tensors are on a GPU (torch.frombuffer, no copy).
            engine = nanokv.Client(ipc_name=f"{self.ipc}_n0", tenant="py-cluster-torch")
            self.addCleanup(engine.close)
            pages = engine.tensor(2 * PAGE)
            pages.grow(2)
            src = torch.frombuffer((ctypes.c_uint8 * (2 * count)).from_address(pages.data_ptr),
                                   dtype=torch.bfloat16, count=count)
            out = torch.frombuffer((ctypes.c_uint8 * (2 * count)).from_address(pages.data_ptr + PAGE),
                                   dtype=torch.bfloat16, count=count).zero_()
        src.copy_(torch.randint(-1000, 1000, (count,), generator=torch.Generator().manual_seed(3)).to(torch.bfloat16))
        self.assertEqual(self.cluster.backend, BACKEND)
        self.cluster.put_from_device("py:torch", src.view(3, 200, 129), preferred_segment="n1")
        self.assertEqual(self.cluster.get_to_device("py:torch", out), 2 * count)
        self.assertTrue(torch.equal(src, out))
        host_tensor = "is not device memory" if BACKEND == "host" else "a tensor on cpu given"
        self.assertFails(NanoKVError.INVALID_ARGUMENT, host_tensor, self.cluster.get_to_device,
                         "py:torch", torch.zeros(count, dtype=torch.bfloat16))
        self.assertFails(NanoKVError.INVALID_ARGUMENT, "not contiguous", self.cluster.put_from_device,
                         "py:torch:t", src.view(3, 200, 129).transpose(0, 2))


if __name__ == "__main__":
    unittest.main()
