"""nanokv.Client against a real kvd: attach (kwargs and environment),
geometry, grant/share/return, limits, errors as NanoKVError."""
import os
import shutil
import subprocess
import sys
import time
import unittest

from kvd_process import PAGE, KvdTestCase

import nanokv
from nanokv import NanoKVError


class ClientTest(KvdTestCase):
    def test_the_library_keeps_quiet_on_stdout(self):
        # An engine's stdout is often a data channel (issue 15 item 8):
        # libkv's log lines ("attached to kvd") go to stderr.
        script = ("import nanokv\n"
                  "c = nanokv.Client.from_env()\n"
                  "print('DATA', c.tenant)\n"
                  "c.close()\n")
        done = subprocess.run([sys.executable, "-c", script], env=dict(self.env, NANOKV_TENANT="quiet"),
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, "DATA quiet\n")
        self.assertIn("attached to kvd", done.stderr)

    def test_geometry(self):
        c = self.attach("py-geo", "g")
        self.assertEqual(c.backend, "host")
        self.assertEqual(c.tenant, "py-geo")
        self.assertEqual(c.page_bytes, PAGE)
        self.assertEqual(c.limit_bytes, self.PAGES * PAGE)
        self.assertTrue(c.connected)
        self.assertEqual(c.devices, [nanokv.DeviceGeometry(0, PAGE, self.PAGES)])
        self.assertGreater(c.tenant_id, 0)
        self.assertEqual(c.pending_reclaim_pages, 0)

    def test_grant_return_and_limits(self):
        c = self.attach("py-pages")
        ids = c.grant(3)
        self.assertEqual(len(set(ids)), 3)
        with self.assertRaises(NanoKVError) as e:
            c.grant(self.PAGES)
        self.assertEqual(e.exception.code, NanoKVError.RESOURCE_EXHAUSTED)
        self.assertEqual(e.exception.code_name, "ResourceExhausted")
        self.assertIn("ResourceExhausted", e.exception.message)
        c.return_pages(ids)
        with self.assertRaises(NanoKVError):
            c.return_pages(ids[:1])  # not held any more
        self.assertEqual(c.set_limit(2 * PAGE), 2 * PAGE)
        with self.assertRaises(NanoKVError) as e:
            c.grant(3)
        self.assertEqual(e.exception.code, NanoKVError.RESOURCE_EXHAUSTED)
        with self.assertRaises(NanoKVError) as e:
            c.grant(1, device=5)
        self.assertEqual(e.exception.code, NanoKVError.INVALID_ARGUMENT)

    def test_share_needs_the_same_group(self):
        a = self.attach("py-a", "g1")
        b = self.attach("py-b", "g1")
        stranger = self.attach("py-c", "g2")
        ids = a.grant(2)
        b.share(ids)
        with self.assertRaises(NanoKVError) as e:
            stranger.share(ids)
        self.assertEqual(e.exception.code, NanoKVError.PERMISSION_DENIED)

    def test_ints_out_of_range_are_errors_never_truncated(self):
        # Issue 19 item 13: share([2**33]) used to share page 0.
        a = self.attach("py-range-a", "g1")
        b = self.attach("py-range-b", "g1")
        ids = a.grant(1)
        for bad in ([2**33 + ids[0]], [-1], [ids[0], 2**32]):
            with self.assertRaises(NanoKVError) as e:
                b.share(bad)
            self.assertEqual(e.exception.code, NanoKVError.INVALID_ARGUMENT)
            self.assertIn("out of range", e.exception.message)
        with self.assertRaises(NanoKVError) as e:
            b.return_pages([ids[0] + 2**32])
        self.assertIn("page id 0", e.exception.message)
        with self.assertRaises(NanoKVError):
            a.grant(1, device=2**32)
        with self.assertRaises(NanoKVError):
            a.grant(2**32 + 1)
        with self.assertRaises(NanoKVError):
            a.set_limit(-1)
        with self.assertRaises(NanoKVError):
            a.fill(0, 256, 1)
        with self.assertRaises(NanoKVError) as e:
            a.copy_to_host(2**64, 1)
        self.assertIn("src", e.exception.message)
        with self.assertRaises(NanoKVError):
            a.cache(layers=2**32, kv_heads=1, head_dim=64)
        with self.assertRaises(NanoKVError):
            self.attach("py-range-c", "g1", limit_bytes=-1)
        with self.assertRaises(NanoKVError):
            b.return_pages(ids)  # b never became a holder: nothing was shared
        a.return_pages(ids)

    def test_attach_from_env(self):
        saved = dict(os.environ)
        try:
            os.environ.update(ENABLE_NANOKV="1", NANOKV_IPC_NAME=self.ipc, NANOKV_TENANT="py-env",
                              NANOKV_LIMIT="4MiB")
            with nanokv.Client.from_env() as c:
                self.assertEqual(c.tenant, "py-env")
                self.assertEqual(c.limit_bytes, 2 * PAGE)
            self.assertRaises(ValueError, lambda: c.page_bytes)  # closed
            os.environ["ENABLE_NANOKV"] = "0"
            with self.assertRaises(NanoKVError) as e:
                nanokv.Client.from_env()
            self.assertEqual(e.exception.code, NanoKVError.NOT_FOUND)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def test_attach_errors(self):
        with self.assertRaises(NanoKVError) as e:
            nanokv.Client(ipc_name="nobody_listens_" + self.ipc, tenant="x")
        self.assertEqual(e.exception.code, NanoKVError.UNAVAILABLE)
        with self.assertRaises(NanoKVError) as e:
            nanokv.Client(ipc_name=self.ipc, expect_page_bytes=4 << 20)
        self.assertEqual(e.exception.code, NanoKVError.INVALID_ARGUMENT)

    def test_close_is_idempotent_and_closes_children(self):
        c = self.attach("py-close")
        t = c.tensor(4 * PAGE)
        t.grow(2)
        c.close()
        c.close()
        self.assertRaises(ValueError, lambda: t.handle)  # closed with its client

    def test_closed_objects_say_which_is_closed(self):
        c = self.attach("py-closed")
        with c.tensor(PAGE) as t, c.cache(layers=1, kv_heads=1, head_dim=64, block_size=16,
                                         dtype="float16", num_blocks=16) as cache:
            pass
        for obj, name in ((t, "tensor"), (cache, "cache")):
            with self.assertRaises(ValueError) as e:
                obj.handle
            self.assertEqual(str(e.exception), f"nanokv: the {name} is closed")
        c.close()
        with self.assertRaises(ValueError) as e:
            c.handle
        self.assertEqual(str(e.exception), "nanokv: the client is closed")

    def test_a_tensor_dropped_open_gives_its_pages_back(self):
        c = self.attach("py-drop")
        t = c.tensor(self.PAGES * PAGE)
        t.grow(self.PAGES)
        with self.assertRaises(NanoKVError):
            c.grant(1)  # the tensor holds every page the limit allows
        del t  # __del__ destroys it: its client is still open
        self.assertEqual(len(c.grant(self.PAGES)), self.PAGES)


