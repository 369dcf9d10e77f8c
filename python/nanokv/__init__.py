"""nanokv for Python: ctypes over libnanokv.so (the C ABI, nanokv/nanokv.h).

    import nanokv
    with nanokv.Client.from_env() as client:          # or nanokv.Client(ipc_name=...)
        tensor = client.tensor(64 << 20)
        tensor.grow(2)
        view = tensor.view("float16")                 # numpy (host) / CUDA array (cuda)

docs/PYTHON.md: install, the API, and the zero-copy lifetime rules.
"""
from nanokv.errors import NanoKVError, LibraryNotFoundError  # noqa: F401
from nanokv import errors  # noqa: F401
from nanokv._lib import path as library_path  # noqa: F401
from nanokv.client import Client, DeviceGeometry  # noqa: F401
from nanokv.tensor import KVTensor  # noqa: F401
from nanokv.cache import KVCache, CacheView  # noqa: F401
from nanokv.memory import CudaArray  # noqa: F401
from nanokv import kernels  # noqa: F401
from nanokv.cluster import Cluster, ClusterPlan, Location, PendingPuts, Replica  # noqa: F401
from nanokv.views import ObjectView, close_views  # noqa: F401
from nanokv.objects import Objects, ObjectPlan, PlanInfo, Slab, SlabInfo  # noqa: F401
from nanokv.prefix import PrefixCache  # noqa: F401

__all__ = ["Client", "KVTensor", "KVCache", "CacheView", "CudaArray", "NanoKVError",
           "LibraryNotFoundError", "DeviceGeometry", "kernels", "errors", "library_path", "Cluster",
           "ClusterPlan", "Location", "PendingPuts", "Replica", "Objects", "ObjectPlan", "PlanInfo", "Slab",
           "SlabInfo", "ObjectView", "PrefixCache"]
