/* The C ABI's object store (nanokv/nanokv_objects.h), compiled as C, against
 * a real kvd process on the host backend with an 8 MiB store: host and
 * device bytes round trip byte-exact, batches answer each item (one bad item
 * leaves the others be), wrong sizes and null pointers are clear errors,
 * plans, and a closed store's handle is refused, never a crash. Device
 * memory is what it is on a GPU: pages of a KV tensor mapped in this process
 * (host pages on the host backend); malloc'd memory is refused as a GPU
 * would fault on it. Views read objects in place under a lease. Exit status 0
 * when all pass. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nanokv/nanokv.h"
#include "capi_check.h"

static char run_dir[] = "/tmp/nanokv_capi_objects_XXXXXX";
static char ipc_name[64];
static pid_t kvd_pid = -1;

/* Device memory for the device calls: two KV tensors' pages, the sources
 * and the destinations, 4 MiB each. */
enum { kDeviceBytes = 4 << 20 };
static nanokv_client_t* client = NULL;
static nanokv_tensor_t* src_tensor = NULL;
static nanokv_tensor_t* dst_tensor = NULL;
static unsigned char* src_dev = NULL;
static unsigned char* dst_dev = NULL;

/* kvd on the host backend, 16 pages of 2 MiB, 8 MiB of them the store. */
static void StartKvd(void) {
  char config[256], log_path[256], socket_path[256];
  snprintf(config, sizeof config, "%s/kvd.yaml", run_dir);
  snprintf(log_path, sizeof log_path, "%s/kvd.log", run_dir);
  snprintf(socket_path, sizeof socket_path, "%s/%s.sock", run_dir, ipc_name);
  FILE* f = fopen(config, "w");
  if (f == NULL) {
    perror(config);
    exit(2);
  }
  fprintf(f, "ipc_name: %s\nbackend: host\ncapacity: 32MiB\nhost_device_memory: 128MiB\nreserve_pages: 2\n"
             "run_dir: %s\nobject_store:\n  size: 8MiB\n",
          ipc_name, run_dir);
  fclose(f);
  char* const argv[] = {(char*)KvdBinary(), "--config", config, NULL};
  kvd_pid = SpawnKvd(argv, log_path, socket_path);
}

static void StopKvd(void) { StopKvdPid(kvd_pid); }

static nanokv_objects_t* Open(void) {
  nanokv_objects_options_t options;
  CHECK_OK(nanokv_objects_options_init(&options));
  options.ipc_name = ipc_name;
  nanokv_objects_t* store = NULL;
  CHECK_OK(nanokv_objects_open(&options, &store));
  return store;
}

/* `bytes` bytes of a pattern that differs per seed and per offset. */
static unsigned char* Pattern(size_t bytes, unsigned seed) {
  unsigned char* p = malloc(bytes);
  for (size_t i = 0; i < bytes; ++i) p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 9)) & 0xff);
  return p;
}

static void MakeDeviceMemory(void) {
  nanokv_options_t options;
  CHECK_OK(nanokv_options_init(&options));
  options.ipc_name = ipc_name;
  options.tenant = "capi-objects";
  CHECK_OK(nanokv_attach(&options, &client));
  CHECK_OK(nanokv_tensor_create(client, 0, kDeviceBytes, &src_tensor));
  CHECK_OK(nanokv_tensor_create(client, 0, kDeviceBytes, &dst_tensor));
  CHECK_OK(nanokv_tensor_grow(src_tensor, 2));
  CHECK_OK(nanokv_tensor_grow(dst_tensor, 2));
  CHECK_OK(nanokv_tensor_data(src_tensor, (void**)&src_dev));
  CHECK_OK(nanokv_tensor_data(dst_tensor, (void**)&dst_dev));
}

static void FreeDeviceMemory(void) {
  CHECK_OK(nanokv_tensor_destroy(src_tensor));
  CHECK_OK(nanokv_tensor_destroy(dst_tensor));
  CHECK_OK(nanokv_detach(client));
}

/* The pattern of `seed` written at device address `at`; its host copy. */
static unsigned char* Stage(unsigned char* at, size_t bytes, unsigned seed) {
  unsigned char* host = Pattern(bytes, seed);
  CHECK_OK(nanokv_copy_to_device(client, at, host, bytes));
  return host;
}

