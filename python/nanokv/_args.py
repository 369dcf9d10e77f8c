"""What the bindings pass to the C ABI and read back from its batch calls:
strings (None stays NULL), arrays of keys, and per-item result codes. A
module of its own so that cluster.py and views.py both take them from
below instead of from each other."""

import ctypes

from nanokv import _lib
from nanokv.errors import NanoKVError


def _enc(s):
    return None if s is None else str(s).encode()


def _keys(keys):
    keys = [_enc(k) for k in keys]
    return (ctypes.c_char_p * max(len(keys), 1))(*keys), len(keys)


def _outcomes(results, count):
    """Per-item codes as None (OK) or NanoKVError. The C ABI keeps the
    message of the first failed item (nanokv_last_error); the others are
    named by their code."""
    out, first = [], True
    for i in range(count):
        if results[i] == 0:
            out.append(None)
            continue
        message = _lib.lib.nanokv_last_error().decode("utf-8", "replace") if first else \
            f"item {i}: {_lib.lib.nanokv_code_name(results[i]).decode()}"
        first = False
        out.append(NanoKVError(results[i], message))
    return out
