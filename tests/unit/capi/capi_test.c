/* The C ABI (nanokv/nanokv.h), compiled as C, against a real kvd process on
 * the host backend (NANOKV_KVD_BINARY, started here with its socket in a
 * temporary run directory): attach, geometry, grant/share/return, limits,
 * KV tensors and their bytes, two tenants of one group sharing pages, and
 * bad input (null pointers, unknown and freed handles, out-of-range
 * indices), each with its code and message. Exit status 0 when all pass. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nanokv/nanokv.h"
#include "capi_check.h"

#define CHECK_FAILS_NOT(call) CHECK_OK(call)

enum { kPages = 16 };
static const uint64_t kPage = 2u << 20;
static char run_dir[] = "/tmp/nanokv_capi_XXXXXX";
static char ipc_name[64];
static pid_t kvd_pid = -1;

/* Starts kvd `name` in run_dir; `max_connections` NULL for kvd's default. */
static pid_t StartKvdNamed(const char* name, const char* max_connections) {
  char capacity[32], memory[32], log_path[256], socket_path[256];
  snprintf(capacity, sizeof capacity, "%llu", (unsigned long long)(kPages * kPage));
  snprintf(memory, sizeof memory, "%llu", (unsigned long long)(4 * kPages * kPage));
  snprintf(log_path, sizeof log_path, "%s/%s.log", run_dir, name);
  snprintf(socket_path, sizeof socket_path, "%s/%s.sock", run_dir, name);
  char* const argv[] = {(char*)KvdBinary(), "--backend", "host", "--ipc-name", (char*)name, "--capacity", capacity,
                        "--host-device-memory", memory, "--reserve-pages", "2", "--run-dir", run_dir,
                        max_connections != NULL ? "--max-connections" : NULL, (char*)max_connections, NULL};
  return SpawnKvd(argv, log_path, socket_path);
}

static void StartKvd(void) { kvd_pid = StartKvdNamed(ipc_name, NULL); }

static void StopKvd(void) { StopKvdPid(kvd_pid); }

/* A refusal at connect reaches the engine as its own error, naming the
 * cause and kvd's config key, never as a protocol error (issue 16). */
static void TestRefusalAtConnect(void) {
  char name[64];
  snprintf(name, sizeof name, "capi_%d_full", (int)getpid());
  pid_t pid = StartKvdNamed(name, "1");
  nanokv_options_t options;
  CHECK_OK(nanokv_options_init(&options));
  options.ipc_name = name;
  options.tenant = "first";
  nanokv_client_t* first = NULL;
  CHECK_OK(nanokv_attach(&options, &first));
  options.tenant = "second";
  nanokv_client_t* second = NULL;
  CHECK_FAILS(nanokv_attach(&options, &second), NANOKV_RESOURCE_EXHAUSTED,
              "its most (max_connections in kvd's config");
  CHECK(strstr(nanokv_last_error(), "request id 0") == NULL);
  CHECK(second == NULL);
  if (first != NULL) CHECK_OK(nanokv_detach(first));
  StopKvdPid(pid);
}

/* A refusal of the attach itself is its own code and message too. */
static void TestRefusalAtAttach(void) {
  nanokv_options_t options;
  CHECK_OK(nanokv_options_init(&options));
  options.ipc_name = ipc_name;
  options.tenant = "capi-twin";
  nanokv_client_t* first = NULL;
  nanokv_client_t* again = NULL;
  CHECK_OK(nanokv_attach(&options, &first));
  CHECK_FAILS(nanokv_attach(&options, &again), NANOKV_ALREADY_EXISTS,
              "a tenant named 'capi-twin' is already attached");
  static const int kFarDevice[] = {5};
  options.tenant = "capi-far";
  options.devices = kFarDevice;
  options.device_count = 1;
  CHECK_FAILS(nanokv_attach(&options, &again), NANOKV_NOT_FOUND,
              "kvd does not serve device 5 (it serves 0: devices in kvd's config)");
  CHECK(strstr(nanokv_last_error(), "request id 0") == NULL);
  CHECK(again == NULL);
  if (first != NULL) CHECK_OK(nanokv_detach(first));
}

