"""Hugging Face transformers over nanokv: a Cache whose K/V live in nanokv
pages, and prefix reuse around generate() (docs/PYTHON.md, "Prefix reuse
with transformers").

    from nanokv.integrations.transformers import NanoKVCache, generate_with_prefix
    client = nanokv.Client(tenant="hf")
    prefix = nanokv.PrefixCache(nanokv.Objects(), **prefix_options(model, salt="tenant-a"))
    out = generate_with_prefix(model, input_ids, client, prefix, max_new_tokens=32)

Each layer reserves room for max_tokens tokens in a KVTensor (K then V, each
token-major [max_tokens, kv_heads, head_dim], the layout PrefixCache moves a
chunk of in one piece) and maps pages as tokens arrive. transformers sees
[1, kv_heads, tokens, head_dim] views of them (strided, no copy). One
sequence (batch 1) at a time; transformers and torch are imported here,
when this module is, not by nanokv.
"""
import torch
from transformers.cache_utils import Cache, DynamicLayer

from nanokv.errors import NanoKVError

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


def _shape(config):
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return text.num_hidden_layers, kv_heads, head_dim


def prefix_options(model, salt="", chunk_tokens=256):
    """PrefixCache keywords for `model`: its name, dtype and K/V shape in
    the namespace, so another model or dtype never shares its K/V."""
    layers, kv_heads, head_dim = _shape(model.config)
    dtype = model.dtype
    name = getattr(model.config, "_name_or_path", "") or model.config.model_type
    return dict(model=f"{model.config.model_type}:{name}", dtype=str(dtype).replace("torch.", ""),
                layout=f"thd:{kv_heads}x{head_dim}", salt=salt, layers=layers, planes_per_layer=2,
                token_bytes=kv_heads * head_dim * torch.empty((), dtype=dtype).element_size(),
                chunk_tokens=chunk_tokens)