if __name__ == "__main__":
    unittest.main()


class RefusalTest(KvdTestCase):
    """A refusal at connect reaches Python as its own error, naming the cause
    and kvd's config key (issue 16), never as a protocol error."""
    EXTRA_CONFIG = "max_connections: 1\nsocket_mode: \"0666\"\n"

    def test_a_full_kvd_says_which_limit(self):
        self.attach("py-first")
        with self.assertRaises(NanoKVError) as e:
            nanokv.Client(ipc_name=self.ipc, tenant="py-second")
        self.assertEqual(e.exception.code, NanoKVError.RESOURCE_EXHAUSTED)
        self.assertIn("its most (max_connections in kvd's config", e.exception.message)
        self.assertNotIn("request id 0", e.exception.message)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                         "needs root and setpriv, to attach as nobody")
    def test_a_uid_not_allowed_is_told_which_keys_allow_it(self):
        os.chmod(self.dir, 0o755)  # nobody reaches the socket; kvd says no, not the mode
        script = ("import nanokv\n"
                  "try:\n"
                  f"    nanokv.Client(ipc_name={self.ipc!r}, tenant='py-intruder')\n"
                  "except nanokv.NanoKVError as e:\n"
                  "    print(e.code_name, e.message)\n")
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              sys.executable, "-c", script],
                             env=self.env, capture_output=True, text=True, timeout=60)
        self.assertIn("PermissionDenied", out.stdout, out.stderr)
        self.assertIn("uid 65534 (gid 65534) may not connect to this kvd", out.stdout)
        self.assertIn("allowed_uids or allowed_gids", out.stdout)



