/* The C ABI's prefix cache (nanokv/nanokv_prefix.h), compiled as C, against
 * a real kvd on the host backend with a store: a prompt's chunks stored from
 * a KV tensor's pages and loaded back byte-exact, the key of a chunk's plane,
 * views, hostile counts and pointers refused, and a store that cannot close
 * under a live prefix cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_check.h"
#include "nanokv/nanokv_prefix.h"

static char run_dir[] = "/tmp/nanokv_capi_prefix_XXXXXX";
static char ipc_name[64];

enum { kLayers = 2, kPlanes = 4, kTokenBytes = 512, kChunk = 8, kTokens = 36 };

static pid_t StartKvd(void) {
  char config[256], log_path[256], socket_path[256];
  snprintf(config, sizeof config, "%s/kvd.yaml", run_dir);
  snprintf(log_path, sizeof log_path, "%s/kvd.log", run_dir);
  snprintf(socket_path, sizeof socket_path, "%s/%s.sock", run_dir, ipc_name);
  FILE* f = fopen(config, "w");
  if (f == NULL) {
    perror(config);
    exit(2);
  }
  fprintf(f,
          "ipc_name: %s\nbackend: host\ncapacity: 32MiB\nhost_device_memory: 128MiB\nreserve_pages: 2\n"
          "run_dir: %s\nobject_store:\n  size: 8MiB\n",
          ipc_name, run_dir);
  fclose(f);
  char* const argv[] = {(char*)KvdBinary(), "--config", config, NULL};
  return SpawnKvd(argv, log_path, socket_path);
}

static void TestPrefix(nanokv_objects_t* store, nanokv_client_t* client, unsigned char* dev) {
  nanokv_prefix_options_t o;
  CHECK_OK(nanokv_prefix_options_init(&o));
  CHECK(o.chunk_tokens == 256 && o.planes_per_layer == 2 && o.preferred_device == -1 && o.replica_num == 1);
  o.model = "llama";
  o.dtype = "bf16";
  o.salt = "tenant";
  o.layers = kLayers;
  o.token_bytes = kTokenBytes;
  o.chunk_tokens = kChunk;
  nanokv_prefix_t* cache = NULL;
  CHECK_OK(nanokv_prefix_open_objects(store, &o, &cache));
  if (cache == NULL) return;

  int32_t tokens[kTokens];
  for (int i = 0; i < kTokens; ++i) tokens[i] = 3000 + i;
  const size_t plane_bytes = (size_t)kTokens * kTokenBytes;
  nanokv_prefix_plane_t src[kPlanes], dst[kPlanes];
  unsigned char* want = malloc(plane_bytes * kPlanes);
  for (size_t i = 0; i < plane_bytes * kPlanes; ++i) want[i] = (unsigned char)((i * 131u + (i >> 9)) & 0xff);
  CHECK_OK(nanokv_copy_to_device(client, dev, want, plane_bytes * kPlanes));
  CHECK_OK(nanokv_fill_device(client, dev + plane_bytes * kPlanes, 0, plane_bytes * kPlanes));
  for (int p = 0; p < kPlanes; ++p) {
    src[p].base = dev + p * plane_bytes;
    dst[p].base = dev + (kPlanes + p) * plane_bytes;
    src[p].capacity_tokens = dst[p].capacity_tokens = kTokens;
  }
  uint64_t hit = 99, written = 0, loaded = 0;
  CHECK_OK(nanokv_prefix_lookup(cache, tokens, kTokens, &hit));
  CHECK(hit == 0);
  CHECK_OK(nanokv_prefix_store(cache, tokens, kTokens, src, kPlanes, 0, NULL, &written));
  CHECK(written == 4); /* 32 of the 36 tokens */
  CHECK_OK(nanokv_prefix_lookup(cache, tokens, kTokens, &hit));
  CHECK(hit == 32);
  CHECK_OK(nanokv_prefix_load(cache, tokens, kTokens, hit, dst, kPlanes, NULL, &loaded));
  CHECK(loaded == 32);
  unsigned char* got = malloc(plane_bytes * kPlanes);
  CHECK_OK(nanokv_copy_to_host(client, got, dev + plane_bytes * kPlanes, plane_bytes * kPlanes));
  for (int p = 0; p < kPlanes; ++p) {
    CHECK(memcmp(got + p * plane_bytes, want + p * plane_bytes, 32 * kTokenBytes) == 0);
  }

  char key[128];
  CHECK_OK(nanokv_prefix_object_key(cache, tokens, kTokens, 1, key, sizeof key));
  CHECK(strncmp(key, "kvc:", 4) == 0 && strlen(key) == 4 + 64);
  CHECK_FAILS(nanokv_prefix_object_key(cache, tokens, kTokens, 4, key, sizeof key), NANOKV_INVALID_ARGUMENT,
              "chunk 4 of 4 chunks");
  CHECK_FAILS(nanokv_prefix_object_key(cache, tokens, kTokens, 0, key, 10), NANOKV_INVALID_ARGUMENT, "capacity is 10");

  /* A view per chunk: its planes end to end. */
  nanokv_view_t* views[2];
  size_t made = 0;
  const size_t part = (size_t)kChunk * kTokenBytes;
  CHECK_OK(nanokv_prefix_views(cache, tokens, kTokens, 16, views, 2, &made));
  CHECK(made == 2);
  for (size_t chunk = 0; chunk < made; ++chunk) {
    const void* data = NULL;
    uint64_t size = 0;
    CHECK_OK(nanokv_view_data(views[chunk], &data));
    CHECK_OK(nanokv_view_size(views[chunk], &size));
    CHECK(size == (uint64_t)kPlanes * part);
    for (int p = 0; p < kPlanes; ++p) {
      CHECK(memcmp((const unsigned char*)data + p * part, want + p * plane_bytes + chunk * part, part) == 0);
    }
    CHECK_OK(nanokv_view_free(views[chunk]));
  }
  CHECK_FAILS(nanokv_prefix_views(cache, tokens, kTokens, 16, views, 1, &made), NANOKV_INVALID_ARGUMENT,
              "2 views, room for 1");

  /* A block table (a paged engine's): chunk c of plane p at its own
   * address; the first two chunks loaded into dst's planes as blocks. */
  {
    void* blocks[2 * kPlanes];
    for (int c = 0; c < 2; ++c) {
      for (int p = 0; p < kPlanes; ++p) blocks[c * kPlanes + p] = (unsigned char*)dst[p].base + (size_t)c * part;
    }
    CHECK_OK(nanokv_fill_device(client, dev + plane_bytes * kPlanes, 0, plane_bytes * kPlanes));
    CHECK_OK(nanokv_prefix_load_blocks(cache, tokens, kTokens, 16, blocks, 2 * kPlanes, NULL, &loaded));
    CHECK(loaded == 16);
    CHECK_OK(nanokv_copy_to_host(client, got, dev + plane_bytes * kPlanes, plane_bytes * kPlanes));
    for (int p = 0; p < kPlanes; ++p) CHECK(memcmp(got + p * plane_bytes, want + p * plane_bytes, 2 * part) == 0);
    CHECK_FAILS(nanokv_prefix_load_blocks(cache, tokens, kTokens, 16, blocks, 3, NULL, &loaded),
                NANOKV_INVALID_ARGUMENT, "3 blocks given, 2 chunks of 4 planes need 8");
    CHECK_FAILS(nanokv_prefix_store_blocks(cache, tokens, kTokens, NULL, 16, 0, NULL, NULL), NANOKV_INVALID_ARGUMENT,
                "blocks is null");
  }

  /* Hostile: no tokens, a billion of them (refused on the count: the
   * pointer is never read), null pointers, planes that do not fit. */
  CHECK_FAILS(nanokv_prefix_lookup(cache, tokens, 0, &hit), NANOKV_INVALID_ARGUMENT, "no tokens");
  CHECK_FAILS(nanokv_prefix_lookup(cache, tokens, 1000000000u, &hit), NANOKV_INVALID_ARGUMENT,
              "1000000000 tokens (at most 4194304)");
  CHECK_FAILS(nanokv_prefix_lookup(cache, NULL, 8, &hit), NANOKV_INVALID_ARGUMENT, "tokens is null");
  CHECK_FAILS(nanokv_prefix_store(cache, tokens, kTokens, NULL, kPlanes, 0, NULL, NULL), NANOKV_INVALID_ARGUMENT,
              "planes is null");
  CHECK_FAILS(nanokv_prefix_store(cache, tokens, kTokens, src, 3, 0, NULL, NULL), NANOKV_INVALID_ARGUMENT,
              "3 planes given, the layout has 4");
  CHECK_FAILS(nanokv_prefix_load(cache, tokens, kTokens, 32, dst, 1u << 30, NULL, &loaded), NANOKV_INVALID_ARGUMENT,
              "planes (at most 4096)");
  CHECK_FAILS(nanokv_prefix_lookup(NULL, tokens, kTokens, &hit), NANOKV_INVALID_ARGUMENT, "prefix cache is null");
  o.layers = 0;
  nanokv_prefix_t* bad = NULL;
  CHECK_FAILS(nanokv_prefix_open_objects(store, &o, &bad), NANOKV_INVALID_ARGUMENT, "0 layers");
  CHECK(bad == NULL);

  /* The store stays while a prefix cache on it lives. */
  CHECK_FAILS(nanokv_objects_close(store), NANOKV_FAILED_PRECONDITION,
              "plan(s) made on it are still alive (prefix caches count)");
  CHECK_OK(nanokv_prefix_close(cache));
  CHECK_FAILS(nanokv_prefix_close(cache), NANOKV_INVALID_ARGUMENT, "unknown prefix cache handle");
  free(got);
  free(want);
}

