"""NanoKVError: a failed call of the C ABI, with its code and message."""

# The values of nanokv::Code (nanokv/nanokv.h's NANOKV_* constants).
OK = 0
INVALID_ARGUMENT = 1
NOT_FOUND = 2
ALREADY_EXISTS = 3
OUT_OF_MEMORY = 4
RESOURCE_EXHAUSTED = 5
PERMISSION_DENIED = 6
FAILED_PRECONDITION = 7
UNAVAILABLE = 8
UNSUPPORTED = 9
IO_ERROR = 10
PROTOCOL_ERROR = 11
INTERNAL = 12
UNIMPLEMENTED = 13

CODE_NAMES = {
    OK: "OK", INVALID_ARGUMENT: "InvalidArgument", NOT_FOUND: "NotFound",
    ALREADY_EXISTS: "AlreadyExists", OUT_OF_MEMORY: "OutOfMemory",
    RESOURCE_EXHAUSTED: "ResourceExhausted", PERMISSION_DENIED: "PermissionDenied",
    FAILED_PRECONDITION: "FailedPrecondition", UNAVAILABLE: "Unavailable",
    UNSUPPORTED: "Unsupported", IO_ERROR: "IOError", PROTOCOL_ERROR: "ProtocolError",
    INTERNAL: "Internal", UNIMPLEMENTED: "Unimplemented",
}


class NanoKVError(Exception):
    """A nanokv call failed. `code` is one of the constants above (also
    reachable as NanoKVError.RESOURCE_EXHAUSTED, ...); `message` is
    nanokv_last_error()'s text, e.g. "ResourceExhausted: ..."."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def code_name(self):
        return CODE_NAMES.get(self.code, "Unknown")

    def __repr__(self):
        return f"NanoKVError({self.code_name}, {self.message!r})"


for _name in ("OK", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "OUT_OF_MEMORY",
              "RESOURCE_EXHAUSTED", "PERMISSION_DENIED", "FAILED_PRECONDITION", "UNAVAILABLE",
              "UNSUPPORTED", "IO_ERROR", "PROTOCOL_ERROR", "INTERNAL", "UNIMPLEMENTED"):
    setattr(NanoKVError, _name, globals()[_name])


class LibraryNotFoundError(ImportError):
    """libnanokv.so was not found; the message lists every place searched."""