static nanokv_client_t* AttachAs(const char* tenant, const char* group) {
  nanokv_options_t options;
  CHECK_OK(nanokv_options_init(&options));
  options.ipc_name = ipc_name;
  options.tenant = tenant;
  options.group = group;
  nanokv_client_t* client = NULL;
  CHECK_OK(nanokv_attach(&options, &client));
  return client;
}

/* Without a kvd: the error machinery and attach's refusals. */
static void TestErrorsWithoutKvd(void) {
  CHECK(strcmp(nanokv_code_name(NANOKV_OK), "OK") == 0);
  CHECK(strcmp(nanokv_code_name(NANOKV_RESOURCE_EXHAUSTED), "ResourceExhausted") == 0);
  CHECK(strcmp(nanokv_code_name(NANOKV_INTERNAL), "Internal") == 0);
  CHECK(strcmp(nanokv_code_name(-1), "Unknown") == 0);
  CHECK(strcmp(nanokv_code_name(99), "Unknown") == 0);
  CHECK(nanokv_abi_version() == NANOKV_ABI_VERSION);

  nanokv_client_t* client = (nanokv_client_t*)0x1;
  CHECK_FAILS(nanokv_attach(NULL, &client), NANOKV_INVALID_ARGUMENT, "options is null");
  CHECK(client == (nanokv_client_t*)0x1); /* out-parameters untouched on failure */
  CHECK_FAILS(nanokv_options_init(NULL), NANOKV_INVALID_ARGUMENT, "options is null");

  nanokv_options_t options;
  CHECK_OK(nanokv_options_init(&options));
  CHECK(options.request_timeout_ms == 60000);
  CHECK_FAILS(nanokv_attach(&options, NULL), NANOKV_INVALID_ARGUMENT, "client_out is null");
  options.ipc_name = "nobody_listens_here";
  CHECK_FAILS(nanokv_attach(&options, &client), NANOKV_UNAVAILABLE, "");
  options.device_count = 2;
  CHECK_FAILS(nanokv_attach(&options, &client), NANOKV_INVALID_ARGUMENT, "devices is null");

  unsetenv("ENABLE_NANOKV");
  unsetenv("ENABLE_KVCACHED");
  CHECK_FAILS(nanokv_attach_from_env(&client), NANOKV_NOT_FOUND, "");
  setenv("ENABLE_NANOKV", "maybe", 1);
  CHECK_FAILS(nanokv_attach_from_env(&client), NANOKV_INVALID_ARGUMENT, "ENABLE_NANOKV");
  unsetenv("ENABLE_NANOKV");
}

static void* OtherThread(void* arg) {
  (void)arg;
  /* The message is per thread: this thread has failed nothing yet. */
  return (void*)(strcmp(nanokv_last_error(), "") == 0 ? (void*)1 : NULL);
}

static void TestThreadLocalError(void) {
  CHECK_FAILS(nanokv_detach(NULL), NANOKV_INVALID_ARGUMENT, "client is null");
  pthread_t thread;
  void* clean = NULL;
  CHECK(pthread_create(&thread, NULL, OtherThread, NULL) == 0);
  pthread_join(thread, &clean);
  CHECK(clean == (void*)1);
  CHECK(strstr(nanokv_last_error(), "nanokv_detach") != NULL);
}

