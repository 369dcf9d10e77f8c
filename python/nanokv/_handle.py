"""OwnedHandle: the lifetime Client, KVTensor and KVCache share, written once."""
import ctypes

from nanokv._lib import call


class OwnedHandle:
    """Owns one handle of the C ABI until close(): `handle` (ValueError once
    closed), close() (idempotent: the handle is destroyed once), the with
    statement, and __del__ closing what was dropped open.

    An object made on a client (a tensor, a cache) sets self._client before it
    owns its handle: the client closes it first when the client closes, and
    dropped on its own it is destroyed here while its client is still open.
    """

    _NAME = "handle"  # "nanokv: the <name> is closed"
    _DESTROY = None   # the C ABI function that ends the handle
    # Class defaults, so close() and __del__ hold on an object whose __init__
    # raised before it owned a handle.
    _handle = None
    _client = None

    def _own(self, handle):
        self._handle = handle
        if self._client is not None:
            self._client._adopt(self)

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError(f"nanokv: the {self._NAME} is closed")
        return self._handle

    def _scalar(self, name, ctype, *args):
        """Calls `name`(handle, *args, &out) and returns out's value."""
        out = ctype()
        call(name, self.handle, *args, ctypes.byref(out))
        return out.value

    def close(self):
        """Destroys the handle: kvd takes back every page it held. Idempotent.
        Finish the GPU work on its memory first."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        call(self._DESTROY, handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self._client is None or self._client._handle is not None:
                self.close()
        except Exception:  # interpreter teardown, kvd gone: nothing to report to
            pass
