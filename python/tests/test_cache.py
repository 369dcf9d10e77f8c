"""nanokv.KVCache against a real kvd on the host backend: sequences, block
tables, slots, zero-copy K/V arrays laid out as the view says, pages
following blocks, errors."""
import time
import unittest

import numpy as np

from kvd_process import KvdTestCase

import nanokv
from nanokv import NanoKVError


class CacheTest(KvdTestCase):
    PAGES = 32

    def make(self, client, **overrides):
        config = dict(layers=2, kv_heads=2, head_dim=64, block_size=16, dtype="float16",
                      num_blocks=512)
        config.update(overrides)
        cache = client.cache(**config)
        self.addCleanup(cache.close)
        return cache

    def test_sequences_blocks_and_slots(self):
        c = self.attach("py-cache")
        cache = self.make(c)
        self.assertEqual(cache.num_blocks, 512)
        cache.allocate_for(1, 20)
        table = cache.block_table(1)
        self.assertEqual(len(table), 2)
        slot = cache.append_token(1)
        self.assertEqual(slot, table[1] * 16 + 4)
        self.assertEqual(cache.used_tokens(1), 21)
        self.assertEqual(cache.slot_of(1, 0), table[0] * 16)
        self.assertEqual(cache.slots(1)[-1], slot)
        cache.append_tokens(1, 20)
        self.assertEqual(len(cache.block_table(1)), 3)
        with self.assertRaises(NanoKVError) as e:
            cache.allocate_for(1, 1)
        self.assertEqual(e.exception.code, NanoKVError.ALREADY_EXISTS)
        with self.assertRaises(NanoKVError) as e:
            cache.append_token(99)
        self.assertEqual(e.exception.code, NanoKVError.NOT_FOUND)
        stats = cache.stats()
        self.assertEqual((stats["used_blocks"], stats["sequences"], stats["used_tokens"]), (3, 1, 41))
        self.assertGreater(stats["mapped_pages"], 0)
        self.assertIn("block", cache.dump().lower())
        cache.free_for(1)
        self.assertEqual(cache.stats()["mapped_pages"], 0)  # pages went back to kvd

    def test_arrays_follow_the_layout_contract(self):
        for layout in ("block_major", "head_major"):
            with self.subTest(layout=layout):
                c = self.attach("py-layout-" + layout)
                cache = self.make(c, layout=layout)
                cache.allocate_for(7, 40)
                k = cache.k(1)
                view = cache.k_view(1)
                self.assertIsInstance(k, np.ndarray)
                self.assertEqual(k.__array_interface__["data"][0], view.data_ptr)
                heads, dim, bs = 2, 64, 16
                # Write every token of the sequence through the 4-d array...
                for pos, s in enumerate(cache.slots(7)):
                    for h in range(heads):
                        row = np.full(dim, pos * 10 + h, np.float16)
                        if layout == "block_major":
                            k[s // bs, h, s % bs, :] = row
                        else:
                            k[h, s // bs, s % bs, :] = row
                # ...and read it back by the contract's flat formula.
                for pos, s in enumerate(cache.slots(7)):
                    for h in range(heads):
                        offset = ((s // bs) * view.block_stride + h * view.head_stride +
                                  (s % bs) * view.slot_stride) * view.element_bytes
                        got = np.frombuffer(c.copy_to_host(view.data_ptr + offset, 2 * dim),
                                            np.float16)
                        self.assertTrue((got == pos * 10 + h).all(), (pos, h))
                cache.free_for(7)

    def test_kept_pages_answer_kvds_reclaim(self):
        c = self.attach("py-reclaim")
        cache = self.make(c, num_blocks=1024, keep_free_groups=2)  # 512 blocks per page
        cache.allocate_for(1, 600 * 16)  # two page groups: 2 x (K, V) x 2 layers = 8 pages
        cache.free_for(1)
        stats = cache.stats()
        self.assertEqual((stats["used_blocks"], stats["mapped_pages"]), (0, 8))  # kept mapped
        self.assertEqual(cache.release_pending_reclaim(), 0)  # kvd wants nothing back yet
        c.set_limit(4 * (2 << 20))
        self.assertGreater(c.pending_reclaim_pages, 0)
        self.assertGreaterEqual(cache.release_pending_reclaim(), 4)
        self.assertLessEqual(cache.stats()["mapped_pages"], 4)

    def test_the_reserve_serves_allocations_and_answers_reclaim(self):
        c = self.attach("py-reserve")
        cache = self.make(c, num_blocks=1024, reserve_low_blocks=8, reserve_high_blocks=32)
        deadline = time.monotonic() + 5
        while cache.stats()["reserve_blocks"] < 32 and time.monotonic() < deadline:
            time.sleep(0.01)  # filled by the cache's background thread
        stats = cache.stats()
        self.assertEqual((stats["reserve_blocks"], stats["mapped_pages"]), (32, 4))
        cache.allocate_for(1, 10 * 16)  # from the reserve: no page more
        stats = cache.stats()
        self.assertEqual((stats["reserve_blocks"], stats["reserve_hits"]), (22, 1))
        self.assertEqual((stats["used_blocks"], stats["groups_mapped"]), (10, 1))
        cache.free_for(1)  # back into the reserve
        self.assertEqual(cache.stats()["reserve_blocks"], 32)
        self.assertEqual(cache.release_free_pages(4), 4)  # the reserve's group
        self.assertEqual(cache.stats()["reserve_blocks"], 0)
        with self.assertRaises(NanoKVError) as e:
            self.make(c, reserve_low_blocks=9, reserve_high_blocks=8)
        self.assertEqual(e.exception.code, NanoKVError.INVALID_ARGUMENT)

    def test_out_of_blocks_and_bad_config(self):
        c = self.attach("py-cache-bad")
        cache = self.make(c, num_blocks=4)
        with self.assertRaises(NanoKVError) as e:
            cache.allocate_for(1, 5 * 16)
        self.assertEqual(e.exception.code, NanoKVError.RESOURCE_EXHAUSTED)
        self.assertEqual(cache.stats()["used_blocks"], 0)
        with self.assertRaises(NanoKVError) as e:
            c.cache(layers=0, kv_heads=2, head_dim=64, num_blocks=4)
        self.assertEqual(e.exception.code, NanoKVError.INVALID_ARGUMENT)
        with self.assertRaises(ValueError):
            c.cache(layers=1, kv_heads=2, head_dim=64, num_blocks=4, layout="diagonal")
        with self.assertRaises(NanoKVError):
            cache.k_view(2)

    def test_paged_append_checks_arguments(self):
        if not nanokv.kernels.available():
            self.skipTest("libnanokv built without the device kernels")
        # Checked before any launch (so no GPU is needed): a float32 key is refused.
        c = self.attach("py-append")
        cache = self.make(c)

        class Fake:
            dtype = "float32"
        with self.assertRaises(ValueError):
            nanokv.kernels.paged_append(cache, 0, Fake(), Fake(), Fake())


if __name__ == "__main__":
    unittest.main()