class NanoKVLayer(DynamicLayer):
    """One layer's K and V in a KVTensor, pages mapped as tokens arrive."""

    def __init__(self, client, max_tokens, kv_heads, head_dim, dtype, device):
        super().__init__()
        if dtype not in _DTYPES:
            raise ValueError(f"nanokv: dtype {dtype} (one of {sorted(str(d) for d in _DTYPES)})")
        self.client, self.max_tokens, self.kv_heads, self.head_dim = client, max_tokens, kv_heads, head_dim
        self.dtype, self.device = dtype, torch.device(device)
        itemsize = torch.empty((), dtype=dtype).element_size()
        self.token_bytes = kv_heads * head_dim * itemsize
        page = client.page_bytes
        self.plane_pages = -(-max_tokens * self.token_bytes // page)
        self.tensor = client.tensor(2 * self.plane_pages * page, device=self.device.index or 0)
        self.mapped = 0  # pages mapped at the start of each plane
        self.length = 0
        # Each plane's first page before torch sees its address (torch asks
        # the driver about the pointer it imports).
        self.reserve(1)
        self.k_plane, self.v_plane = (self._plane(i * self.plane_pages * page) for i in range(2))
        self.is_initialized = True
        self._expose()

    def _plane(self, offset):
        name = _DTYPES[self.dtype]
        shape = (self.max_tokens, self.kv_heads, self.head_dim)
        view = self.tensor.view("uint16" if name == "bfloat16" else name, shape, offset)
        if self.device.type == "cuda":
            t = torch.as_tensor(view, device=self.device)
        else:
            t = torch.from_numpy(view)
        return t.view(torch.bfloat16) if name == "bfloat16" else t

    def reserve(self, tokens):
        """Maps the pages that `tokens` tokens of each plane need."""
        if tokens > self.max_tokens:
            raise NanoKVError(NanoKVError.INVALID_ARGUMENT,
                              f"InvalidArgument: nanokv cache: {tokens} tokens, room for {self.max_tokens}")
        need = -(-tokens * self.token_bytes // self.client.page_bytes)
        if need > self.mapped:
            for plane in range(2):
                self.tensor.map(plane * self.plane_pages + self.mapped, need - self.mapped)
            self.mapped = need

    def planes(self):
        """K and V as PrefixCache planes: contiguous, token-major."""
        return [self.k_plane.view(-1), self.v_plane.view(-1)]

    def set_length(self, tokens):
        self.reserve(tokens)
        self.length = tokens
        self._expose()

    def _expose(self):
        self.keys = self.k_plane[:self.length].permute(1, 0, 2).unsqueeze(0)
        self.values = self.v_plane[:self.length].permute(1, 0, 2).unsqueeze(0)

    def lazy_initialization(self, key_states):
        self.is_initialized = True

    def update(self, key_states, value_states, cache_kwargs=None):
        if key_states.shape[0] != 1:
            raise NanoKVError(NanoKVError.INVALID_ARGUMENT,
                              f"InvalidArgument: nanokv cache: batch of {key_states.shape[0]} (one sequence a cache)")
        n = key_states.shape[-2]
        self.reserve(self.length + n)
        self.k_plane[self.length:self.length + n].copy_(key_states[0].transpose(0, 1))
        self.v_plane[self.length:self.length + n].copy_(value_states[0].transpose(0, 1))
        self.length += n
        self._expose()
        return self.keys, self.values

    def get_seq_length(self):
        return self.length

    def crop(self, max_length):
        if max_length < 0:
            max_length = self.length - abs(max_length)
        self.length = max(0, min(self.length, max_length))
        self._expose()

    def close(self):
        self.keys = self.values = None
        self.k_plane = self.v_plane = None
        self.tensor.close()


class NanoKVCache(Cache):
    """A transformers Cache for `config` whose K/V are nanokv pages of
    `client` (a nanokv.Client), room for max_tokens tokens. close() (or
    the with statement) gives the pages back once the GPU work is done."""

    def __init__(self, config, client, max_tokens, dtype=torch.float16, device="cuda:0"):
        layers, kv_heads, head_dim = _shape(config)
        made = [NanoKVLayer(client, max_tokens, kv_heads, head_dim, dtype, device) for _ in range(layers)]
        super().__init__(layers=made)

    def planes(self):
        """Every layer's K and V, layer-major: PrefixCache's planes."""
        return [p for layer in self.layers for p in layer.planes()]

    def set_length(self, tokens):
        """Marks the first `tokens` tokens as held (after a load into planes())."""
        for layer in self.layers:
            layer.set_length(tokens)

    def reserve(self, tokens):
        for layer in self.layers:
            layer.reserve(tokens)

    def close(self):
        if self.layers and self.layers[0].device.type == "cuda":
            torch.cuda.synchronize(self.layers[0].device)
        for layer in self.layers:
            layer.close()
        self.layers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def generate_with_prefix(model, input_ids, client, prefix, max_new_tokens=32, cache=None, **generate_kwargs):
    """generate() with prefix reuse: looks the prompt up in `prefix` (a
    nanokv.PrefixCache made with prefix_options(model)), loads the hit into
    a NanoKVCache, prefills only the rest, and stores the prompt's new full
    chunks after. Returns (output ids, {"hit": tokens loaded, "stored":
    chunks written}). At least one prompt token is always prefilled (its
    logits pick the first new token)."""
    if input_ids.shape[0] != 1:
        raise NanoKVError(NanoKVError.INVALID_ARGUMENT,
                          f"InvalidArgument: generate_with_prefix: batch of {input_ids.shape[0]} (one prompt)")
    tokens = input_ids[0].tolist()
    own = cache is None
    if own:
        cache = NanoKVCache(model.config, client, len(tokens) + max_new_tokens, dtype=model.dtype,
                            device=input_ids.device)
    try:
        hit = prefix.lookup(tokens)
        if hit >= len(tokens):
            hit -= prefix.chunk_tokens
        loaded = 0
        if hit > 0:
            cache.reserve(hit)
            loaded = prefix.load(tokens, hit, cache.planes())
        cache.set_length(loaded)
        out = model.generate(input_ids, past_key_values=cache, max_new_tokens=max_new_tokens,
                             **generate_kwargs)
        stored = prefix.store(tokens, cache.planes(), start=loaded)
        return out, {"hit": loaded, "stored": stored}
    finally:
        if own:
            cache.close()
