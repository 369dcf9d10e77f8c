"""The address and size of what a caller hands Objects' device calls, checked
before anything reaches kvd: a torch tensor (data_ptr(), numel() *
element_size()), anything with __cuda_array_interface__ (cuda), and, on the
host backend (whose device memory is host pages mapped in this process),
__array_interface__ (numpy), a writable memoryview or a ctypes array; the
backend then refuses an address outside device memory, as a GPU would fault.
Never a copy: a buffer that cannot be passed in place is refused, naming why."""
import ctypes

from nanokv.errors import INVALID_ARGUMENT, NanoKVError


class Buffer:
    """ptr, nbytes and the stream to order the transfer after (None: the
    store's default), plus whatever must stay alive during the call."""

    def __init__(self, ptr, nbytes, stream=None, keep=None):
        self.ptr, self.nbytes, self.stream, self._keep = int(ptr), int(nbytes), stream, keep


def _refuse(what, why):
    raise NanoKVError(INVALID_ARGUMENT, f"InvalidArgument: {what}: {why}")


def _c_contiguous(shape, strides, itemsize):
    if strides is None:
        return True
    step = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent > 1 and stride != step:
            return False
        step *= extent
    return True


def _extent(shape, itemsize):
    n = itemsize
    for extent in shape:
        n *= int(extent)
    return n


def _torch(obj, backend, what):
    device = obj.device
    if not obj.is_contiguous():
        _refuse(what, f"the tensor is not contiguous (shape {tuple(obj.shape)}, strides {tuple(obj.stride())}): "
                      "pass tensor.contiguous()")
    want = "cuda" if backend in ("cuda", "hip") else "cpu"
    if device.type != want:
        _refuse(what, f"a tensor on {device} given to a store on the {backend} backend (it takes {want} tensors)")
    stream = None
    if device.type == "cuda":
        import torch  # present: obj is one of its tensors
        # After the work torch queued on the tensor, not beside it.
        stream = torch.cuda.current_stream(device).cuda_stream
    return Buffer(obj.data_ptr(), obj.numel() * obj.element_size(), stream, obj)


def _interface(obj, interface, what, writable):
    shape = tuple(interface["shape"])
    itemsize = int(interface["typestr"][2:])
    ptr, readonly = interface["data"]
    if not _c_contiguous(shape, interface.get("strides"), itemsize):
        _refuse(what, f"not contiguous (shape {shape}, strides {interface.get('strides')})")
    if writable and readonly:
        _refuse(what, "read-only memory cannot be written")
    return ptr, _extent(shape, itemsize)


def resolve(obj, backend, what, writable):
    """The Buffer of `obj`, or NanoKVError INVALID_ARGUMENT saying why not.
    `writable`: the call writes into it (a get)."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size") and hasattr(obj, "is_contiguous"):
        return _torch(obj, backend, what)
    on_device = backend in ("cuda", "hip")
    if hasattr(obj, "__cuda_array_interface__"):
        if not on_device:
            _refuse(what, f"device memory (__cuda_array_interface__) given to a store on the {backend} backend")
        interface = obj.__cuda_array_interface__
        ptr, nbytes = _interface(obj, interface, what, writable)
        stream = interface.get("stream")
        # 1 and 2 name the legacy and per-thread default streams: the store's default.
        return Buffer(ptr, nbytes, stream if isinstance(stream, int) and stream > 2 else None, obj)
    if on_device:
        _refuse(what, f"{type(obj).__name__} is host memory; a store on the {backend} backend takes "
                      "device memory here (a cuda tensor, __cuda_array_interface__): put()/get() take host bytes")
    if hasattr(obj, "__array_interface__"):
        ptr, nbytes = _interface(obj, obj.__array_interface__, what, writable)
        return Buffer(ptr, nbytes, None, obj)
    try:
        view = memoryview(obj)
    except TypeError:
        _refuse(what, f"{type(obj).__name__} is neither a tensor nor a buffer")
    if not view.c_contiguous:
        _refuse(what, "the buffer is not contiguous")
    if view.readonly:
        if writable:
            _refuse(what, f"{type(obj).__name__} is read-only")
        if not isinstance(obj, bytes):
            _refuse(what, f"a read-only {type(obj).__name__} cannot be passed in place (use bytes or bytearray)")
        return Buffer(ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0, len(obj), None, obj)
    if view.nbytes == 0:
        _refuse(what, "an empty buffer (0 bytes)")
    array = (ctypes.c_char * view.nbytes).from_buffer(view.cast("B"))
    return Buffer(ctypes.addressof(array), view.nbytes, None, (obj, array))


def stream_handle(stream):
    """A cudaStream_t as an int from None, an int, or a torch/cupy stream."""
    if stream is None:
        return None
    for attribute in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    return int(stream)