static void TestGeometryAndPages(void) {
  nanokv_client_t* client = AttachAs("capi-a", "g1");
  if (client == NULL) return;
  uint64_t page_bytes = 0, limit = 0;
  const char* backend = NULL;
  const char* tenant = NULL;
  uint32_t id = 0;
  size_t devices = 0;
  int connected = 0;
  CHECK_OK(nanokv_client_page_bytes(client, &page_bytes));
  CHECK(page_bytes == kPage);
  CHECK_OK(nanokv_client_backend(client, &backend));
  CHECK(backend != NULL && strcmp(backend, "host") == 0);
  CHECK_OK(nanokv_client_tenant(client, &tenant));
  CHECK(tenant != NULL && strcmp(tenant, "capi-a") == 0);
  CHECK_OK(nanokv_client_tenant_id(client, &id));
  CHECK_OK(nanokv_client_connected(client, &connected));
  CHECK(connected == 1);
  CHECK_OK(nanokv_client_limit_bytes(client, &limit));
  CHECK(limit == kPages * kPage);
  CHECK_OK(nanokv_client_device_count(client, &devices));
  CHECK(devices == 1);
  nanokv_device_t device;
  CHECK_OK(nanokv_client_device(client, 0, &device));
  CHECK(device.device == 0 && device.page_bytes == kPage && device.capacity_pages == kPages);
  CHECK_FAILS(nanokv_client_device(client, 1, &device), NANOKV_INVALID_ARGUMENT, "index 1 of 1");
  CHECK_FAILS(nanokv_client_page_bytes(client, NULL), NANOKV_INVALID_ARGUMENT, "out is null");

  uint32_t ids[4], generations[4];
  CHECK_OK(nanokv_grant(client, 0, 3, ids, generations));
  CHECK(ids[0] != ids[1] && ids[1] != ids[2]);
  CHECK_FAILS(nanokv_grant(client, 0, kPages, ids, NULL), NANOKV_RESOURCE_EXHAUSTED, "");
  CHECK_FAILS(nanokv_grant(client, 7, 1, ids, NULL), NANOKV_INVALID_ARGUMENT, "");
  CHECK_FAILS(nanokv_grant(client, 0, 1, NULL, NULL), NANOKV_INVALID_ARGUMENT, "ids_out is null");
  CHECK_OK(nanokv_return(client, 0, ids, 3));
  CHECK(nanokv_return(client, 0, ids, 1) != NANOKV_OK); /* not held any more */
  CHECK_FAILS(nanokv_return(client, 0, NULL, 2), NANOKV_INVALID_ARGUMENT, "ids is null");

  uint64_t applied = 0;
  CHECK_OK(nanokv_set_limit(client, 4 * kPage, &applied));
  CHECK(applied == 4 * kPage);
  CHECK_FAILS(nanokv_grant(client, 0, 5, ids, NULL), NANOKV_RESOURCE_EXHAUSTED, "");
  CHECK_OK(nanokv_set_limit(client, kPages * kPage, NULL));
  uint32_t pending = 99;
  CHECK_OK(nanokv_pending_reclaim_pages(client, &pending));
  CHECK(pending == 0);
  CHECK_OK(nanokv_detach(client));
  /* The handle is gone: a stale pointer is refused, not followed. */
  CHECK_FAILS(nanokv_client_page_bytes(client, &page_bytes), NANOKV_INVALID_ARGUMENT,
              "unknown client handle");
  CHECK_FAILS(nanokv_detach(client), NANOKV_INVALID_ARGUMENT, "unknown client handle");
}

