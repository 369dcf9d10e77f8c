#!/usr/bin/env python3
"""A decode loop whose KV cache lives in nanokv's shared pages.

What it does (on a machine with PyTorch, a CUDA GPU and libnanokv built with
the device kernels):
  1. starts kvd on the cuda backend in a private run directory (or, with
     --attach, uses a running one: NANOKV_IPC_NAME / NANOKV_RUN_DIR);
  2. attaches as a tenant of group "decode" and runs the decode loop twice,
     over two stores of the same layout ([layers][blocks, kv_heads,
     block_size, head_dim], block-major): a nanokv.KVCache (blocks, slots
     and page mapping are the cache's), then two KVTensors with blocks handed
     out here in a shuffled order;
  3. each run: prefill and --steps decode steps for a batch of sequences;
     each step's K/V go into their slots through nanokv's paged-append kernel
     (nanokv.kernels.paged_append / paged_append_into, through the C ABI),
     and attention for each sequence runs in PyTorch over its blocks gathered
     through the block table from zero-copy torch views of the pages
     (__cuda_array_interface__);
  4. checks every step against a plain-PyTorch reference that keeps K/V in
     ordinary tensors: the gathered K/V equal it exactly (the append is a byte
     copy) and the attention output matches (assert_close);
  5. after the KVTensors run, starts a second process that attaches to the
     same kvd in the same group, maps the same pages by kvd page id
     (KVTensor.map_shared) and checks it reads exactly the same K/V for every
     sequence and layer.

Without a GPU (or with --backend host) the same loop runs on kvd's host
backend with PyTorch on the CPU: the pages are host memory, viewed through
numpy and torch.from_numpy (still no copy), and a PyTorch scatter stands in
for the paged-append kernel (it says so). Where PyTorch is missing, or the
cuda backend is asked for and cannot run, it prints
"decode_loop: SKIP: <why>" and exits 0.

    PYTHONPATH=python NANOKV_LIBRARY=build/libkv/capi/libnanokv.so \\
        python3 examples/python/decode_loop.py --kvd build/entry/kvd

Why the sharing step uses the KVTensors store: the second process must map
the very pages the first one holds, by kvd page id; KVTensor.page_ids() gives
them, KVCache does not expose its pages' ids (yet). The layout is the same.
"""
import argparse
import glob
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))


def skip(why):
    print(f"decode_loop: SKIP: {why}")
    sys.exit(0)


def need_torch(backend):
    """torch and nanokv, or a SKIP. backend "auto" becomes cuda or host."""
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed (pip install torch)")
    try:
        import nanokv
    except ImportError as e:
        skip(f"the nanokv package cannot load: {e}")
    if backend == "auto":
        backend = "cuda" if torch.cuda.is_available() else "host"
        if backend == "host":
            print("decode_loop: no CUDA GPU visible to PyTorch: running on kvd's host backend")
    if backend == "cuda":
        if not torch.cuda.is_available():
            skip("--backend cuda, but no CUDA GPU is visible to PyTorch")
        if not nanokv.kernels.available():
            skip("libnanokv was built without the device kernels (configure with the CUDA toolkit)")
    return torch, nanokv, backend


