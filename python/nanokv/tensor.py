"""KVTensor: a reserved device range whose pages kvd grants on demand."""
import ctypes

from nanokv import memory
from nanokv._handle import OwnedHandle
from nanokv._lib import call, id_array


class KVTensor(OwnedHandle):
    """nanokv::KVTensor. Index i names the page at data_ptr + i * page_bytes.

    WARNING: unmap/shrink/close only after the GPU work on those pages
    finished (synchronize first); views of unmapped pages must not be touched.
    """

    _NAME = "tensor"
    _DESTROY = "nanokv_tensor_destroy"

    def __init__(self, client, nbytes, device=0):
        self._client = client
        handle = ctypes.c_void_p()
        call("nanokv_tensor_create", client.handle, int(device), int(nbytes), ctypes.byref(handle))
        self._own(handle)
        self.data_ptr = self._scalar("nanokv_tensor_data", ctypes.c_void_p)
        self.device = self._scalar("nanokv_tensor_device", ctypes.c_int)
        self.page_bytes = self._scalar("nanokv_tensor_page_bytes", ctypes.c_uint64)
        self.page_count = self._scalar("nanokv_tensor_page_count", ctypes.c_uint64)

    @property
    def nbytes(self):
        return self.page_count * self.page_bytes

    @property
    def mapped_pages(self):
        return self._scalar("nanokv_tensor_mapped_pages", ctypes.c_uint64)

    @property
    def mapped_prefix(self):
        return self._scalar("nanokv_tensor_mapped_prefix", ctypes.c_uint64)

    def map(self, first, count):
        call("nanokv_tensor_map", self.handle, int(first), int(count))

    def map_shared(self, index, ids, device=None):
        """Maps pages of this tenant's group by kvd id at index, index + 1, ..."""
        array, count = id_array(ids)
        call("nanokv_tensor_map_shared", self.handle, int(index),
             self.device if device is None else int(device), array, count)

    def unmap(self, first, count):
        call("nanokv_tensor_unmap", self.handle, int(first), int(count))

    def grow(self, pages):
        call("nanokv_tensor_grow", self.handle, int(pages))

    def shrink(self, pages):
        call("nanokv_tensor_shrink", self.handle, int(pages))

    def page_ids(self, first=0, count=None):
        """kvd's ids of the pages at [first, first + count); None where unmapped."""
        count = self.page_count - first if count is None else int(count)
        out = (ctypes.c_int64 * max(count, 1))()
        call("nanokv_tensor_page_ids", self.handle, int(first), count, out)
        return [None if i < 0 else i for i in out[:count]]

    def view(self, dtype="uint8", shape=None, offset=0, strides=None):
        """A zero-copy view of the range from byte `offset`: a numpy array on
        the host backend, a CudaArray (__cuda_array_interface__) on cuda.
        Default shape: the rest of the range. Strides in bytes."""
        itemsize = memory.DTYPES[memory._dtype(dtype)][2]
        if shape is None:
            shape = ((self.nbytes - offset) // itemsize,)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        extent = itemsize
        for n in shape:
            extent *= n
        if offset < 0 or (strides is None and offset + extent > self.nbytes):
            raise ValueError(f"nanokv: view of {extent} bytes at {offset} leaves the tensor "
                             f"({self.nbytes} bytes)")
        return memory.view(self._client.backend, self.data_ptr + offset, shape, dtype, strides,
                           owner=self, device=self.device)

    def page_view(self, index, dtype="uint8"):
        """One page as a flat view."""
        if not 0 <= index < self.page_count:
            raise IndexError(f"nanokv: page {index} of {self.page_count}")
        itemsize = memory.DTYPES[memory._dtype(dtype)][2]
        return self.view(dtype, (self.page_bytes // itemsize,), index * self.page_bytes)

    def __repr__(self):
        return (f"nanokv.KVTensor(device={self.device}, pages={self.page_count}, "
                f"page_bytes={self.page_bytes})")