static void TestTensorsAndSharing(void) {
  nanokv_client_t* writer = AttachAs("capi-writer", "g2");
  if (writer == NULL) return;
  nanokv_tensor_t* tensor = NULL;
  CHECK_FAILS(nanokv_tensor_create(writer, 0, 0, &tensor), NANOKV_INVALID_ARGUMENT, "0 bytes");
  CHECK_FAILS(nanokv_tensor_create(writer, 0, kPage, NULL), NANOKV_INVALID_ARGUMENT,
              "tensor_out is null");
  int garbage = 0;
  CHECK_FAILS(nanokv_tensor_create((nanokv_client_t*)&garbage, 0, kPage, &tensor),
              NANOKV_INVALID_ARGUMENT, "unknown client handle");
  CHECK_OK(nanokv_tensor_create(writer, 0, 8 * kPage - 1, &tensor));
  if (tensor == NULL) return;
  uint64_t count = 0, mapped = 99, prefix = 99;
  CHECK_OK(nanokv_tensor_page_count(tensor, &count));
  CHECK(count == 8);
  CHECK_OK(nanokv_tensor_mapped_pages(tensor, &mapped));
  CHECK(mapped == 0);
  CHECK_OK(nanokv_tensor_grow(tensor, 2));
  CHECK_OK(nanokv_tensor_mapped_prefix(tensor, &prefix));
  CHECK(prefix == 2);
  CHECK_OK(nanokv_tensor_map(tensor, 5, 1));
  CHECK_OK(nanokv_tensor_mapped_pages(tensor, &mapped));
  CHECK(mapped == 3);
  CHECK_FAILS(nanokv_tensor_map(tensor, 7, 2), NANOKV_INVALID_ARGUMENT, "");
  CHECK_FAILS(nanokv_tensor_map(tensor, UINT64_MAX, 2), NANOKV_INVALID_ARGUMENT, "");
  int64_t page_ids[8];
  CHECK_OK(nanokv_tensor_page_ids(tensor, 0, 8, page_ids));
  CHECK(page_ids[0] >= 0 && page_ids[1] >= 0 && page_ids[5] >= 0);
  CHECK(page_ids[2] == -1 && page_ids[7] == -1);
  CHECK_FAILS(nanokv_tensor_page_ids(tensor, 4, 5, page_ids), NANOKV_INVALID_ARGUMENT, "of a tensor of 8");
  int device = -1;
  uint64_t tensor_page_bytes = 0;
  CHECK_OK(nanokv_tensor_device(tensor, &device));
  CHECK(device == 0);
  CHECK_OK(nanokv_tensor_page_bytes(tensor, &tensor_page_bytes));
  CHECK(tensor_page_bytes == kPage);

  /* Bytes: a pattern in pages 0 and 1, written through the backend. */
  void* data = NULL;
  CHECK_OK(nanokv_tensor_data(tensor, &data));
  CHECK(data != NULL);
  unsigned char* pattern = malloc(2 * kPage);
  unsigned char* back = malloc(2 * kPage);
  for (uint64_t i = 0; i < 2 * kPage; ++i) pattern[i] = (unsigned char)(i * 7 + 3);
  CHECK_OK(nanokv_copy_to_device(writer, data, pattern, 2 * kPage));
  CHECK_OK(nanokv_copy_to_host(writer, back, data, 2 * kPage));
  CHECK(memcmp(pattern, back, 2 * kPage) == 0);
  CHECK_OK(nanokv_fill_device(writer, (char*)data + 5 * kPage, 0xAB, kPage));
  CHECK_OK(nanokv_copy_to_host(writer, back, (char*)data + 5 * kPage, 16));
  CHECK(back[0] == 0xAB && back[15] == 0xAB);
  /* Page 2 is not mapped: the host backend refuses, as a GPU would fault. */
  CHECK(nanokv_copy_to_host(writer, back, (char*)data + 2 * kPage, 16) != NANOKV_OK);
  CHECK_FAILS(nanokv_copy_to_host(writer, NULL, data, 16), NANOKV_INVALID_ARGUMENT, "dst is null");
  /* Issue 19 item 11: spans that wrap the address space are an error, not a crash. */
  CHECK_FAILS(nanokv_copy_to_host(writer, back, data, SIZE_MAX), NANOKV_INVALID_ARGUMENT,
              "end of the address space");
  CHECK_FAILS(nanokv_fill_device(writer, (char*)data + kPage - 1, 0, SIZE_MAX), NANOKV_INVALID_ARGUMENT,
              "end of the address space");
  CHECK_FAILS(nanokv_copy_to_device(writer, pattern, back, 16), NANOKV_INVALID_ARGUMENT,
              "not device memory");

  /* A tenant of the same group maps the same pages and reads the same bytes. */
  nanokv_client_t* reader = AttachAs("capi-reader", "g2");
  nanokv_tensor_t* view = NULL;
  if (reader != NULL) {
    CHECK_OK(nanokv_tensor_create(reader, 0, 4 * kPage, &view));
    uint32_t shared_ids[2] = {(uint32_t)page_ids[0], (uint32_t)page_ids[1]};
    CHECK_OK(nanokv_tensor_map_shared(view, 1, 0, shared_ids, 2));
    CHECK_FAILS(nanokv_tensor_map_shared(view, 1, 0, shared_ids, 2), NANOKV_FAILED_PRECONDITION, "");
    CHECK_FAILS(nanokv_tensor_map_shared(view, 3, 0, NULL, 1), NANOKV_INVALID_ARGUMENT, "ids is null");
    void* view_data = NULL;
    CHECK_OK(nanokv_tensor_data(view, &view_data));
    memset(back, 0, 2 * kPage);
    CHECK_OK(nanokv_copy_to_host(reader, back, (char*)view_data + kPage, 2 * kPage));
    CHECK(memcmp(pattern, back, 2 * kPage) == 0);
    /* Detach with a live tensor is refused and changes nothing. */
    CHECK_FAILS(nanokv_detach(reader), NANOKV_FAILED_PRECONDITION, "destroy them first");
    CHECK_OK(nanokv_tensor_unmap(view, 0, 4));
    CHECK_OK(nanokv_tensor_destroy(view));
    CHECK_FAILS(nanokv_tensor_grow(view, 1), NANOKV_INVALID_ARGUMENT, "unknown tensor handle");
    CHECK_FAILS(nanokv_tensor_destroy(view), NANOKV_INVALID_ARGUMENT, "unknown tensor handle");
    CHECK_OK(nanokv_detach(reader));
  }

  /* Another group may not share them. */
  nanokv_client_t* stranger = AttachAs("capi-stranger", "other");
  if (stranger != NULL) {
    uint32_t one = (uint32_t)page_ids[0];
    CHECK_FAILS(nanokv_share(stranger, 0, &one, 1, NULL), NANOKV_PERMISSION_DENIED, "");
    CHECK_OK(nanokv_detach(stranger));
  }

  CHECK_OK(nanokv_tensor_shrink(tensor, 1));
  CHECK_OK(nanokv_tensor_mapped_prefix(tensor, &prefix));
  CHECK(prefix == 1);
  CHECK_FAILS(nanokv_tensor_data(NULL, &data), NANOKV_INVALID_ARGUMENT, "tensor is null");
  CHECK_FAILS(nanokv_tensor_data((nanokv_tensor_t*)writer, &data), NANOKV_INVALID_ARGUMENT,
              "unknown tensor handle"); /* a client is not a tensor */
  CHECK_OK(nanokv_tensor_destroy(tensor));
  CHECK_OK(nanokv_detach(writer));
  free(pattern);
  free(back);
}

