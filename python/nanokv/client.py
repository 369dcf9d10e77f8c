"""Client: a tenant of the node's kvd (nanokv::Client over the C ABI)."""
import ctypes
import warnings
import weakref
from collections import namedtuple

from nanokv import _lib
from nanokv._handle import OwnedHandle
from nanokv._lib import address, call, fit, id_array

DeviceGeometry = namedtuple("DeviceGeometry", "device page_bytes capacity_pages")


def _warn_clamped(asked, granted):
    # kvd logs it too; said here, where the one who asked will see it.
    warnings.warn(f"nanokv: asked for a limit of {asked} bytes, kvd granted {granted} "
                  "(its capacity)", RuntimeWarning, stacklevel=3)


class Client(OwnedHandle):
    """Attach to kvd with explicit options (the keywords of
    nanokv::ClientOptions), or from the environment with Client.from_env()
    (ENABLE_NANOKV=1, NANOKV_IPC_NAME, NANOKV_LIMIT, ...). Use as a context
    manager, or call close(): it destroys the tensors and caches still open on
    this client (their pages go back to kvd), then detaches.

        with nanokv.Client(ipc_name="nanokv", tenant="engine-0", group="g") as c:
            t = c.tensor(64 << 20)
            t.grow(4)
    """

    _NAME = "client"
    _DESTROY = "nanokv_detach"

    def __init__(self, ipc_name=None, tenant=None, group=None, limit_bytes=0, limit_fraction=0.0,
                 expect_page_bytes=0, devices=None, request_timeout_ms=None, _handle=None):
        self._children = weakref.WeakSet()
        if _handle is None:
            options = _lib.Options()
            call("nanokv_options_init", ctypes.byref(options))
            enc = lambda s: None if s is None else str(s).encode()  # noqa: E731
            options.ipc_name = enc(ipc_name)
            options.tenant = enc(tenant)
            options.group = enc(group)
            options.limit_bytes = fit(limit_bytes, ctypes.c_uint64, "limit_bytes")
            options.limit_fraction = float(limit_fraction)
            options.expect_page_bytes = fit(expect_page_bytes, ctypes.c_uint64, "expect_page_bytes")
            if devices:
                device_array = (ctypes.c_int * len(devices))(
                    *[fit(d, ctypes.c_int, "devices") for d in devices])
                options.devices = device_array
                options.device_count = len(devices)
            if request_timeout_ms is not None:
                options.request_timeout_ms = fit(request_timeout_ms, ctypes.c_uint32,
                                                 "request_timeout_ms")
            handle = ctypes.c_void_p()
            call("nanokv_attach", ctypes.byref(options), ctypes.byref(handle))
            _handle = handle
        self._own(_handle)
        self._tenant = self._string("nanokv_client_tenant")
        self._backend = self._string("nanokv_client_backend")
        if limit_bytes and self.limit_bytes < int(limit_bytes):
            _warn_clamped(int(limit_bytes), self.limit_bytes)

    @classmethod
    def from_env(cls):
        """Attach as the environment says. NanoKVError NOT_FOUND when nanokv
        is not enabled there (ENABLE_NANOKV unset or 0)."""
        handle = ctypes.c_void_p()
        call("nanokv_attach_from_env", ctypes.byref(handle))
        return cls(_handle=handle)

    # -- lifetime ---------------------------------------------------------
    def close(self):
        """Destroys this client's open tensors and caches, then detaches
        (kvd takes back every page). Idempotent. Finish GPU work first."""
        if self._handle is not None:
            for child in list(self._children):
                child.close()
        super().close()

    detach = close

    def _adopt(self, child):
        self._children.add(child)

    # -- geometry ---------------------------------------------------------
    def _string(self, name):
        out = ctypes.c_char_p()
        call(name, self.handle, ctypes.byref(out))
        return out.value.decode()

    @property
    def tenant(self):
        return self._tenant

    @property
    def backend(self):
        """"cuda", "hip" or "host"."""
        return self._backend

    @property
    def tenant_id(self):
        return self._scalar("nanokv_client_tenant_id", ctypes.c_uint32)

    @property
    def page_bytes(self):
        return self._scalar("nanokv_client_page_bytes", ctypes.c_uint64)

    @property
    def limit_bytes(self):
        return self._scalar("nanokv_client_limit_bytes", ctypes.c_uint64)

    @property
    def connected(self):
        return bool(self._scalar("nanokv_client_connected", ctypes.c_int))

    @property
    def pending_reclaim_pages(self):
        return self._scalar("nanokv_pending_reclaim_pages", ctypes.c_uint32)

    @property
    def devices(self):
        count = self._scalar("nanokv_client_device_count", ctypes.c_size_t)
        out = []
        for i in range(count):
            d = _lib.Device()
            call("nanokv_client_device", self.handle, i, ctypes.byref(d))
            out.append(DeviceGeometry(d.device, d.page_bytes, d.capacity_pages))
        return out

    # -- pages ------------------------------------------------------------
    def grant(self, pages, device=0):
        """New pages of `device` for this tenant, all or none: their ids."""
        pages = fit(pages, ctypes.c_uint32, "pages")
        ids = (ctypes.c_uint32 * max(pages, 1))()
        call("nanokv_grant", self.handle, device, pages, ids, None)
        return list(ids[:pages])

    def share(self, ids, device=0):
        """Becomes a holder of pages of this tenant's group, by id."""
        array, n = id_array(ids)
        call("nanokv_share", self.handle, device, array, n, None)

    def return_pages(self, ids, device=0):
        array, n = id_array(ids)
        call("nanokv_return", self.handle, device, array, n)

    def set_limit(self, limit_bytes):
        """Returns the limit kvd applied (0: kvd's default limit). A limit
        over kvd's capacity is clamped to it, with a warning."""
        applied = ctypes.c_uint64()
        call("nanokv_set_limit", self.handle, limit_bytes, ctypes.byref(applied))
        if limit_bytes and applied.value < int(limit_bytes):
            _warn_clamped(int(limit_bytes), applied.value)
        return applied.value

    # -- copies (synchronous, through the backend) ------------------------
    def copy_to_device(self, dst, data):
        """Copies the bytes of `data` (bytes, bytearray, a numpy array) to
        the device address `dst` (an int, e.g. tensor.data_ptr + offset)."""
        view = memoryview(data).cast("B")
        buf = (ctypes.c_uint8 * len(view)).from_buffer_copy(view) if view.readonly else \
            (ctypes.c_uint8 * len(view)).from_buffer(view)
        call("nanokv_copy_to_device", self.handle, address(dst, "dst"), buf, len(view))

    def copy_to_host(self, src, nbytes):
        """`nbytes` bytes from the device address `src`, as bytes."""
        nbytes = fit(nbytes, ctypes.c_size_t, "nbytes")
        buf = ctypes.create_string_buffer(nbytes)
        call("nanokv_copy_to_host", self.handle, buf, address(src, "src"), nbytes)
        return buf.raw

    def fill(self, dst, value, nbytes):
        call("nanokv_fill_device", self.handle, address(dst, "dst"), value, nbytes)

    # -- factories --------------------------------------------------------
    def tensor(self, nbytes, device=0):
        """A KVTensor of `nbytes` (rounded up to pages); nothing mapped yet."""
        from nanokv.tensor import KVTensor
        return KVTensor(self, nbytes, device)

    def cache(self, **config):
        """A KVCache (keywords of nanokv::KVCacheConfig: layers, kv_heads,
        head_dim, block_size, dtype, num_blocks, max_bytes, layout, ...)."""
        from nanokv.cache import KVCache
        return KVCache(self, **config)

    def __repr__(self):
        state = "closed" if self._handle is None else self._backend
        return f"nanokv.Client(tenant={self._tenant!r}, {state})"