/* Whether `bytes` at device address `at` hold exactly `want`. */
static int DeviceHolds(const unsigned char* at, const unsigned char* want, size_t bytes) {
  unsigned char* host = malloc(bytes);
  int same = nanokv_copy_to_host(client, host, at, bytes) == NANOKV_OK && memcmp(host, want, bytes) == 0;
  free(host);
  return same;
}

static void ZeroDevice(unsigned char* at, size_t bytes) { CHECK_OK(nanokv_fill_device(client, at, 0, bytes)); }

static void TestWithoutKvd(void) {
  nanokv_objects_options_t options;
  CHECK_OK(nanokv_objects_options_init(&options));
  CHECK(options.ring == 1 && options.request_timeout_ms == 60000);
  options.ipc_name = "capi_objects_nobody";
  nanokv_objects_t* store = NULL;
  CHECK_FAILS(nanokv_objects_open(&options, &store), NANOKV_UNAVAILABLE, "");
  CHECK(store == NULL);
  CHECK_FAILS(nanokv_objects_open(&options, NULL), NANOKV_INVALID_ARGUMENT, "out is null");
  CHECK_FAILS(nanokv_objects_put(NULL, "k", "x", 1, -1), NANOKV_INVALID_ARGUMENT, "store is null");
}

static void TestHostBytes(nanokv_objects_t* store) {
  const char* backend = NULL;
  CHECK_OK(nanokv_objects_backend(store, &backend));
  CHECK(backend != NULL && strcmp(backend, "host") == 0);
  enum { kBytes = 300000 };
  unsigned char* in = Pattern(kBytes, 1);
  unsigned char* out = calloc(kBytes, 1);
  uint64_t got = 0;
  CHECK_OK(nanokv_objects_put(store, "capi:host", in, kBytes, -1));
  CHECK_FAILS(nanokv_objects_put(store, "capi:host", in, kBytes, -1), NANOKV_ALREADY_EXISTS, "");
  CHECK_FAILS(nanokv_objects_get(store, "capi:host", out, kBytes - 1, &got), NANOKV_INVALID_ARGUMENT,
              "holds 300000 bytes, more than the 299999 given");
  CHECK(got == kBytes);
  CHECK(out[0] == 0 && out[kBytes - 2] == 0); /* nothing copied */
  got = 0;
  CHECK_OK(nanokv_objects_get(store, "capi:host", out, kBytes, &got));
  CHECK(got == kBytes && memcmp(in, out, kBytes) == 0);
  CHECK_OK(nanokv_objects_remove(store, "capi:host"));
  CHECK_FAILS(nanokv_objects_get(store, "capi:host", out, kBytes, &got), NANOKV_NOT_FOUND, "");
  CHECK_FAILS(nanokv_objects_remove(store, "capi:host"), NANOKV_NOT_FOUND, "");
  CHECK_FAILS(nanokv_objects_put(store, NULL, in, 1, -1), NANOKV_INVALID_ARGUMENT, "key is null");
  CHECK_FAILS(nanokv_objects_put(store, "capi:null", NULL, 8, -1), NANOKV_INVALID_ARGUMENT, "data is null");
  CHECK_FAILS(nanokv_objects_get(store, "capi:host", out, kBytes, NULL), NANOKV_INVALID_ARGUMENT,
              "bytes_out is null");
  /* Larger than the store's room: kvd's refusal, nothing left behind. */
  unsigned char* huge = Pattern(16u << 20, 2);
  CHECK(nanokv_objects_put(store, "capi:huge", huge, 16u << 20, -1) != NANOKV_OK);
  CHECK_FAILS(nanokv_objects_get(store, "capi:huge", out, kBytes, &got), NANOKV_NOT_FOUND, "");
  free(huge);
  free(in);
  free(out);
}