static void TestAttachFromEnv(void) {
  setenv("ENABLE_NANOKV", "1", 1);
  setenv("NANOKV_IPC_NAME", ipc_name, 1);
  setenv("NANOKV_TENANT", "capi-env", 1);
  setenv("NANOKV_LIMIT", "4MiB", 1);
  nanokv_client_t* client = NULL;
  CHECK_OK(nanokv_attach_from_env(&client));
  if (client != NULL) {
    const char* tenant = NULL;
    uint64_t limit = 0;
    CHECK_OK(nanokv_client_tenant(client, &tenant));
    CHECK(tenant != NULL && strcmp(tenant, "capi-env") == 0);
    CHECK_OK(nanokv_client_limit_bytes(client, &limit));
    CHECK(limit == 2 * kPage);
    CHECK_OK(nanokv_detach(client));
  }
  unsetenv("ENABLE_NANOKV");
  unsetenv("NANOKV_LIMIT");
}

static void TestCache(void) {
  nanokv_client_t* client = AttachAs("capi-cache", "g3");
  if (client == NULL) return;
  nanokv_cache_config_t config;
  CHECK_OK(nanokv_cache_config_init(&config));
  CHECK(config.block_size == 16 && config.dtype == NANOKV_KV_BFLOAT16 &&
        config.layout == NANOKV_LAYOUT_BLOCK_MAJOR);
  config.layers = 2;
  config.kv_heads = 2;
  config.head_dim = 64;
  config.dtype = NANOKV_KV_FLOAT16;
  config.num_blocks = 256;
  nanokv_cache_t* cache = NULL;
  CHECK_FAILS(nanokv_cache_create(client, NULL, &cache), NANOKV_INVALID_ARGUMENT, "config is null");
  config.layout = 9;
  CHECK_FAILS(nanokv_cache_create(client, &config, &cache), NANOKV_INVALID_ARGUMENT, "layout 9");
  config.layout = NANOKV_LAYOUT_BLOCK_MAJOR;
  config.head_dim = 0;
  CHECK_FAILS(nanokv_cache_create(client, &config, &cache), NANOKV_INVALID_ARGUMENT, "");
  config.head_dim = 64;
  CHECK_OK(nanokv_cache_create(client, &config, &cache));
  if (cache == NULL) return;

  CHECK_OK(nanokv_cache_allocate_for(cache, 7, 20));
  CHECK_FAILS(nanokv_cache_allocate_for(cache, 7, 1), NANOKV_ALREADY_EXISTS, "");
  uint32_t blocks[4];
  size_t count = 0;
  CHECK_OK(nanokv_cache_block_table(cache, 7, blocks, 4, &count));
  CHECK(count == 2);
  CHECK_FAILS(nanokv_cache_block_table(cache, 7, blocks, 1, &count), NANOKV_INVALID_ARGUMENT,
              "has 2 entries");
  int64_t slot = -1, first = -1;
  CHECK_OK(nanokv_cache_append_token(cache, 7, &slot));
  CHECK(slot == (int64_t)blocks[1] * 16 + 4);
  CHECK_OK(nanokv_cache_slot_of(cache, 7, 0, &first));
  CHECK(first == (int64_t)blocks[0] * 16);
  CHECK_FAILS(nanokv_cache_slot_of(cache, 7, 21, &first), NANOKV_INVALID_ARGUMENT, "");
  uint64_t used = 0;
  CHECK_OK(nanokv_cache_used_tokens(cache, 7, &used));
  CHECK(used == 21);
  CHECK_FAILS(nanokv_cache_used_tokens(cache, 8, &used), NANOKV_NOT_FOUND, "");
  CHECK_FAILS(nanokv_cache_append_token(cache, 8, &slot), NANOKV_NOT_FOUND, "");

  nanokv_cache_view_t k, v;
  CHECK_OK(nanokv_cache_k_view(cache, 1, &k));
  CHECK_OK(nanokv_cache_v_view(cache, 1, &v));
  CHECK(k.data != NULL && v.data != NULL && k.data != v.data);
  CHECK(k.shape[0] == 256 && k.shape[1] == 2 && k.shape[2] == 16 && k.shape[3] == 64);
  CHECK(k.block_stride == 2 * 16 * 64 && k.head_stride == 16 * 64 && k.slot_stride == 64);
  CHECK(k.element_bytes == 2 && k.dtype == NANOKV_KV_FLOAT16);
  CHECK_FAILS(nanokv_cache_k_view(cache, 2, &k), NANOKV_INVALID_ARGUMENT, "");
  /* The sequence's blocks are mapped: their bytes take a write and read back. */
  nanokv_cache_view_t k1;
  CHECK_OK(nanokv_cache_k_view(cache, 1, &k1));
  unsigned char out[128], in[128];
  memset(out, 0x5A, sizeof out);
  char* token = (char*)k1.data + (size_t)(blocks[1] * k1.block_stride + 3 * 64) * 2;
  CHECK_OK(nanokv_copy_to_device(client, token, out, sizeof out));
  CHECK_OK(nanokv_copy_to_host(client, in, token, sizeof in));
  CHECK(memcmp(in, out, sizeof in) == 0);

  nanokv_cache_stats_t stats;
  CHECK_OK(nanokv_cache_get_stats(cache, &stats));
  CHECK(stats.total_blocks == 256 && stats.used_blocks == 2 && stats.sequences == 1 &&
        stats.used_tokens == 21);
  CHECK(stats.mapped_pages > 0);
  const char* dump = NULL;
  CHECK_OK(nanokv_cache_dump(cache, &dump));
  CHECK(dump != NULL && strlen(dump) > 0);

  CHECK_FAILS(nanokv_detach(client), NANOKV_FAILED_PRECONDITION, "destroy them first");
  CHECK_OK(nanokv_cache_free_for(cache, 7));
  CHECK_FAILS(nanokv_cache_free_for(cache, 7), NANOKV_NOT_FOUND, "");
  CHECK_OK(nanokv_cache_get_stats(cache, &stats));
  CHECK(stats.used_blocks == 0 && stats.mapped_pages == 0);
  CHECK_OK(nanokv_cache_destroy(cache));
  CHECK_FAILS(nanokv_cache_destroy(cache), NANOKV_INVALID_ARGUMENT, "unknown cache handle");
  CHECK_FAILS(nanokv_cache_get_stats(NULL, &stats), NANOKV_INVALID_ARGUMENT, "cache is null");
  CHECK_OK(nanokv_detach(client));
}

