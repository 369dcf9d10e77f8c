#!/usr/bin/env python3
"""Prefix reuse with Hugging Face transformers over nanokv.

  check (default): for a Llama-shaped and a Qwen2-shaped model (random
    weights, nothing downloaded, float32): greedy generation with
    NanoKVCache gives the tokens DynamicCache gives (logits close); then a
    second process generates a prompt sharing a prefix, loads that prefix
    from the store the first process filled, and its greedy tokens equal a
    recompute's.
  --bench: a model of a real model's shape (32 layers, 32 heads, 8 KV heads
    of 128, bf16, random weights), prompts of --prompt-tokens sharing
    --shared-tokens, the second in another process: time to first token
    with reuse against recompute in the same run, the load's bandwidth
    against a device memcpy of the same bytes, and where the time goes. JSON
    on stdout (and in --json).

It starts its own kvd on cuda (an object store big enough for the prefix)
in a private run directory. Without PyTorch with CUDA, or transformers, it
prints "prefix_reuse: SKIP: <why>" and exits 0.

    PYTHONPATH=python NANOKV_LIBRARY=build/libkv/capi/libnanokv.so \\
        python3 examples/python/prefix_reuse.py --kvd build/entry/kvd
"""
import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def skip(why):
    print(f"prefix_reuse: SKIP: {why}")
    sys.exit(0)


def model_config(shape, bench):
    import transformers
    if bench:  # Llama-3-8B's attention and MLP shape
        return transformers.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                                        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                        head_dim=128, max_position_embeddings=16384)
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[shape]
    return cls(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
               num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=4096)


def make_model(shape, bench):
    """The same random weights in every process: a fixed seed, built on the GPU."""
    import torch
    import transformers
    torch.manual_seed(1234)
    dtype = torch.bfloat16 if bench else torch.float32
    config = model_config(shape, bench)
    config._name_or_path = f"random-{shape}{'-8b' if bench else ''}"
    with torch.device("cuda:0"):
        # Built in float32 and converted: the dtype keyword changed name across transformers versions.
        model = transformers.AutoModelForCausalLM.from_config(config).to(dtype)
    return model.eval()


def prompts(args, vocab):
    import torch
    g = torch.Generator().manual_seed(99)
    shared = torch.randint(0, vocab, (args.shared_tokens,), generator=g)
    tail_a = torch.randint(0, vocab, (args.prompt_tokens - args.shared_tokens,), generator=g)
    tail_b = torch.randint(0, vocab, (args.prompt_tokens - args.shared_tokens,), generator=g)
    return (torch.cat([shared, tail_a]).unsqueeze(0).cuda(), torch.cat([shared, tail_b]).unsqueeze(0).cuda())


def open_nanokv(args, model):
    import nanokv
    from nanokv.integrations.transformers import prefix_options
    client = nanokv.Client(ipc_name=args.ipc_name, tenant=f"hf-{os.getpid()}")
    store = nanokv.Objects(ipc_name=args.ipc_name)
    prefix = nanokv.PrefixCache(store, preferred_device=0, **prefix_options(model, salt="example", chunk_tokens=args.chunk))
    return client, store, prefix


def greedy(model, ids, n, cache):
    out = model.generate(ids, past_key_values=cache, max_new_tokens=n, do_sample=False, output_scores=True,
                         return_dict_in_generate=True, pad_token_id=0)
    return out.sequences[0, ids.shape[1]:].tolist(), out.scores


def role_check(args):
    """One shape: NanoKVCache against DynamicCache, then prompt A stored
    (role "first") or prompt B with and without reuse (role "second")."""
    import torch
    from transformers import DynamicCache
    from nanokv.integrations.transformers import NanoKVCache, generate_with_prefix
    model = make_model(args.shape, False)
    a, b = prompts(args, model.config.vocab_size)
    client, store, prefix = open_nanokv(args, model)
    ids = a if args.role == "first" else b
    with torch.no_grad():
        with NanoKVCache(model.config, client, ids.shape[1] + args.new_tokens, dtype=model.dtype) as cache:
            ours, our_scores = greedy(model, ids, args.new_tokens, cache)
        theirs, their_scores = greedy(model, ids, args.new_tokens, DynamicCache(config=model.config))
        gap = max((x - y).abs().max().item() for x, y in zip(our_scores, their_scores))
        result = {"shape": args.shape, "role": args.role, "same_as_dynamic_cache": ours == theirs, "logit_gap": gap}
        out, info = generate_with_prefix(model, ids, client, prefix, max_new_tokens=args.new_tokens,
                                         do_sample=False, pad_token_id=0)
        result.update(info, reuse_same_as_recompute=out[0, ids.shape[1]:].tolist() == theirs)
    print(json.dumps(result), flush=True)
    prefix.close(), store.close(), client.close()