int main(void) {
  if (mkdtemp(run_dir) == NULL) {
    perror("mkdtemp");
    return 2;
  }
  snprintf(ipc_name, sizeof ipc_name, "capi_prefix_%d", (int)getpid());
  setenv("NANOKV_RUN_DIR", run_dir, 1);
  setenv("NANOKV_LOG_LEVEL", "warn", 1);
  pid_t kvd = StartKvd();

  nanokv_objects_options_t so;
  CHECK_OK(nanokv_objects_options_init(&so));
  so.ipc_name = ipc_name;
  nanokv_objects_t* store = NULL;
  CHECK_OK(nanokv_objects_open(&so, &store));
  nanokv_options_t co;
  CHECK_OK(nanokv_options_init(&co));
  co.ipc_name = ipc_name;
  co.tenant = "capi-prefix";
  nanokv_client_t* client = NULL;
  CHECK_OK(nanokv_attach(&co, &client));
  nanokv_tensor_t* tensor = NULL;
  unsigned char* dev = NULL;
  if (client != NULL) {
    CHECK_OK(nanokv_tensor_create(client, 0, 2u << 20, &tensor));
    CHECK_OK(nanokv_tensor_grow(tensor, 1));
    CHECK_OK(nanokv_tensor_data(tensor, (void**)&dev));
  }
  if (store != NULL && dev != NULL) TestPrefix(store, client, dev);
  if (tensor != NULL) CHECK_OK(nanokv_tensor_destroy(tensor));
  if (client != NULL) CHECK_OK(nanokv_detach(client));
  if (store != NULL) CHECK_OK(nanokv_objects_close(store));
  StopKvdPid(kvd);

  if (failures == 0) {
    char command[300];
    snprintf(command, sizeof command, "rm -rf %s", run_dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", run_dir);
  } else {
    fprintf(stderr, "kvd's log is in %s/kvd.log\n", run_dir);
  }
  printf("capi_prefix_test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