static void TestPagedAppendArguments(void) {
  nanokv_paged_layout_t layout = {4, 2, 16, 64, 2 * 16 * 64, 16 * 64};
  if (!nanokv_kernels_available()) {
    CHECK_FAILS(nanokv_paged_append(NULL, &layout, NULL, NULL, NULL, NULL), NANOKV_UNSUPPORTED,
                "without the device kernels");
    return;
  }
  /* Built with the kernels: bad arguments are refused before any launch
   * (so this runs without a GPU too). */
  CHECK_FAILS(nanokv_paged_append(NULL, &layout, NULL, NULL, NULL, NULL), NANOKV_INVALID_ARGUMENT,
              "input is null");
  nanokv_append_input_t input;
  memset(&input, 0, sizeof input);
  input.dtype = 7;
  CHECK_FAILS(nanokv_paged_append(&input, &layout, NULL, NULL, NULL, NULL), NANOKV_INVALID_ARGUMENT,
              "dtype 7");
  CHECK_FAILS(nanokv_paged_append(&input, NULL, NULL, NULL, NULL, NULL), NANOKV_INVALID_ARGUMENT,
              "layout is null");
}

int main(void) {
  if (mkdtemp(run_dir) == NULL) {
    perror("mkdtemp");
    return 2;
  }
  snprintf(ipc_name, sizeof ipc_name, "capi_%d", (int)getpid());
  setenv("NANOKV_RUN_DIR", run_dir, 1);
  setenv("NANOKV_LOG_LEVEL", "warn", 1);

  TestErrorsWithoutKvd();
  TestThreadLocalError();
  TestPagedAppendArguments();
  StartKvd();
  TestGeometryAndPages();
  TestTensorsAndSharing();
  TestAttachFromEnv();
  TestRefusalAtAttach();
  TestCache();
  StopKvd();
  TestRefusalAtConnect();

  if (failures == 0) {
    char command[300];
    snprintf(command, sizeof command, "rm -rf %s", run_dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", run_dir);
  } else {
    fprintf(stderr, "kvd's log is in %s/kvd.log\n", run_dir);
  }
  printf("capi_test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