def synchronize(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------
# The paged layout, shared by both processes.

class Geometry:
    def __init__(self, layers, kv_heads, head_dim, block_size, num_blocks, page_bytes):
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.block_size, self.num_blocks = block_size, num_blocks
        self.element_bytes = 2  # float16
        layer_bytes = num_blocks * kv_heads * block_size * head_dim * self.element_bytes
        self.layer_pages = -(-layer_bytes // page_bytes)
        self.layer_stride_bytes = self.layer_pages * page_bytes  # each layer starts on a page
        self.pages = layers * self.layer_pages

    def to_json(self):
        return dict(layers=self.layers, kv_heads=self.kv_heads, head_dim=self.head_dim,
                    block_size=self.block_size, num_blocks=self.num_blocks)


def layer_tensor(torch, tensor, geo, layer, device):
    """Zero-copy torch view of one layer: [blocks, kv_heads, block_size, head_dim].
    cuda: through __cuda_array_interface__; host: over the numpy view."""
    view = tensor.view("float16", shape=(geo.num_blocks, geo.kv_heads, geo.block_size, geo.head_dim),
                       offset=layer * geo.layer_stride_bytes)
    if device == "cuda":
        return torch.as_tensor(view, device="cuda")
    return torch.from_numpy(view)


def gather(torch, layer_cache, block_table, length):
    """A sequence's K (or V) from the paged layer, as [length, kv_heads, head_dim]."""
    blocks = layer_cache[torch.tensor(block_table, device=layer_cache.device, dtype=torch.long)]
    # [n, heads, block_size, dim] -> [n * block_size, heads, dim]
    dense = blocks.permute(0, 2, 1, 3).reshape(-1, blocks.shape[1], blocks.shape[3])
    return dense[:length]


def attention(torch, q, k, v):
    """One decode query per sequence; q [q_heads, dim], k/v [t, kv_heads, dim] (GQA)."""
    group = q.shape[0] // k.shape[1]
    k = k.repeat_interleave(group, dim=1).float()
    v = v.repeat_interleave(group, dim=1).float()
    scores = torch.einsum("hd,thd->ht", q.float(), k) / math.sqrt(q.shape[1])
    return torch.einsum("ht,thd->hd", scores.softmax(dim=-1), v)


# ---------------------------------------------------------------------------
# Process 1: the decode loop.

def run_main(args):
    torch, nanokv, args.backend = need_torch(args.backend)
    kvd, run_dir = start_kvd(args) if not args.attach else (None, None)
    try:
        client = nanokv.Client(ipc_name=args.ipc_name, tenant="decode-main", group=args.group)
        device = "cuda" if client.backend == "cuda" else "cpu"
        if client.backend not in ("cuda", "host"):
            client.close()
            skip(f"kvd runs the {client.backend} backend; this example knows cuda and host")
        if device == "cuda" and not (torch.cuda.is_available() and nanokv.kernels.available()):
            client.close()
            skip("kvd runs on cuda, but PyTorch sees no GPU or libnanokv has no kernels")
        with client:
            try:
                run_stores(args, torch, nanokv, client, device)
            finally:
                synchronize(torch, device)  # no page is unmapped under a running kernel
    finally:
        stop_kvd(kvd, run_dir)


class TensorStore:
    """K and V in two KVTensors laid out as KVCache's block-major layout, blocks
    handed out here (shuffled, so block tables are scattered). Its pages can be
    shared by id (KVTensor.page_ids), which the second process needs."""
    name = "KVTensors"

    def __init__(self, torch, nanokv, client, geo, device, rng):
        self.torch, self.nanokv, self.geo, self.device = torch, nanokv, geo, device
        self.k_pages = client.tensor(geo.pages * client.page_bytes)
        self.v_pages = client.tensor(geo.pages * client.page_bytes)
        self.k_pages.grow(geo.pages)
        self.v_pages.grow(geo.pages)
        self.k_layers = [layer_tensor(torch, self.k_pages, geo, l, device) for l in range(geo.layers)]
        self.v_layers = [layer_tensor(torch, self.v_pages, geo, l, device) for l in range(geo.layers)]
        self.free_blocks = list(range(geo.num_blocks))
        rng.shuffle(self.free_blocks)
        self.tables, self.lengths = {}, {}

    def slots_for(self, seq, new_tokens):
        table = self.tables.setdefault(seq, [])
        out = []
        for _ in range(new_tokens):
            pos = self.lengths.get(seq, 0)
            if pos % self.geo.block_size == 0:
                if not self.free_blocks:
                    raise RuntimeError("decode_loop: out of blocks; raise --num-blocks")
                table.append(self.free_blocks.pop())
            out.append(table[pos // self.geo.block_size] * self.geo.block_size +
                       pos % self.geo.block_size)
            self.lengths[seq] = pos + 1
        return out

    def table(self, seq):
        return self.tables[seq], self.lengths[seq]

    def write(self, layer, new_k, new_v, slot_mapping):
        geo = self.geo
        if self.device == "cuda":
            self.nanokv.kernels.paged_append_into(
                new_k, new_v, slot_mapping,
                self.k_pages.data_ptr + layer * geo.layer_stride_bytes,
                self.v_pages.data_ptr + layer * geo.layer_stride_bytes,
                num_blocks=geo.num_blocks, num_heads=geo.kv_heads, block_size=geo.block_size,
                head_dim=geo.head_dim)
        else:
            scatter(self.k_layers[layer], self.v_layers[layer], new_k, new_v, slot_mapping,
                    geo.block_size)

    def close(self):
        self.k_pages.close()
        self.v_pages.close()


class CacheStore:
    """nanokv.KVCache: blocks, slots and pages are the cache's (pages mapped as
    blocks are first used); K/V written by nanokv.kernels.paged_append."""
    name = "KVCache"

    def __init__(self, torch, nanokv, client, geo, device, rng):
        self.torch, self.nanokv, self.geo, self.device = torch, nanokv, geo, device
        self.cache = client.cache(layers=geo.layers, kv_heads=geo.kv_heads, head_dim=geo.head_dim,
                                  block_size=geo.block_size, dtype="float16",
                                  num_blocks=geo.num_blocks)
        self._views = None
        self.seqs = set()

    def _layer_views(self):
        """Torch views of every layer's K and V, made on first use: torch.as_tensor
        checks that a CUDA pointer is device memory, and the cache maps a layer's
        first page only when a block in it is first allocated (see PYTHON.md)."""
        if self._views is None:
            assert self.seqs, "views before any allocation: the pages are not mapped yet"
            torch = self.torch
            as_torch = (lambda a: torch.as_tensor(a, device="cuda")) if self.device == "cuda" \
                else torch.from_numpy
            self._views = ([as_torch(self.cache.k(l)) for l in range(self.geo.layers)],
                           [as_torch(self.cache.v(l)) for l in range(self.geo.layers)])
        return self._views

    @property
    def k_layers(self):
        return self._layer_views()[0]

    @property
    def v_layers(self):
        return self._layer_views()[1]

    def slots_for(self, seq, new_tokens):
        if seq not in self.seqs:
            self.cache.allocate_for(seq, new_tokens)
            self.seqs.add(seq)
            return self.cache.slots(seq)
        return [self.cache.append_token(seq) for _ in range(new_tokens)]

    def table(self, seq):
        return self.cache.block_table(seq), self.cache.used_tokens(seq)

    def write(self, layer, new_k, new_v, slot_mapping):
        if self.device == "cuda":
            self.nanokv.kernels.paged_append(self.cache, layer, new_k, new_v, slot_mapping)
        else:
            scatter(self.k_layers[layer], self.v_layers[layer], new_k, new_v, slot_mapping,
                    self.geo.block_size)

    def close(self):
        for seq in self.seqs:
            self.cache.free_for(seq)
        self.cache.close()


def scatter(k_layer, v_layer, new_k, new_v, slot_mapping, block_size):
    """The host backend's stand-in for the paged-append kernel, element for element."""
    blocks, offsets = slot_mapping // block_size, slot_mapping % block_size
    k_layer[blocks, :, offsets, :] = new_k
    v_layer[blocks, :, offsets, :] = new_v


def decode(args, torch, nanokv, client, device, store_class):
    """The decode loop over one store; returns (store, reference K, reference V)."""
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    geo = Geometry(args.layers, args.kv_heads, args.head_dim, args.block_size, args.num_blocks,
                   client.page_bytes)
    q_heads = args.kv_heads * args.gqa
    store = store_class(torch, nanokv, client, geo, device, rng)
    print(f"decode_loop [{store.name}]: {args.batch} sequences, {args.layers} layers, "
          f"{args.kv_heads} kv heads x {args.head_dim}, blocks of {args.block_size}, "
          f"{client.page_bytes >> 20} MiB pages")
    ref_k = [[None] * geo.layers for _ in range(args.batch)]  # plain tensors [t, heads, dim]
    ref_v = [[None] * geo.layers for _ in range(args.batch)]

    def append(seq, new_k, new_v):
        """new_k/new_v: [layers, tokens, kv_heads, dim] float16."""
        slots = store.slots_for(seq, new_k.shape[1])
        slot_mapping = torch.tensor(slots, device=device, dtype=torch.int64)
        for layer in range(geo.layers):
            store.write(layer, new_k[layer], new_v[layer], slot_mapping)
            for ref, new in ((ref_k, new_k), (ref_v, new_v)):
                old = ref[seq][layer]
                ref[seq][layer] = new[layer].clone() if old is None else torch.cat([old, new[layer]])

    def random_kv(tokens):
        shape = (geo.layers, tokens, geo.kv_heads, geo.head_dim)
        return (torch.randn(shape, device=device).half(), torch.randn(shape, device=device).half())

    # Prefill: prompts of different lengths.
    for seq in range(args.batch):
        append(seq, *random_kv(rng.randint(1, args.max_prompt)))

    start = time.perf_counter()
    for step in range(args.steps):
        for seq in range(args.batch):
            append(seq, *random_kv(1))
        # The appends are on torch's current stream: the gathers below run after them.
        for layer in range(geo.layers):
            q = torch.randn(args.batch, q_heads, geo.head_dim, device=device).half()
            for seq in range(args.batch):
                table, length = store.table(seq)
                k = gather(torch, store.k_layers[layer], table, length)
                v = gather(torch, store.v_layers[layer], table, length)
                if not (torch.equal(k, ref_k[seq][layer]) and torch.equal(v, ref_v[seq][layer])):
                    raise AssertionError(f"decode_loop [{store.name}]: step {step}, layer {layer}, "
                                         f"sequence {seq}: K/V in nanokv's pages differ from the "
                                         f"reference")
                torch.testing.assert_close(
                    attention(torch, q[seq], k, v),
                    attention(torch, q[seq], ref_k[seq][layer], ref_v[seq][layer]),
                    rtol=1e-3, atol=1e-3)
    synchronize(torch, device)
    elapsed = time.perf_counter() - start
    print(f"decode_loop [{store.name}]: {args.steps} steps x {args.batch} sequences x "
          f"{geo.layers} layers: paged K/V equal the reference, attention matches "
          f"({elapsed:.2f} s, unoptimised per-sequence gathers)")
    return store, geo, ref_k, ref_v


def run_stores(args, torch, nanokv, client, device):
    if device == "cpu":
        print("decode_loop: host backend: a PyTorch scatter stands in for the paged-append "
              "kernel (it needs a GPU)")
    if args.store in ("cache", "both"):
        store, _, _, _ = decode(args, torch, nanokv, client, device, CacheStore)
        synchronize(torch, device)  # pages go back to kvd only after the kernels finished
        store.close()
    if args.store in ("tensors", "both"):
        store, geo, ref_k, ref_v = decode(args, torch, nanokv, client, device, TensorStore)
        share_with_second_process(args, torch, store, geo, ref_k, ref_v)
        synchronize(torch, device)
        store.close()
    print("decode_loop: OK")


def share_with_second_process(args, torch, store, geo, ref_k, ref_v):
    """Process 2: the same group maps the same pages and must read the same K/V."""
    synchronize(torch, store.device)
    workdir = tempfile.mkdtemp(prefix="nanokv_decode_")
    try:
        ref_path = os.path.join(workdir, "reference.pt")
        torch.save({"k": [[t.cpu() for t in r] for r in ref_k],
                    "v": [[t.cpu() for t in r] for r in ref_v]}, ref_path)
        seqs = range(len(ref_k))
        handoff = dict(geometry=geo.to_json(), k_ids=store.k_pages.page_ids(),
                       v_ids=store.v_pages.page_ids(), device=store.k_pages.device,
                       tables=[store.table(s)[0] for s in seqs],
                       lengths=[store.table(s)[1] for s in seqs], reference=ref_path)
        env = dict(os.environ)  # NANOKV_RUN_DIR, NANOKV_LIBRARY, PYTHONPATH as here
        reader = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--role", "reader", "--ipc-name",
             args.ipc_name, "--group", args.group, "--backend", args.backend],
            input=json.dumps(handoff), env=env, capture_output=True, text=True, timeout=300)
        sys.stdout.write(reader.stdout)
        if reader.returncode != 0:
            sys.stderr.write(reader.stderr)
            raise AssertionError(f"decode_loop: the reader process failed ({reader.returncode})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------------
# Process 2: attach to the same group, map the same pages, read the same K/V.

def run_reader(args):
    torch, nanokv, args.backend = need_torch(args.backend)
    device = "cuda" if args.backend == "cuda" else "cpu"
    handoff = json.loads(sys.stdin.read())
    reference = torch.load(handoff["reference"])
    with nanokv.Client(ipc_name=args.ipc_name, tenant="decode-reader", group=args.group) as client:
        g = handoff["geometry"]
        geo = Geometry(g["layers"], g["kv_heads"], g["head_dim"], g["block_size"], g["num_blocks"],
                       client.page_bytes)
        checked = 0
        tensors = []
        for ids in (handoff["k_ids"], handoff["v_ids"]):
            tensor = client.tensor(len(ids) * client.page_bytes)
            tensor.map_shared(0, ids, device=handoff["device"])
            tensors.append(tensor)
        for which, tensor in zip(("k", "v"), tensors):
            for layer in range(geo.layers):
                layer_cache = layer_tensor(torch, tensor, geo, layer, device)
                for seq, (table, length) in enumerate(zip(handoff["tables"], handoff["lengths"])):
                    got = gather(torch, layer_cache, table, length).cpu()
                    if not torch.equal(got, reference[which][seq][layer]):
                        raise AssertionError(f"reader: {which.upper()} of layer {layer}, sequence "
                                             f"{seq} differs from what the writer wrote")
                    checked += got.numel() * got.element_size()
        synchronize(torch, device)
        for tensor in tensors:
            tensor.close()
    print(f"decode_loop: second process (tenant decode-reader, same group) mapped "
          f"{len(handoff['k_ids']) + len(handoff['v_ids'])} shared pages and read the same K/V "
          f"({checked} bytes compared)")


# ---------------------------------------------------------------------------
# kvd for the example (unless --attach).

def find_kvd(args):
    if args.kvd:
        return args.kvd
    if os.environ.get("NANOKV_KVD_BINARY"):
        return os.environ["NANOKV_KVD_BINARY"]
    built = sorted(glob.glob(os.path.join(REPO, "build*", "entry", "kvd")),
                   key=lambda p: -os.path.getmtime(p))
    if not built:
        skip("no kvd binary: pass --kvd PATH, set NANOKV_KVD_BINARY, or use --attach")
    return built[0]


def start_kvd(args):
    run_dir = tempfile.mkdtemp(prefix="nanokv_decode_run_")
    os.environ["NANOKV_RUN_DIR"] = run_dir
    log_path = os.path.join(run_dir, "kvd.log")
    log = open(log_path, "w")
    kvd = subprocess.Popen([find_kvd(args), "--backend", args.backend, "--ipc-name", args.ipc_name,
                            "--capacity", args.capacity, "--run-dir", run_dir,
                            "--reserve-pages", "4"], stdout=log, stderr=subprocess.STDOUT)
    socket = os.path.join(run_dir, args.ipc_name + ".sock")
    deadline = time.monotonic() + 60
    while not os.path.exists(socket):
        if kvd.poll() is not None or time.monotonic() > deadline:
            kvd.kill()
            with open(log_path) as f:
                tail = f.read()[-2000:]
            if args.backend == "cuda":
                skip(f"kvd could not start on the cuda backend:\n{tail}")
            raise RuntimeError(f"decode_loop: kvd did not come up:\n{tail}")
        time.sleep(0.05)
    return kvd, run_dir


def stop_kvd(kvd, run_dir):
    if kvd is None:
        return
    kvd.send_signal(signal.SIGTERM)
    try:
        kvd.wait(timeout=30)
    except subprocess.TimeoutExpired:
        kvd.kill()
    shutil.rmtree(run_dir, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["main", "reader"], default="main", help=argparse.SUPPRESS)
    p.add_argument("--attach", action="store_true",
                   help="use a running kvd (NANOKV_RUN_DIR, --ipc-name) instead of starting one")
    p.add_argument("--kvd", help="kvd binary (default: $NANOKV_KVD_BINARY, else build*/entry/kvd)")
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "host"],
                   help="kvd's backend: cuda (GPU, the real kernel), host (CPU stand-in), "
                        "auto: cuda where PyTorch sees a GPU")
    p.add_argument("--capacity", default="2GiB", help="capacity of the kvd started here")
    p.add_argument("--ipc-name", default=os.environ.get("NANOKV_IPC_NAME", f"decode_{os.getpid()}"))
    p.add_argument("--group", default="decode")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--gqa", type=int, default=2, help="query heads per kv head")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-blocks", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-prompt", type=int, default=50)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--store", choices=["cache", "tensors", "both"], default="both",
                   help="cache: nanokv.KVCache; tensors: KVTensors in the same layout, then a "
                        "second process maps their pages; both (default)")
    args = p.parse_args()
    if args.role == "reader":
        run_reader(args)
    else:
        run_main(args)


if __name__ == "__main__":
    main()
