#!/usr/bin/env python3
"""Prefill/decode disaggregation over nanokv's KV highway.

A prefill process on GPU 0 runs a prompt through a model and puts every
layer's K and V into the decode side's store with one put_from_device_batch
(or the stream-ordered put_from_device_async, or through slabs of the
decode node's store with no plan: use_slabs_on); a decode process on GPU 1
gets them with one get_to_device_batch (or reads them in place through
view_batch) and generates greedily. Its tokens are checked against one
process doing both, the K/V bytes against the prefill's; each request prints
a JSON line of times. Per topology a master and kvds are started here:
one-node (one kvd serving both GPUs: the put goes to its device 1) and
two-nodes (a kvd per GPU, two nodes of one host: the put goes to the
decode's node, through that kvd's socket and pages).

The model: a transformers causal LM (--model NAME_OR_PATH) where that is
installed and on disk, else --model tiny, a few-layer decoder of this file
with its own attention. Without two GPUs (or with --backend host) it runs on
kvd's host backend: CPU tensors, device memory a KV tensor's pages mapped in
each process. Without PyTorch it prints "pd_disagg: SKIP: <why>".

    PYTHONPATH=python NANOKV_LIBRARY=build/libkv/capi/libnanokv.so \\
        python3 examples/python/pd_disagg.py --kvd build/entry/kvd --model tiny
"""
import argparse
import glob
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
PROMPT = "nanokv moves a request's keys and values from the prefill GPU to the decode GPU. "


def skip(why):
    print(f"pd_disagg: SKIP: {why}")
    sys.exit(0)


# ---------------------------------------------------------------------------
# Models: prefill(ids) -> (last logits, [(k, v)] per layer); start(kv) ->
# state; step(token, state) -> (logits, state).