def role_bench(args):
    """The second process of the benchmark: recompute, then reuse, of prompt B."""
    import torch
    from nanokv.integrations.transformers import NanoKVCache
    model = make_model("llama", True)
    a, b = prompts(args, model.config.vocab_size)
    client, store, prefix = open_nanokv(args, model)
    tokens = b[0].tolist()
    total = b.shape[1] + 1

    def ttft(reuse, warm=None):
        # Cold: a cache made for the request, every page mapped as it goes.
        # Warm: the engine's cache of an earlier request, emptied (crop 0)
        # with its pages still mapped, as a serving engine's pool stays.
        if warm is not None:
            warm.crop(0)
        with (NanoKVCache(model.config, client, total, dtype=model.dtype) if warm is None
              else contextlib.nullcontext(warm)) as cache:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            hit = prefix.lookup(tokens) if reuse else 0
            t1 = time.perf_counter()
            reserved = t1
            if hit:
                cache.reserve(hit)  # the cache's pages for the hit, mapped (kvd's grants)
                reserved = time.perf_counter()
                hit = prefix.load(tokens, hit, cache.planes())
            cache.set_length(hit)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            model.generate(b, past_key_values=cache, max_new_tokens=1, do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()
            t3 = time.perf_counter()
        return {"ttft_s": t3 - t0, "lookup_s": t1 - t0, "reserve_s": reserved - t1, "load_s": t2 - reserved,
                "prefill_s": t3 - t2, "hit": hit}

    def best(reuse, warm=None):
        return min((ttft(reuse, warm) for _ in range(args.repeats)), key=lambda r: r["ttft_s"])

    with torch.no_grad():
        ttft(False)  # warm-up: cuBLAS, SDPA kernels, the store's page mappings
        recompute, reuse = best(False), best(True)
        with NanoKVCache(model.config, client, total, dtype=model.dtype) as engine_cache:
            ttft(False, engine_cache)  # maps every page the prompt needs
            warm = {"recompute": best(False, engine_cache), "reuse": best(True, engine_cache)}
        warm["ttft_ratio"] = warm["reuse"]["ttft_s"] / warm["recompute"]["ttft_s"]
        loaded_bytes = reuse["hit"] * prefix.token_bytes * prefix.planes
        src = torch.empty(loaded_bytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        dst.copy_(src)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            dst.copy_(src)
        torch.cuda.synchronize()
        memcpy_s = (time.perf_counter() - t0) / 5
    print(json.dumps({
        "bench": "prefix_reuse_ttft", "model": "llama-8b-shape random bf16", "prompt_tokens": len(tokens),
        "shared_tokens": args.shared_tokens, "chunk_tokens": args.chunk, "recompute": recompute, "reuse": reuse,
        "ttft_ratio": reuse["ttft_s"] / recompute["ttft_s"], "goal_ratio": 0.25, "warm_cache": warm,
        "load_bytes": loaded_bytes, "load_gbps": loaded_bytes / reuse["load_s"] / 1e9 if reuse["load_s"] else None,
        "memcpy_gbps": loaded_bytes / memcpy_s / 1e9, "objects_loaded": reuse["hit"] // args.chunk,
    }), flush=True)
    prefix.close(), store.close(), client.close()


def role_fill(args):
    """The first process of the benchmark: prompt A computed and stored."""
    import torch
    from nanokv.integrations.transformers import generate_with_prefix
    model = make_model("llama", True)
    a, _ = prompts(args, model.config.vocab_size)
    client, store, prefix = open_nanokv(args, model)
    with torch.no_grad():
        _, info = generate_with_prefix(model, a, client, prefix, max_new_tokens=1, do_sample=False, pad_token_id=0)
    print(json.dumps(info), flush=True)
    prefix.close(), store.close(), client.close()


def start_kvd(args, run_dir, ipc):
    store = args.store_bytes
    config = os.path.join(run_dir, "kvd.yaml")
    with open(config, "w") as f:
        f.write(f"backend: cuda\nipc_name: {ipc}\nrun_dir: {run_dir}\ncapacity: {store + args.kv_bytes}\n"
                f"reserve_pages: 2\ndevices: [0]\nobject_store:\n  size: {store}\n")
    log = open(os.path.join(run_dir, "kvd.log"), "w")
    kvd = subprocess.Popen([args.kvd, "--config", config], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(run_dir, ipc + ".sock")):
        if kvd.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("prefix_reuse: kvd did not start:\n" + open(log.name).read()[-3000:])
        time.sleep(0.05)
    return kvd


def child(args, role, shape, env):
    argv = [sys.executable, os.path.abspath(__file__), "--role", role, "--shape", shape, "--ipc-name",
            args.ipc_name] + [f"--{k}={v}" for k, v in (("prompt-tokens", args.prompt_tokens),
                                                         ("shared-tokens", args.shared_tokens),
                                                         ("new-tokens", args.new_tokens), ("chunk", args.chunk),
                                                         ("repeats", args.repeats))]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise RuntimeError(f"prefix_reuse: {role} {shape} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kvd", default="build/entry/kvd")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--json", default="")
    p.add_argument("--role", default="", help=argparse.SUPPRESS)
    p.add_argument("--shape", default="llama", help=argparse.SUPPRESS)
    p.add_argument("--ipc-name", default="", help=argparse.SUPPRESS)
    p.add_argument("--prompt-tokens", type=int, default=0)
    p.add_argument("--shared-tokens", type=int, default=0)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=int, default=900)
    args = p.parse_args()
    args.prompt_tokens = args.prompt_tokens or (8192 if args.bench else 600)
    args.shared_tokens = args.shared_tokens or (7168 if args.bench else 520)
    if args.role:
        {"first": role_check, "second": role_check, "bench": role_bench, "fill": role_fill}[args.role](args)
        return
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        skip(f"{e.name} is not installed")
    if not torch.cuda.is_available():
        skip("PyTorch sees no CUDA device")
    # KV of both processes' caches, the store for prompt A's chunks and slack.
    args.store_bytes = (4 << 30) if args.bench else (256 << 20)
    args.kv_bytes = (6 << 30) if args.bench else (256 << 20)
    run_dir = tempfile.mkdtemp(prefix="nanokv_prefix_")
    args.ipc_name = f"prefix_{os.getpid()}"
    env = dict(os.environ, NANOKV_RUN_DIR=run_dir)
    kvd = start_kvd(args, run_dir, args.ipc_name)
    failed = False
    try:
        if args.bench:
            print("prefix_reuse: fill", child(args, "fill", "llama", env), flush=True)
            result = child(args, "bench", "llama", env)
            print(json.dumps(result, indent=2))
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(result, f, indent=2)
        else:
            for shape in ("llama", "qwen2"):
                first = child(args, "first", shape, env)
                second = child(args, "second", shape, env)
                print(f"prefix_reuse: {shape}: {json.dumps(first)}\nprefix_reuse: {shape}: {json.dumps(second)}")
                want_hit = args.shared_tokens // args.chunk * args.chunk
                ok = (first["same_as_dynamic_cache"] and second["same_as_dynamic_cache"] and first["hit"] == 0
                      and second["hit"] == want_hit and first["reuse_same_as_recompute"]
                      and second["reuse_same_as_recompute"] and first["logit_gap"] < 1e-3)
                print(f"prefix_reuse: {shape}: {'PASS' if ok else 'FAIL'} (hit {second['hit']} of {want_hit})")
                failed |= not ok
    finally:
        kvd.terminate()
        kvd.wait(timeout=30)
        shutil.rmtree(run_dir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