static void TestDeviceBytes(nanokv_objects_t* store) {
  int kernels = -1;
  CHECK_OK(nanokv_objects_uses_kernels(store, &kernels));
  CHECK(kernels == 0); /* the host backend copies */
  enum { kBytes = (3 << 20) + 12345 }; /* over one page: spans two */
  unsigned char* want = Stage(src_dev, kBytes, 3);
  unsigned char* zeros = calloc(kBytes, 1);
  ZeroDevice(dst_dev, kDeviceBytes);
  uint64_t got = 0;
  CHECK_OK(nanokv_objects_put_from_device(store, "capi:dev", src_dev, kBytes, -1, NULL));
  CHECK_FAILS(nanokv_objects_get_to_device(store, "capi:dev", dst_dev, kBytes - 1, NULL, &got),
              NANOKV_INVALID_ARGUMENT, "holds 3158073 bytes, the destination 3158072");
  CHECK(DeviceHolds(dst_dev, zeros, kBytes)); /* nothing copied */
  CHECK_OK(nanokv_objects_get_to_device(store, "capi:dev", dst_dev, kBytes, NULL, &got));
  CHECK(got == kBytes && DeviceHolds(dst_dev, want, kBytes));
  /* Device bytes in, host bytes out: one store, one format. */
  unsigned char* host = calloc(kBytes, 1);
  CHECK_OK(nanokv_objects_get(store, "capi:dev", host, kBytes, &got));
  CHECK(memcmp(host, want, kBytes) == 0);
  /* Memory no device reaches (a GPU would fault on it): refused, nothing
   * stored. (Small: two 3 MiB objects would evict the first from 6 MiB.) */
  CHECK_FAILS(nanokv_objects_put_from_device(store, "capi:malloc", host, 4096, -1, NULL), NANOKV_INVALID_ARGUMENT,
              "is not device memory");
  CHECK_FAILS(nanokv_objects_get(store, "capi:malloc", host, kBytes, &got), NANOKV_NOT_FOUND, "");
  CHECK_FAILS(nanokv_objects_get_to_device(store, "capi:dev", host, kBytes, NULL, &got), NANOKV_INVALID_ARGUMENT,
              "is not device memory");
  CHECK_FAILS(nanokv_objects_put_from_device(store, "capi:dev0", NULL, 8, -1, NULL), NANOKV_INVALID_ARGUMENT,
              "from a null address");
  CHECK_FAILS(nanokv_objects_put_from_device(store, "capi:dev0", src_dev, 0, -1, NULL), NANOKV_INVALID_ARGUMENT,
              "0 bytes");
  CHECK_FAILS(nanokv_objects_get_to_device(store, "capi:dev", NULL, kBytes, NULL, &got), NANOKV_INVALID_ARGUMENT,
              "to a null address");
  CHECK_FAILS(nanokv_objects_put_from_device(store, "capi:dev", src_dev, kBytes, -1, NULL), NANOKV_ALREADY_EXISTS,
              "");
  CHECK_OK(nanokv_objects_remove(store, "capi:dev"));
  free(want);
  free(zeros);
  free(host);
}

