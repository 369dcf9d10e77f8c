"""nanokv.integrations.transformers on the host backend with PyTorch on the
CPU (skipped where torch or transformers is missing; the GPU machine runs
examples/python/prefix_reuse.py on cuda): a random-weight Llama-shaped
model generates the same greedy tokens with NanoKVCache as with
DynamicCache, and generate_with_prefix's second call loads the prompt's
prefix from the store and still generates the same tokens."""
import unittest

from kvd_process import PAGE, KvdTestCase

try:
    import numpy  # noqa: F401  (host-backend pages reach torch through numpy)
    import torch
    import transformers
except ImportError:
    torch = None


@unittest.skipIf(torch is None, "torch, transformers or numpy is not installed")
class TransformersIntegrationTest(KvdTestCase):
    PAGES = 64
    EXTRA_CONFIG = f"object_store:\n  size: {16 * PAGE}\n"

    def setUp(self):
        super().setUp()
        import nanokv
        from nanokv.integrations import transformers as integration
        self.nanokv, self.integration = nanokv, integration
        torch.manual_seed(7)
        config = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
        self.model = transformers.AutoModelForCausalLM.from_config(config).to(torch.float32).eval()
        self.client = self.attach("hf")
        self.store = nanokv.Objects(ipc_name=self.ipc)
        self.addCleanup(self.store.close)

    def greedy(self, ids, cache):
        with torch.no_grad():
            out = self.model.generate(ids, past_key_values=cache, max_new_tokens=8, do_sample=False, pad_token_id=0)
        return out[0, ids.shape[1]:].tolist()

    def test_greedy_tokens_equal_dynamic_cache_with_and_without_reuse(self):
        ids = torch.randint(0, 300, (1, 150), generator=torch.Generator().manual_seed(3))
        with self.integration.NanoKVCache(self.model.config, self.client, 160, dtype=torch.float32,
                                          device="cpu") as cache:
            ours = self.greedy(ids, cache)
        theirs = self.greedy(ids, transformers.DynamicCache(config=self.model.config))
        self.assertEqual(ours, theirs)
        prefix = self.nanokv.PrefixCache(self.store, **self.integration.prefix_options(self.model, chunk_tokens=32))
        for want_hit, want_stored in ((0, 4), (128, 0)):
            with torch.no_grad():
                out, info = self.integration.generate_with_prefix(self.model, ids, self.client, prefix,
                                                                  max_new_tokens=8, do_sample=False, pad_token_id=0)
            self.assertEqual(info, {"hit": want_hit, "stored": want_stored})
            self.assertEqual(out[0, ids.shape[1]:].tolist(), theirs)


if __name__ == "__main__":
    unittest.main()
