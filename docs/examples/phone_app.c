/* A phone app's private lookups through veil's C ABI (docs/phone-app.md).
 * Usage: phone_app SERVER0 SERVER1 TRUSTED_PEM ROW_KEY ROW [ROW...]
 * Prints each row's values; on failure prints the status name and message and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "veil.h"

static int fail(const char* what, int code) {
  fprintf(stderr, "%s: %s: %s\n", what, veil_status_name(code), veil_last_error());
  return 1;
}

int main(int argc, char** argv) {
  veil_client_options options;
  veil_client* client = NULL;
  veil_table_info table;
  uint64_t rows[16];
  float* values;
  size_t count = 0, i;
  uint32_t j;
  int rc;

  if (argc < 6 || argc - 5 > 16) {
    fprintf(stderr,
            "usage: %s SERVER0 SERVER1 TRUSTED_PEM ROW_KEY ROW [ROW...] (at most 16 rows)\n",
            argv[0]);
    return 2;
  }
  /* An app built against another veil.h than the library it loads must not go on. */
  if (veil_abi_version() != VEIL_ABI_VERSION) {
    fprintf(stderr, "libveil ABI %d, app built for %d\n", veil_abi_version(), VEIL_ABI_VERSION);
    return 1;
  }
  memset(&options, 0, sizeof(options)); /* zero = default for every field */
  options.struct_size = sizeof(options);  /* the struct this app was built with */
  options.server0 = argv[1];
  options.server1 = argv[2];
  options.tls_trusted_certs = argv[3]; /* shipped with the app */
  options.row_key_file = argv[4];      /* the table's row key: every row's tag is checked */
  options.timeout_ms = 3000;
  rc = veil_client_connect(&options, &client);
  if (rc != VEIL_OK) return fail("connect", rc);

  rc = veil_client_table_info(client, &table);
  if (rc != VEIL_OK) {
    veil_client_close(client);
    return fail("table info", rc);
  }
  for (i = 5; i < (size_t)argc; ++i) rows[count++] = strtoull(argv[i], NULL, 10);
  values = malloc(count * table.dim * sizeof(float));
  if (values == NULL) {
    veil_client_close(client);
    return 1;
  }
  rc = veil_lookup(client, rows, count, values, count * table.dim);
  if (rc != VEIL_OK) {
    free(values);
    veil_client_close(client);
    return fail("lookup", rc);
  }
  for (i = 0; i < count; ++i) {
    printf("row %llu:", (unsigned long long)rows[i]);
    for (j = 0; j < table.dim; ++j) printf(" %g", values[i * table.dim + j]);
    printf("\n");
  }
  free(values);
  veil_client_close(client);
  return 0;
}