/* Four items, the third bad: the others are stored and read back exactly. */
static void TestDeviceBatches(nanokv_objects_t* store) {
  enum { kItems = 4 };
  const char* keys[kItems] = {"capi:b0", "capi:b1", "capi:b2", "capi:b3"};
  const uint64_t sizes[kItems] = {4096, 1u << 20, 777, 65536 + 3};
  const size_t offsets[kItems] = {0, 8192, (1u << 20) + 16384, (2u << 20)};
  unsigned char* want[kItems];
  unsigned char* srcs[kItems];
  unsigned char* dsts[kItems];
  ZeroDevice(dst_dev, kDeviceBytes);
  for (int i = 0; i < kItems; ++i) {
    srcs[i] = src_dev + offsets[i];
    dsts[i] = dst_dev + offsets[i];
    want[i] = Stage(srcs[i], sizes[i], 10 + i);
  }
  const void* in[kItems] = {srcs[0], srcs[1], NULL, srcs[3]};
  int results[kItems] = {-1, -1, -1, -1};
  CHECK_OK(nanokv_objects_put_from_device_batch(store, keys, in, sizes, kItems, -1, NULL, results));
  CHECK(results[0] == NANOKV_OK && results[1] == NANOKV_OK && results[3] == NANOKV_OK);
  CHECK(results[2] == NANOKV_INVALID_ARGUMENT);
  CHECK(strstr(nanokv_last_error(), "capi:b2") != NULL);
  /* Reading back: b2 was never stored, b1's room is one byte short. */
  uint64_t capacities[kItems] = {sizes[0], sizes[1] - 1, sizes[2], sizes[3]};
  uint64_t got[kItems];
  CHECK_OK(nanokv_objects_get_to_device_batch(store, keys, (void* const*)dsts, capacities, kItems, NULL, got,
                                              results));
  CHECK(results[0] == NANOKV_OK && results[3] == NANOKV_OK);
  CHECK(results[1] == NANOKV_INVALID_ARGUMENT && results[2] == NANOKV_NOT_FOUND);
  CHECK(strstr(nanokv_last_error(), "capi:b1") != NULL); /* the first failed item */
  CHECK(got[0] == sizes[0] && got[3] == sizes[3] && got[1] == 0 && got[2] == 0);
  CHECK(DeviceHolds(dsts[0], want[0], sizes[0]) && DeviceHolds(dsts[3], want[3], sizes[3]));
  unsigned char* zeros = calloc(sizes[1], 1);
  CHECK(DeviceHolds(dsts[1], zeros, sizes[1]));
  free(zeros);
  /* Host-bytes batches over the same objects. */
  unsigned char* outs[kItems];
  for (int i = 0; i < kItems; ++i) outs[i] = calloc(sizes[i], 1);
  capacities[1] = sizes[1];
  CHECK_OK(nanokv_objects_get_batch(store, keys, (void* const*)outs, capacities, kItems, got, results));
  CHECK(results[0] == NANOKV_OK && results[1] == NANOKV_OK && results[2] == NANOKV_NOT_FOUND &&
        results[3] == NANOKV_OK);
  CHECK(memcmp(want[1], outs[1], sizes[1]) == 0 && got[1] == sizes[1]);
  CHECK_OK(nanokv_objects_remove_batch(store, keys, kItems, results));
  CHECK(results[0] == NANOKV_OK && results[1] == NANOKV_OK && results[2] == NANOKV_NOT_FOUND &&
        results[3] == NANOKV_OK);
  const void* host_in[2] = {want[0], want[1]};
  CHECK_OK(nanokv_objects_put_batch(store, keys, host_in, sizes, 2, -1, results));
  CHECK(results[0] == NANOKV_OK && results[1] == NANOKV_OK);
  ZeroDevice(dst_dev, kDeviceBytes);
  CHECK_OK(nanokv_objects_get_to_device(store, keys[1], dsts[1], sizes[1], NULL, &got[1]));
  CHECK(DeviceHolds(dsts[1], want[1], sizes[1]));
  CHECK_OK(nanokv_objects_remove_batch(store, keys, 2, results));
  const char* null_key[1] = {NULL};
  CHECK_FAILS(nanokv_objects_remove_batch(store, null_key, 1, results), NANOKV_INVALID_ARGUMENT,
              "keys[i] is null");
  CHECK_OK(nanokv_objects_remove_batch(store, NULL, 0, NULL)); /* an empty batch */
  for (int i = 0; i < kItems; ++i) {
    free(want[i]);
    free(outs[i]);
  }
}

static void TestPlans(nanokv_objects_t* store) {
  enum { kBytes = 100000 };
  unsigned char* in = Pattern(kBytes, 20);
  nanokv_object_plan_t* plan = NULL;
  CHECK_OK(nanokv_objects_open_for_write(store, "capi:plan", kBytes, -1, &plan));
  nanokv_object_plan_info_t info;
  CHECK_OK(nanokv_objects_plan_info(plan, &info));
  CHECK(info.bytes_total == kBytes && info.state == 2 /* WRITING */);
  void* payload = NULL;
  CHECK_OK(nanokv_objects_plan_payload(plan, &payload));
  if (payload != NULL) memcpy(payload, in, kBytes);
  CHECK_FAILS(nanokv_objects_close(store), NANOKV_FAILED_PRECONDITION, "1 plan(s) made on it are still alive");
  CHECK_OK(nanokv_objects_commit(plan, 0));
  CHECK_OK(nanokv_objects_plan_free(plan));
  CHECK_FAILS(nanokv_objects_commit(plan, 0), NANOKV_INVALID_ARGUMENT, "unknown object plan handle");
  nanokv_object_plan_t* located = NULL;
  CHECK_OK(nanokv_objects_get_location(store, "capi:plan", &located));
  CHECK_OK(nanokv_objects_plan_info(located, &info));
  CHECK(info.state == 3 /* READY */ && info.bytes_total == kBytes);
  CHECK_OK(nanokv_objects_plan_payload(located, &payload));
  CHECK(payload != NULL && memcmp(payload, in, kBytes) == 0);
  CHECK_OK(nanokv_objects_plan_free(located));
  /* A revoked write leaves no object. */
  CHECK_OK(nanokv_objects_open_for_write(store, "capi:revoked", 64, -1, &plan));
  CHECK_OK(nanokv_objects_revoke(plan));
  CHECK_OK(nanokv_objects_plan_free(plan));
  CHECK_FAILS(nanokv_objects_get_location(store, "capi:revoked", &located), NANOKV_NOT_FOUND, "");
  CHECK_OK(nanokv_objects_remove(store, "capi:plan"));
  free(in);
}

