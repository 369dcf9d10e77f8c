/* The same through the C ABI (libnanokv.so), built with pkg-config nanokv-c. */
#include <stdio.h>

#include "nanokv/nanokv.h"

int main(void) {
  nanokv_client_t* client = NULL;
  nanokv_tensor_t* tensor = NULL;
  uint64_t page = 0;
  if (nanokv_attach_from_env(&client) != NANOKV_OK || nanokv_client_page_bytes(client, &page) != NANOKV_OK ||
      nanokv_tensor_create(client, 0, 2 * page, &tensor) != NANOKV_OK || nanokv_tensor_map(tensor, 0, 2) != NANOKV_OK) {
    fprintf(stderr, "outside-c: %s\n", nanokv_last_error());
    return 1;
  }
  printf("outside-c: mapped 2 pages through libnanokv.so (ABI %d)\n", nanokv_abi_version());
  nanokv_tensor_destroy(tensor);
  nanokv_detach(client);
  return 0;
}