class AttachRefusalTest(KvdTestCase):
    """Each refusal at attach reaches Python as its own error naming its cause
    and, where there is one, kvd's config key (issue 16 items 3 and 4)."""
    EXTRA_CONFIG = "max_connections_per_process: 2\n"

    def attach_eventually(self, tenant):
        # kvd may still count a refused attach's connection for a moment.
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.attach(tenant)
            except NanoKVError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def refusal(self, code, **kwargs):
        # Once kvd no longer counts the connection of the refusal before
        # (max_connections_per_process is 2), unless that is the refusal asked.
        deadline = time.monotonic() + 10
        while True:
            with self.assertRaises(NanoKVError) as e:
                nanokv.Client(ipc_name=self.ipc, **kwargs)
            per_process = "max_connections_per_process" in e.exception.message
            if code == NanoKVError.RESOURCE_EXHAUSTED or not per_process or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self.assertEqual(e.exception.code, code, e.exception.message)
        self.assertNotIn("request id 0", e.exception.message)
        return e.exception.message

    def test_each_refusal_at_attach_names_its_cause(self):
        self.attach_eventually("py-first")
        self.assertIn("a tenant named 'py-first' is already attached",
                      self.refusal(NanoKVError.ALREADY_EXISTS, tenant="py-first"))
        self.assertIn("kvd does not serve device 5 (it serves 0: devices in kvd's config)",
                      self.refusal(NanoKVError.NOT_FOUND, tenant="py-far", devices=[5]))
        self.attach_eventually("py-second")
        self.assertIn("its most (max_connections_per_process in kvd's config)",
                      self.refusal(NanoKVError.RESOURCE_EXHAUSTED, tenant="py-third"))


class TenantTableTest(KvdTestCase):
    """Tenant 257 is refused naming the segment's table (issue 16 item 4)."""
    EXTRA_CONFIG = "max_connections_per_process: 300\n"

    def test_tenant_257_is_refused_naming_the_table(self):
        for i in range(256):
            self.attach(f"py-t{i}")
        with self.assertRaises(NanoKVError) as e:
            nanokv.Client(ipc_name=self.ipc, tenant="py-t256")
        self.assertEqual(e.exception.code, NanoKVError.RESOURCE_EXHAUSTED)
        self.assertIn("kvd has 256 tenants attached, the most its state segment's tenant table "
                      "holds (256", e.exception.message)


class OutOfFdsTest(KvdTestCase):
    """A kvd out of file descriptors still tells a Python engine why, naming
    the limit and LimitNOFILE= (issue 16 item 3)."""

    def test_an_engine_kvd_has_no_fd_for_reads_why(self):
        import resource
        self.attach("py-warm-up").close()  # kvd's lazily made fds exist before counting
        pid = self.kvd.pid
        old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        # Room for none: the next accept has no fd.
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (len(os.listdir(f"/proc/{pid}/fd")), old[1]))
        try:
            refused = None
            for i in range(8):  # kvd's fds may shift by one meanwhile: keep any served
                try:
                    self.attach(f"py-short-{i}")
                except NanoKVError as e:
                    refused = e
                    break
            self.assertIsNotNone(refused, "kvd served every engine")
            self.assertEqual(refused.code, NanoKVError.RESOURCE_EXHAUSTED, refused.message)
            self.assertIn("kvd is out of file descriptors", refused.message)
            self.assertIn("LimitNOFILE=", refused.message)
            self.assertIn("max_connections in kvd's config", refused.message)
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