/* Views: the object's bytes in place, read-only, held by kvd until freed
 * (neither removed nor evicted); a view outlives its store handle. */
static void TestViews(nanokv_objects_t* store) {
  enum { kBytes = (1 << 20) + 4321 };
  unsigned char* in = Pattern(kBytes, 30);
  CHECK_OK(nanokv_objects_put(store, "capi:view", in, kBytes, -1));
  nanokv_view_t* view = NULL;
  CHECK_OK(nanokv_objects_view(store, "capi:view", &view));
  const void* data = NULL;
  uint64_t bytes = 0;
  int device = -1;
  CHECK_OK(nanokv_view_data(view, &data));
  CHECK_OK(nanokv_view_size(view, &bytes));
  CHECK_OK(nanokv_view_device(view, &device));
  CHECK(bytes == kBytes && device == 0);
  CHECK(data != NULL && memcmp(data, in, kBytes) == 0); /* host pages: readable in place */
  CHECK_FAILS(nanokv_objects_remove(store, "capi:view"), NANOKV_FAILED_PRECONDITION, "");
  CHECK_OK(nanokv_view_free(view));
  CHECK_FAILS(nanokv_view_size(view, &bytes), NANOKV_INVALID_ARGUMENT, "unknown view handle");
  CHECK_FAILS(nanokv_view_free(view), NANOKV_INVALID_ARGUMENT, "unknown view handle");
  CHECK_OK(nanokv_objects_remove(store, "capi:view")); /* the free ended the lease */

  /* A batch: one absent key gets NULL and its code; the others are views. */
  const char* keys[3] = {"capi:v0", "capi:absent", "capi:v2"};
  CHECK_OK(nanokv_objects_put(store, keys[0], in, 1000, -1));
  CHECK_OK(nanokv_objects_put(store, keys[2], in + 7, 2000, -1));
  nanokv_view_t* views[3] = {NULL, NULL, NULL};
  int results[3] = {-1, -1, -1};
  CHECK_OK(nanokv_objects_view_batch(store, keys, 3, views, results));
  CHECK(results[0] == NANOKV_OK && results[1] == NANOKV_NOT_FOUND && results[2] == NANOKV_OK);
  CHECK(views[0] != NULL && views[1] == NULL && views[2] != NULL);
  CHECK(strstr(nanokv_last_error(), "capi:absent") != NULL);
  CHECK_OK(nanokv_view_data(views[2], &data));
  CHECK_OK(nanokv_view_size(views[2], &bytes));
  CHECK(bytes == 2000 && memcmp(data, in + 7, 2000) == 0);
  /* The store handle goes first: the views still read, then end. */
  nanokv_objects_t* other = Open();
  nanokv_view_t* late = NULL;
  CHECK_OK(nanokv_objects_view(other, keys[0], &late));
  CHECK_OK(nanokv_objects_close(other));
  CHECK_OK(nanokv_view_data(late, &data));
  CHECK(data != NULL && memcmp(data, in, 1000) == 0);
  CHECK_FAILS(nanokv_objects_remove(store, keys[0]), NANOKV_FAILED_PRECONDITION, "");
  CHECK_OK(nanokv_view_free(late));
  /* The batch's views end together (NULL entries skipped); a handle named
   * twice, or one not a view, frees nothing. */
  nanokv_view_t* twice[2] = {views[0], views[0]};
  CHECK_FAILS(nanokv_view_free_batch(twice, 2), NANOKV_INVALID_ARGUMENT, "named twice");
  nanokv_view_t* stranger[2] = {views[0], (nanokv_view_t*)store};
  CHECK_FAILS(nanokv_view_free_batch(stranger, 2), NANOKV_INVALID_ARGUMENT, "unknown view handle");
  CHECK_FAILS(nanokv_objects_remove(store, keys[0]), NANOKV_FAILED_PRECONDITION, "");
  CHECK_OK(nanokv_view_free_batch(views, 3)); /* views[1] is NULL: its key was absent */
  CHECK_OK(nanokv_view_free_batch(NULL, 0));
  CHECK_OK(nanokv_objects_remove_batch(store, keys, 3, results));
  CHECK(results[0] == NANOKV_OK && results[2] == NANOKV_OK);
  /* Refusals, each naming its fault. */
  CHECK_FAILS(nanokv_objects_view(store, "capi:absent", &view), NANOKV_NOT_FOUND, "");
  CHECK_FAILS(nanokv_objects_view(store, NULL, &view), NANOKV_INVALID_ARGUMENT, "key is null");
  CHECK_FAILS(nanokv_objects_view(store, "capi:v0", NULL), NANOKV_INVALID_ARGUMENT, "view_out is null");
  CHECK_FAILS(nanokv_objects_view(NULL, "capi:v0", &view), NANOKV_INVALID_ARGUMENT, "store is null");
  const char* null_key[2] = {"capi:v0", NULL};
  CHECK_FAILS(nanokv_objects_view_batch(store, null_key, 2, views, results), NANOKV_INVALID_ARGUMENT,
              "keys[1] is null");
  CHECK_FAILS(nanokv_objects_view_batch(store, keys, 3, NULL, results), NANOKV_INVALID_ARGUMENT, "views is null");
  CHECK_OK(nanokv_objects_view_batch(store, NULL, 0, NULL, NULL)); /* an empty batch */
  CHECK_FAILS(nanokv_view_data(NULL, &data), NANOKV_INVALID_ARGUMENT, "view is null");
  CHECK_FAILS(nanokv_view_free((nanokv_view_t*)store), NANOKV_INVALID_ARGUMENT, "unknown view handle");
  free(in);
}

