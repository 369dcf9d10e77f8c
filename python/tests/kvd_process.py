"""A real kvd process per test case, on the host backend, with its own run
directory and config (as tests/integration/kvd_fixture.h does for C++).
The kvd binary comes from $NANOKV_KVD_BINARY (CMake passes it to ctest), else
the newest <repo>/build*/entry/kvd."""
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

PAGE = 2 << 20


def kvd_binary():
    path = os.environ.get("NANOKV_KVD_BINARY")
    if path:
        return path
    built = sorted(glob.glob(os.path.join(REPO, "build*", "entry", "kvd")),
                   key=lambda p: -os.path.getmtime(p))
    if not built:
        raise unittest.SkipTest("no kvd binary: set NANOKV_KVD_BINARY or build the kvd target")
    return built[0]


class KvdTestCase(unittest.TestCase):
    """Starts kvd in setUp (pages of 2 MiB, `PAGES` of them) and stops it with
    SIGTERM after the test's clients closed (cleanups run last-in first-out),
    checking it exits 0. self.env holds the variables a
    child process needs to attach from the environment."""
    PAGES = 16
    EXTRA_CONFIG = ""  # more lines of kvd's YAML, for a case that needs them
    BACKEND = "host"   # a case that can run on a GPU may take $NANOKV_TEST_BACKEND

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="nanokv_py_")
        self.ipc = f"py_{os.getpid()}_{id(self) & 0xffff:x}"
        config = os.path.join(self.dir, "kvd.yaml")
        with open(config, "w") as f:
            f.write(f"ipc_name: {self.ipc}\n"
                    f"backend: {self.BACKEND}\n"
                    f"capacity: {self.PAGES * PAGE}\n" +
                    (f"host_device_memory: {4 * self.PAGES * PAGE}\n" if self.BACKEND == "host" else "") +
                    "reserve_pages: 2\n"
                    f"run_dir: {self.dir}\n"
                    "log_level: debug\n"
                    "check_invariants: true\n" + self.EXTRA_CONFIG)
        self.addCleanup(self._stop_kvd)
        self._old_run_dir = os.environ.get("NANOKV_RUN_DIR")
        os.environ["NANOKV_RUN_DIR"] = self.dir
        self.log_path = os.path.join(self.dir, "kvd.log")
        with open(self.log_path, "w") as log:
            self.kvd = subprocess.Popen([kvd_binary(), "--config", config], stdout=log,
                                        stderr=subprocess.STDOUT)
        socket = os.path.join(self.dir, self.ipc + ".sock")
        deadline = time.monotonic() + 20
        while not os.path.exists(socket):
            if self.kvd.poll() is not None or time.monotonic() > deadline:
                self.fail(f"kvd did not come up:\n{self.kvd_log()}")
            time.sleep(0.01)
        self.env = dict(os.environ, ENABLE_NANOKV="1", NANOKV_IPC_NAME=self.ipc,
                        NANOKV_RUN_DIR=self.dir, PYTHONPATH=os.path.join(REPO, "python"))

    def _stop_kvd(self):
        if getattr(self, "kvd", None) is not None and self.kvd.poll() is None:
            self.kvd.send_signal(signal.SIGTERM)
            try:
                code = self.kvd.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kvd.kill()
                self.kvd.wait()
                code = "killed (no exit on SIGTERM)"
            self.assertEqual(code, 0, self.kvd_log())
        if self._old_run_dir is None:
            os.environ.pop("NANOKV_RUN_DIR", None)
        else:
            os.environ["NANOKV_RUN_DIR"] = self._old_run_dir
        shutil.rmtree(self.dir, ignore_errors=True)

    def kvd_log(self):
        with open(self.log_path) as f:
            return f.read()[-4000:]

    def attach(self, tenant, group="", **kwargs):
        import nanokv
        client = nanokv.Client(ipc_name=self.ipc, tenant=tenant, group=group, **kwargs)
        self.addCleanup(client.close)
        return client