def tiny_model(torch, args, device):
    nn, d, heads, hd = torch.nn, args.heads * args.head_dim, args.heads, args.head_dim

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, past):  # x [T, d]; past: K, V [heads, P, hd] or None
            t = x.shape[0]
            q, k, v = self.qkv(self.norm1(x)).view(t, 3, heads, hd).permute(1, 2, 0, 3)
            if past is not None:
                k, v = torch.cat([past[0], k], 1), torch.cat([past[1], v], 1)
            p = k.shape[1] - t
            scores = q @ k.transpose(1, 2) / math.sqrt(hd)
            mask = torch.ones(t, p + t, dtype=torch.bool, device=x.device).tril(p)
            attended = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
            x = x + self.out(attended.transpose(0, 1).reshape(t, d))
            return x + self.mlp(self.norm2(x)), (k, v)

    class Tiny(nn.Module):
        name = f"tiny ({args.layers} layers, {heads} heads x {hd})"

        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(256, d), nn.Embedding(32768, d)
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 256)

        def forward(self, ids, past=None):
            start = 0 if past is None else past[0][0].shape[1]
            x = self.emb(ids) + self.pos(torch.arange(start, start + len(ids), device=ids.device))
            kv = []
            for i, block in enumerate(self.blocks):
                x, layer = block(x, None if past is None else past[i])
                kv.append(layer)
            return self.head(self.norm(x))[-1], kv

        def tokens(self, text, count):  # bytes are its tokens
            data = (text * (count // len(text) + 1)).encode()[:count]
            return torch.tensor(list(data), dtype=torch.long, device=device)

        def prefill(self, ids):
            return self(ids)

        def start(self, kv):
            return list(kv)

        def step(self, token, state):
            return self(token.view(1), state)

    torch.manual_seed(args.seed)  # the same weights in every process
    return Tiny().to(device).eval()


def hf_model(torch, args, device):
    import transformers
    local = {"local_files_only": True} if args.model_guessed else {}  # a guess never downloads
    tok = transformers.AutoTokenizer.from_pretrained(args.model, **local)
    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    net = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype, **local)
    net = net.to(device).eval()

    def kv_of(cache):  # the cache's per-layer (K, V), whichever form this transformers returns
        if hasattr(cache, "layers"):
            return [(layer.keys, layer.values) for layer in cache.layers]
        if hasattr(cache, "to_legacy_cache"):
            return [tuple(layer) for layer in cache.to_legacy_cache()]
        return [tuple(layer[:2]) for layer in cache]

    class Model:
        name = f"transformers {args.model}"

        def tokens(self, text, count):
            ids = tok((text * (count // 8 + 1)), return_tensors="pt").input_ids[0][:count]
            return ids.to(device)

        def prefill(self, ids):
            out = net(input_ids=ids[None], use_cache=True)
            return out.logits[0, -1], kv_of(out.past_key_values)

        def start(self, kv):
            cache_class = getattr(transformers, "DynamicCache", None)
            if cache_class is None:
                return tuple(kv)
            if hasattr(cache_class, "from_legacy_cache"):
                return cache_class.from_legacy_cache(tuple(kv))
            cache = cache_class()
            for i, (k, v) in enumerate(kv):
                cache.update(k, v, i)
            return cache

        def step(self, token, state):
            out = net(input_ids=token.view(1, 1), past_key_values=state, use_cache=True)
            return out.logits[0, -1], out.past_key_values
    return Model()


def load_model(torch, args, device):
    if args.model == "tiny":
        return tiny_model(torch, args, device)
    try:
        return hf_model(torch, args, device)
    except Exception as e:  # not installed, or the model is not on disk: say so, run the tiny one
        print(f"pd_disagg: {args.model} cannot load ({type(e).__name__}: {e}); using --model tiny",
              file=sys.stderr)
        args.model = "tiny"
        return tiny_model(torch, args, device)


def greedy(torch, model, first, state, count, device):
    """`count` tokens from `first` on, each the argmax of the last step's logits."""
    tokens = [first]
    for _ in range(count - 1):
        logits, state = model.step(torch.tensor([tokens[-1]], device=device), state)
        tokens.append(int(logits.argmax()))
    return tokens


def digest(torch, tensors):
    """sha256 of the tensors' bytes, in order."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------
# Device memory for the host backend: CPU tensors over a KV tensor's pages
# (what device memory is there); on cuda, torch's own.

class Arena:
    def __init__(self, torch, nanokv, args, device):
        self.torch, self.device, self.client, self.next = torch, device, None, 0
        if args.backend == "host":
            self.client = nanokv.Client(ipc_name=args.ipc_name, tenant=f"pd-{args.role}-{os.getpid()}")
            self.pages = self.client.tensor(args.arena_bytes, device=args.device)
            self.pages.grow(self.pages.page_count)

    def empty(self, shape, dtype):
        """An uninitialised contiguous tensor in device memory."""
        if self.client is None:
            return self.torch.empty(shape, dtype=dtype, device=self.device)
        import ctypes
        count = math.prod(shape)
        nbytes = count * self.torch.empty((), dtype=dtype).element_size()
        if self.next + nbytes > self.pages.nbytes:
            raise RuntimeError("pd_disagg: the arena is full: raise --arena-bytes")
        memory = (ctypes.c_uint8 * nbytes).from_address(self.pages.data_ptr + self.next)
        self.next = (self.next + nbytes + 255) // 256 * 256
        return self.torch.frombuffer(memory, dtype=dtype, count=count).view(shape)

    def reset(self):
        """The next request's tensors start over: the last ones are done with."""
        self.next = 0

    def close(self):
        if self.client is not None:
            self.client.close()


def sync(torch, args):
    if args.backend == "cuda":
        torch.cuda.synchronize()


def raise_failed(results):
    """The batch's results, or its first item's NanoKVError raised (each names its key)."""
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def keys_of(request, layers):
    return [f"pd:{request}:L{layer}:{kind}" for layer in range(layers) for kind in "kv"]


# ---------------------------------------------------------------------------
# The two roles: each handles --requests in order, one JSON line each.

def role(args):
    """torch, nanokv, the device, the model, an Arena and the cluster client of a role."""
    import torch
    import nanokv
    device = f"cuda:{args.device}" if args.backend == "cuda" else "cpu"
    if args.backend == "cuda":
        torch.cuda.set_device(args.device)
    cluster = nanokv.Cluster(masters=[args.masters], node_id=args.node, ipc_name=args.ipc_name,
                             backend=args.backend)
    return torch, nanokv, device, load_model(torch, args, device), Arena(torch, nanokv, args, device), cluster


def visible_by(cluster, keys, deadline):
    """Waits until the master locates every key (a slab put's node tells it in its next events)."""
    import nanokv
    while True:
        missing = [r for r in cluster.get_location_batch(keys) if isinstance(r, nanokv.NanoKVError)]
        if not missing:
            return
        if any(e.code != e.NOT_FOUND for e in missing) or time.monotonic() > deadline:
            raise missing[0]
        time.sleep(0.001)


def run_prefill(args):
    torch, nanokv, device, model, arena, cluster = role(args)
    slabbed = False
    with cluster, torch.no_grad():
        for request, mode in (r.split(":") for r in args.requests.split(",")):
            arena.reset()
            ids = model.tokens(PROMPT, args.prompt_tokens)
            sync(torch, args)
            t0 = time.perf_counter()
            logits, kv = model.prefill(ids)
            tensors = [t.contiguous() for layer in kv for t in layer]
            if arena.client is not None:  # host backend: into device memory
                tensors = [arena.empty(t.shape, t.dtype).copy_(t) for t in tensors]
            sync(torch, args)
            t1 = time.perf_counter()
            keys = keys_of(request, len(kv))
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            if mode == "async":
                pending = cluster.put_from_device_async(keys, tensors, preferred_segment=args.segment)
                t_queued = time.perf_counter()
                results = pending.wait()
                pending.close()
            elif mode == "slab":
                # Slabs of the decode side's store (once): no plan, no request per put. Its kvd
                # indexes them (flush: the decode's gets of its node's copies find them); the
                # meta object below waits until the master locates them too, for the views.
                if not slabbed:
                    cluster.use_slabs_on(args.slab_segment, payload_bytes=max(2 * nbytes, 1 << 20))
                    slabbed = True
                results = cluster.put_from_device_batch(keys, tensors, preferred_segment=args.segment)
                t_queued = time.perf_counter()
                cluster.flush_slab_puts()
                t2 = time.perf_counter()
                raise_failed(results)
                visible_by(cluster, keys, time.monotonic() + args.timeout)
            else:
                results = cluster.put_from_device_batch(keys, tensors, preferred_segment=args.segment)
                t_queued = None
            if mode != "slab":
                t2 = time.perf_counter()
            raise_failed(results)
            meta = dict(layers=len(kv), shapes=[list(t.shape) for t in tensors], dtype=str(tensors[0].dtype),
                        first=int(logits.argmax()), digest=digest(torch, tensors))
            cluster.put(f"pd:{request}:meta", json.dumps(meta).encode(), preferred_segment=args.segment)
            print(json.dumps(dict(request=request, put=mode, prefill_s=round(t1 - t0, 6), put_s=round(t2 - t1, 6),
                                  queued_s=None if t_queued is None else round(t_queued - t1, 6), kv_bytes=nbytes,
                                  objects=len(tensors), put_gbps=round(nbytes / (t2 - t1) / 1e9, 3),
                                  put_digest=meta["digest"])), flush=True)
    arena.close()


def run_decode(args):
    torch, nanokv, device, model, arena, cluster = role(args)
    with cluster, torch.no_grad():
        for request, mode in (r.split(":") for r in args.requests.split(",")):
            deadline = time.monotonic() + args.timeout
            while True:  # the prefill puts the meta object after every K/V is committed
                try:
                    meta = json.loads(cluster.get(f"pd:{request}:meta"))
                    break
                except nanokv.NanoKVError as e:  # not there, or not READY yet
                    if e.code not in (e.NOT_FOUND, e.FAILED_PRECONDITION) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.002)
            arena.reset()
            dtype = getattr(torch, meta["dtype"].replace("torch.", ""))
            keys = keys_of(request, meta["layers"])
            t0 = time.perf_counter()
            views = []
            if mode == "view":  # read in place where the prefill put them: no copy
                views = raise_failed(cluster.view_batch(keys))
                tensors = [v.as_tensor(dtype, shape) for v, shape in zip(views, meta["shapes"])]
            else:
                tensors = [arena.empty(shape, dtype) for shape in meta["shapes"]]
                raise_failed(cluster.get_to_device_batch(keys, tensors))
            sync(torch, args)
            t1 = time.perf_counter()
            kv = [(tensors[2 * i], tensors[2 * i + 1]) for i in range(meta["layers"])]
            tokens = greedy(torch, model, meta["first"], model.start(kv), args.new_tokens, device)
            sync(torch, args)
            t2 = time.perf_counter()
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            # A view moves no byte: its time is the lease request's.
            gbps = None if mode == "view" else round(nbytes / (t1 - t0) / 1e9, 3)
            print(json.dumps(dict(request=request, read=mode, get_s=round(t1 - t0, 6), get_gbps=gbps,
                                  decode_s=round(t2 - t1, 6), tokens=tokens, got_digest=digest(torch, tensors))),
                  flush=True)
            del kv, tensors
            for v in views:
                v.close()
    arena.close()


# ---------------------------------------------------------------------------
# The example itself: per topology a master and kvds, a prefill and a decode
# process; then the reference (one process doing both) and the checks.

class Processes:
    """A master and kvds in a private run directory; stopped on exit."""

    def __init__(self, args, topology):
        self.args, self.dir, self.procs = args, tempfile.mkdtemp(prefix="nanokv_pd_"), []
        self.env = dict(os.environ, NANOKV_RUN_DIR=self.dir,
                        PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(REPO, "python"),
                                                                 os.environ.get("PYTHONPATH")])))
        self.env.setdefault("UCX_TLS", "tcp")
        try:
            self._start(args, topology)
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self):
        return self

    def _start(self, args, topology):
        log = self._spawn([args.kvd, "--role", "master", "--listen", "127.0.0.1:0", "--rebuild-window", "0",
                           "--id", "pd-master"], "master")
        self.masters = self._wait(log, r"serving on (\S+)")
        cuda = args.backend == "cuda"
        store = args.store_size
        capacity = store + 2 * args.arena_bytes + (256 << 20 if cuda else 16 << 20)
        # one-node: one kvd serving both devices; two-nodes: a kvd per device.
        nodes = [("n0", "all" if cuda else None, 2)] if topology == "one-node" else \
            [("n0", "[0]" if cuda else None, 1), ("n1", "[1]" if cuda else None, 1)]
        self.ipc = {}
        for node, devices, host_devices in nodes:
            self.ipc[node] = f"pd_{os.getpid()}_{topology[:3]}_{node}"
            config = os.path.join(self.dir, f"{node}.yaml")
            with open(config, "w") as f:
                f.write(f"backend: {args.backend}\nipc_name: {self.ipc[node]}\nrun_dir: {self.dir}\n"
                        f"capacity: {capacity}\nreserve_pages: 2\n" +
                        (f"devices: {devices}\n" if devices else
                         f"host_devices: {host_devices}\nhost_device_memory: {2 * capacity}\n") +
                        f"object_store:\n  size: {store}\n"
                        f"master:\n  addresses: [\"{self.masters}\"]\n  node_id: {node}\n  retry_interval: 100ms\n")
            self._spawn([args.kvd, "--config", config], node)
            self._wait(log, f"node {node} is alive()")

    def _spawn(self, argv, name):
        path = os.path.join(self.dir, f"{name}.log")
        with open(path, "w") as log:
            self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env))
        return path

    def _wait(self, path, pattern):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and all(p.poll() is None for p in self.procs):
            with open(path) as f:
                found = re.search(pattern, f.read())
            if found:
                return found.group(1)
            time.sleep(0.02)
        with open(path) as f:
            raise RuntimeError(f"pd_disagg: {path} never said '{pattern}':\n{f.read()[-3000:]}")

    def role(self, role, node, device, requests, segment="", slab_segment=""):
        argv = [sys.executable, os.path.abspath(__file__), "--role", role, "--masters", self.masters, "--node", node,
                "--ipc-name", self.ipc[node], "--device", str(device), "--requests", requests, "--segment", segment,
                "--slab-segment", slab_segment]
        for name in ("backend", "model", "prompt_tokens", "new_tokens", "layers", "heads", "head_dim", "seed",
                     "arena_bytes", "timeout"):
            argv += ["--" + name.replace("_", "-"), str(getattr(self.args, name))]
        argv += ["--model-guessed"] if self.args.model_guessed else []
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def finish(proc, what, timeout):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"pd_disagg: the {what} process failed ({proc.returncode}):\n{err[-4000:]}")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_main(args):
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed (pip install torch)")
    try:
        import nanokv
    except ImportError as e:
        skip(f"the nanokv package cannot load: {e}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.backend == "auto":
        args.backend = "cuda" if gpus >= 2 and nanokv.kernels.available() else "host"
    if args.backend == "cuda" and gpus < 2:
        skip(f"--backend cuda needs two GPUs; PyTorch sees {gpus}")
    if args.backend == "cuda" and not nanokv.kernels.available():
        skip("libnanokv was built without the device kernels (configure with the CUDA toolkit)")
    if args.store_size is None:
        args.store_size = (4 << 30) if args.backend == "cuda" else (64 << 20)
    if args.model == "auto":  # a guess: gpt2 where transformers has it on disk (hf_model), else tiny
        guess = importlib.util.find_spec("transformers") is not None
        args.model, args.model_guessed = ("gpt2", True) if guess else ("tiny", False)
    args.kvd = args.kvd or os.environ.get("NANOKV_KVD_BINARY") or next(iter(sorted(
        glob.glob(os.path.join(REPO, "build*", "entry", "kvd")), key=lambda p: -os.path.getmtime(p))), None)
    if not args.kvd:
        skip("no kvd binary: pass --kvd PATH or set NANOKV_KVD_BINARY")
    puts = {"both": ["batch", "async"], "all": ["batch", "async", "slab"]}.get(args.put, [args.put])
    reads = ["get", "view"] if args.read == "both" else [args.read]
    # Each put with a read, the reads in turn (batch-get, async-view, slab-get).
    pairs = [(p, reads[i % len(reads)]) for i, p in enumerate(puts)] if len(puts) >= len(reads) else \
        [(puts[i % len(puts)], r) for i, r in enumerate(reads)]
    rows = []
    for topology in (["one-node", "two-nodes"] if args.topology == "both" else [args.topology]):
        with Processes(args, topology) as cluster:
            requests = [f"{topology}-{i}" for i in range(len(pairs))]
            decode_node = "n0" if topology == "one-node" else "n1"
            decode_device = 1 if args.backend == "cuda" or topology == "one-node" else 0
            decode = cluster.role("decode", decode_node, decode_device,
                                  ",".join(f"{r}:{read}" for r, (_, read) in zip(requests, pairs)))
            prefill = cluster.role("prefill", "n0", 0, ",".join(f"{r}:{put}" for r, (put, _) in zip(requests, pairs)),
                                   segment="n0/1" if topology == "one-node" else "n1",
                                   slab_segment=f"{decode_node}/{decode_device}")
            puts = finish(prefill, "prefill", args.timeout)
            gets = finish(decode, "decode", args.timeout)
            for put, got in zip(puts, gets):
                rows.append({"topology": topology, "backend": args.backend, **put, **got})
    # The reference: one process doing both, on the decode's device.
    device = "cuda:1" if args.backend == "cuda" else "cpu"
    model = load_model(torch, args, device)
    with torch.no_grad():
        logits, kv = model.prefill(model.tokens(PROMPT, args.prompt_tokens))
        reference = greedy(torch, model, int(logits.argmax()), model.start(kv), args.new_tokens, device)
    failed = False
    for row in rows:
        row["tokens_match"] = row.pop("tokens") == reference
        row["kv_bytes_match"] = row.pop("put_digest") == row.pop("got_digest")
        failed |= not (row["tokens_match"] and row["kv_bytes_match"])
        print(json.dumps(dict(model=model.name, **row)))
    print(json.dumps(dict(model=model.name, prompt_tokens=args.prompt_tokens, reference_tokens=reference)))
    if failed:
        print("pd_disagg: FAILED: the decode's tokens or K/V differ from the reference")
        sys.exit(1)
    print("pd_disagg: OK")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["main", "prefill", "decode"], default="main", help=argparse.SUPPRESS)
    for hidden in ("--masters", "--node", "--ipc-name", "--requests", "--segment", "--slab-segment"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    p.add_argument("--device", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--model-guessed", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kvd", help="kvd binary (default: $NANOKV_KVD_BINARY, else build*/entry/kvd)")
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "host"],
                   help="auto: cuda where PyTorch sees two GPUs, else kvd's host backend")
    p.add_argument("--model", default="auto",
                   help="a transformers model name or path, or tiny (this file's); auto: gpt2 from the local "
                        "cache where transformers is installed, else tiny")
    p.add_argument("--topology", default="both", choices=["one-node", "two-nodes", "both"])
    p.add_argument("--put", default="all", choices=["batch", "async", "slab", "both", "all"],
                   help="batch: put_from_device_batch through the master's plans; async: the stream-ordered put; "
                        "slab: through slabs of the decode node's store (use_slabs_on); both: batch and async; "
                        "all: the three")
    p.add_argument("--read", default="both", choices=["get", "view", "both"])
    for name, default, what in (("--prompt-tokens", 256, "the prompt's length"), ("--new-tokens", 16, "to generate"),
                                ("--layers", 4, "tiny model"), ("--heads", 4, "tiny model"),
                                ("--head-dim", 32, "tiny model"), ("--seed", 0, "the model's weights")):
        p.add_argument(name, type=int, default=default, help=what)
    p.add_argument("--store-size", type=int, default=None, help="bytes per device (default 4 GiB cuda, 64 MiB host)")
    p.add_argument("--arena-bytes", type=int, default=64 << 20, help="host backend: device memory per process")
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args()
    {"main": run_main, "prefill": run_prefill, "decode": run_decode}[args.role](args)


if __name__ == "__main__":
    main()