static void TestClosedStore(nanokv_objects_t* store) {
  CHECK_OK(nanokv_objects_close(store));
  unsigned char byte = 1;
  uint64_t got = 0;
  CHECK_FAILS(nanokv_objects_put(store, "k", &byte, 1, -1), NANOKV_INVALID_ARGUMENT, "unknown object store handle");
  CHECK_FAILS(nanokv_objects_get_to_device(store, "k", &byte, 1, NULL, &got), NANOKV_INVALID_ARGUMENT,
              "unknown object store handle");
  CHECK_FAILS(nanokv_objects_close(store), NANOKV_INVALID_ARGUMENT, "unknown object store handle");
}

/* kvd stops under an open store: its calls fail with a code, no crash. */
static void TestKvdGone(void) {
  nanokv_objects_options_t options;
  CHECK_OK(nanokv_objects_options_init(&options));
  options.ipc_name = ipc_name;
  options.request_timeout_ms = 5000;
  nanokv_objects_t* store = NULL;
  CHECK_OK(nanokv_objects_open(&options, &store));
  StopKvd();
  unsigned char bytes[64] = {0};
  uint64_t got = 0;
  CHECK(nanokv_objects_put(store, "capi:gone", bytes, sizeof bytes, -1) != NANOKV_OK);
  CHECK(nanokv_objects_get(store, "capi:gone", bytes, sizeof bytes, &got) != NANOKV_OK);
  CHECK_OK(nanokv_objects_close(store));
}

int main(void) {
  if (mkdtemp(run_dir) == NULL) {
    perror("mkdtemp");
    return 2;
  }
  snprintf(ipc_name, sizeof ipc_name, "capi_objects_%d", (int)getpid());
  setenv("NANOKV_RUN_DIR", run_dir, 1);
  setenv("NANOKV_LOG_LEVEL", "warn", 1);

  TestWithoutKvd();
  StartKvd();
  nanokv_objects_t* store = Open();
  MakeDeviceMemory();
  if (store != NULL && src_dev != NULL && dst_dev != NULL) {
    TestHostBytes(store);
    TestDeviceBytes(store);
    TestDeviceBatches(store);
    TestPlans(store);
    TestViews(store);
    TestClosedStore(store);
  }
  FreeDeviceMemory();
  TestKvdGone();

  if (failures == 0) {
    char command[300];
    snprintf(command, sizeof command, "rm -rf %s", run_dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", run_dir);
  } else {
    fprintf(stderr, "kvd's log is in %s/kvd.log\n", run_dir);
  }
  printf("capi_objects_test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
