/* The C ABI (mobile_client/veil.h) used from C99, as an app would. The servers serve a fixed-point
 * table whose row r, column j holds (7r + j) / 4 (exact with 16 fractional bits); the C++ driver
 * (c_abi_driver_test.cc) writes it and starts the servers, then calls veil_c_abi_checks. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mobile_client/veil.h"

int veil_c_abi_checks(const char* server0, const char* server1, uint64_t rows, uint32_t dim);
int veil_c_abi_tls_checks(const char* server0, const char* server1, const char* trusted_certs,
                          const char* other_certs, uint64_t rows, uint32_t dim);
int veil_c_abi_bag_checks(const char* bag_server, const char* dpf_server, uint64_t rows,
                          uint32_t dim);
int veil_c_abi_lwe_checks(const char* lwe_server, const char* hint_cache_dir, uint64_t rows,
                          uint32_t dim);

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "%s:%d: check failed: %s (veil_last_error: \"%s\")\n", __FILE__, __LINE__, \
              #cond, veil_last_error());                                                         \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

static float expected_value(uint64_t row, uint32_t col) { return (float)(row * 7 + col) / 4.0f; }

/* A failure latch file (mobile_client/failure_latch.h) holding a failure, at a path of this
 * process; 0 once written. */
static char latch[64];
static int write_latch(void) {
  FILE* f;
  snprintf(latch, sizeof(latch), "/tmp/veil_c_abi_latch_%ld", (long)getpid());
  f = fopen(latch, "w");
  if (f == NULL) return -1;
  fputs("veil: lookups stopped after an answer failed its check\nDATA_LOSS: a test\n", f);
  return fclose(f);
}

static int check_errors(const char* server0) {
  veil_client* client = (veil_client*)&client; /* must be reset to NULL on failure */
  veil_client_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);

  CHECK(veil_client_connect(NULL, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(client == NULL);
  CHECK(strlen(veil_last_error()) > 0);
  CHECK(veil_client_connect(&options, NULL) == VEIL_ERR_INVALID_ARGUMENT);

  /* Nobody listens on port 1: a clear error naming the server, within the timeout. */
  options.server0 = server0;
  options.server1 = "127.0.0.1:1";
  options.timeout_ms = 2000;
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_UNAVAILABLE);
  CHECK(client == NULL);
  CHECK(strstr(veil_last_error(), "server 1 (127.0.0.1:1)") != NULL);
  CHECK(strcmp(veil_status_name(VEIL_ERR_UNAVAILABLE), "UNAVAILABLE") == 0);

  /* An address that does not parse, or a host that does not resolve, is the caller's error. */
  options.server1 = "not an address";
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "cannot be parsed") != NULL);
  options.server1 = "127.0.0.1:4000,,127.0.0.1:4001"; /* a replica list with an empty entry */
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "empty entry") != NULL);
  options.server1 = "no-such-host.invalid:4000";
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);

  options.server1 = server0;
  options.prg = "rot13";
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  options.prg = NULL;

  /* An options struct of another size (an app built with another veil.h) is refused. */
  options.struct_size = sizeof(options) - 8;
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "struct_size") != NULL);
  options.struct_size = 0;
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  veil_client_close(NULL);
  return 0;
}

/* Range lookups need rows >= 200 (the ranges below) and dim <= 16. */
static int check_range_lookups(veil_client* client, uint64_t rows, uint32_t dim) {
  /* A 32-row bin at the start, the table's last row, a 1-row range and the whole table. */
  veil_row_range ranges[4] = {{0, 32}, {160, 40}, {64, 1}, {0, 0}};
  uint64_t indices[4] = {31, 39, 0, 123};
  veil_call_stats stats;
  float values[4 * 16];
  uint32_t words[4 * 16];
  uint32_t i, j;

  ranges[3].rows = rows;
  CHECK(veil_lookup_words_in_ranges(client, indices, ranges, 4, words, 4 * dim) == VEIL_OK);
  CHECK(strcmp(veil_last_error(), "") == 0);
  for (i = 0; i < 4; ++i) {
    const uint64_t row = ranges[i].first_row + indices[i];
    for (j = 0; j < dim; ++j) CHECK(words[i * dim + j] == (uint32_t)((row * 7 + j) * 16384u));
  }
  CHECK(veil_last_call_stats(client, &stats) == VEIL_OK);
  CHECK(stats.lookups == 4 && stats.keys == 4);
  {
    /* One replica per party: nothing to fail over to or hedge on. */
    uint64_t failovers = 1, hedges = 1;
    CHECK(veil_replica_stats(client, &failovers, &hedges) == VEIL_OK);
    CHECK(failovers == 0 && hedges == 0);
    CHECK(veil_replica_stats(NULL, &failovers, NULL) == VEIL_ERR_INVALID_ARGUMENT);
  }
  CHECK(veil_lookup_in_ranges(client, indices, ranges, 4, values, 4 * dim) == VEIL_OK);
  for (i = 0; i < 4; ++i) {
    for (j = 0; j < dim; ++j) {
      CHECK(values[i * dim + j] == expected_value(ranges[i].first_row + indices[i], j));
    }
  }

  /* Bad calls: an error code and a message, and the client keeps working. */
  indices[0] = 32; /* one past its 32-row range (row 32 of the table exists) */
  CHECK(veil_lookup_in_ranges(client, indices, ranges, 4, values, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "index 32 is outside range 0") != NULL);
  indices[0] = 31;
  ranges[1].rows = 41; /* [160, 201) ends past the table */
  CHECK(veil_lookup_words_in_ranges(client, indices, ranges, 4, words, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "range 1") != NULL);
  CHECK(strstr(veil_last_error(), "outside the table") != NULL);
  ranges[1].first_row = rows;
  ranges[1].rows = 1;
  CHECK(veil_lookup_in_ranges(client, indices, ranges, 4, values, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "outside the table") != NULL);
  ranges[1].first_row = 5;
  ranges[1].rows = 0;
  CHECK(veil_lookup_in_ranges(client, indices, ranges, 4, values, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "is empty") != NULL);
  ranges[1].first_row = 160;
  ranges[1].rows = 40;

  CHECK(veil_lookup_in_ranges(client, indices, ranges, 4, values, 4 * dim - 1) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "output buffer holds") != NULL);
  CHECK(veil_lookup_words_in_ranges(client, indices, ranges, 4, words, 4 * dim - 1) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "words") != NULL);
  CHECK(veil_lookup_in_ranges(client, indices, ranges, 0, values, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "no rows requested") != NULL);

  CHECK(veil_lookup_in_ranges(NULL, indices, ranges, 4, values, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "required") != NULL);
  CHECK(veil_lookup_in_ranges(client, NULL, ranges, 4, values, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_in_ranges(client, indices, NULL, 4, values, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "ranges") != NULL);
  CHECK(veil_lookup_in_ranges(client, indices, ranges, 4, NULL, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_words_in_ranges(NULL, indices, ranges, 4, words, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_words_in_ranges(client, NULL, ranges, 4, words, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_words_in_ranges(client, indices, NULL, 4, words, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_words_in_ranges(client, indices, ranges, 4, NULL, 4 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);

  memset(words, 0, sizeof(words));
  CHECK(veil_lookup_words_in_ranges(client, indices, ranges, 4, words, 4 * dim) == VEIL_OK);
  CHECK(strcmp(veil_last_error(), "") == 0);
  CHECK(words[dim] == (uint32_t)(199 * 7 * 16384u));
  return 0;
}

int veil_c_abi_checks(const char* server0, const char* server1, uint64_t rows, uint32_t dim) {
  veil_client* client = NULL;
  veil_client_options options;
  veil_table_info info;
  veil_call_stats stats;
  uint64_t indices[3];
  uint32_t bag_sizes[2] = {2, 1};
  int32_t weights[3] = {2, -1, 1};
  float values[3 * 16];
  uint32_t words[3 * 16];
  uint32_t i, j;

  CHECK(veil_abi_version() == VEIL_ABI_VERSION);
  CHECK(dim <= 16);
  if (check_errors(server0) != 0) return 1;

  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.server0 = server0;
  options.server1 = server1;
  /* The servers serve epoch 1 only. */
  options.min_epoch = 2;
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "(min_epoch 2)") != NULL);
  CHECK(client == NULL);
  options.min_epoch = 1;
  /* Version 9: a failure latch that holds a failure stops the client before it connects. */
  CHECK(write_latch() == 0);
  options.failure_latch_file = latch;
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "failure latch") != NULL);
  CHECK(remove(latch) == 0);
  CHECK(veil_client_connect(&options, &client) == VEIL_OK);
  CHECK(client != NULL);
  CHECK(strcmp(veil_last_error(), "") == 0);

  CHECK(veil_client_table_info(client, &info) == VEIL_OK);
  CHECK(info.rows == rows);
  CHECK(info.dim == dim);
  CHECK(info.row_words == dim);
  CHECK(info.row_format == VEIL_FORMAT_FIXED);
  CHECK(info.frac_bits == 16);
  CHECK(info.epoch == 1);

  /* Rows, dequantized and as words. */
  indices[0] = 0;
  indices[1] = rows - 1;
  indices[2] = 5;
  CHECK(veil_lookup(client, indices, 3, values, 3 * dim) == VEIL_OK);
  for (i = 0; i < 3; ++i) {
    for (j = 0; j < dim; ++j) CHECK(values[i * dim + j] == expected_value(indices[i], j));
  }
  CHECK(veil_lookup_words(client, indices, 3, words, 3 * dim) == VEIL_OK);
  for (i = 0; i < 3; ++i) {
    for (j = 0; j < dim; ++j) {
      CHECK(words[i * dim + j] == (uint32_t)((indices[i] * 7 + j) * 16384u));
    }
  }
  CHECK(veil_last_call_stats(client, &stats) == VEIL_OK);
  CHECK(stats.lookups == 3 && stats.keys == 3);
  CHECK(stats.bytes_up > 0 && stats.bytes_down > 0 && stats.latency_ms > 0);

  /* Bad calls: an error code and a message, and the client keeps working. */
  CHECK(veil_lookup(client, indices, 3, values, 3 * dim - 1) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "output buffer") != NULL);
  indices[2] = rows;
  CHECK(veil_lookup(client, indices, 3, values, 3 * dim) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "outside the table") != NULL);
  CHECK(veil_lookup(NULL, indices, 3, values, 3 * dim) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_pooled(client, indices, 3, bag_sizes, 2, NULL, 7, values, 2 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  indices[2] = 5;

  /* Pooled: bags {0, rows-1} and {5}; sums, weighted sums, means. */
  CHECK(veil_lookup_pooled(client, indices, 3, bag_sizes, 2, NULL, VEIL_POOL_SUM, values,
                           2 * dim) == VEIL_OK);
  for (j = 0; j < dim; ++j) {
    CHECK(values[j] == expected_value(0, j) + expected_value(rows - 1, j));
    CHECK(values[dim + j] == expected_value(5, j));
  }
  CHECK(veil_lookup_pooled(client, indices, 3, bag_sizes, 2, weights, VEIL_POOL_SUM, values,
                           2 * dim) == VEIL_OK);
  for (j = 0; j < dim; ++j) {
    CHECK(values[j] == 2 * expected_value(0, j) - expected_value(rows - 1, j));
    CHECK(values[dim + j] == expected_value(5, j));
  }
  CHECK(veil_lookup_pooled(client, indices, 3, bag_sizes, 2, NULL, VEIL_POOL_MEAN, values,
                           2 * dim) == VEIL_OK);
  for (j = 0; j < dim; ++j) {
    CHECK(values[j] == (expected_value(0, j) + expected_value(rows - 1, j)) / 2);
  }
  CHECK(veil_last_call_stats(client, &stats) == VEIL_OK);
  CHECK(stats.lookups == 2 && stats.keys == 2 * 32); /* bags are padded to 32 keys by default */

  CHECK(rows >= 200);
  if (check_range_lookups(client, rows, dim) != 0) return 1;

  /* A handle of another kind, a closed handle, and closing twice. */
  CHECK(veil_lookup(client, indices, 1, values, dim) == VEIL_OK);
  CHECK(veil_lookup((veil_client*)&stats, indices, 1, values, dim) == VEIL_ERR_INVALID_ARGUMENT);
  veil_client_close(client);
  CHECK(veil_lookup(client, indices, 1, values, dim) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "live client") != NULL);
  CHECK(veil_last_call_stats(client, &stats) == VEIL_ERR_INVALID_ARGUMENT);
  veil_client_close(client);
  return 0;
}

/* Servers serving TLS with the certificate of trusted_certs (other_certs: an unrelated one). */
int veil_c_abi_tls_checks(const char* server0, const char* server1, const char* trusted_certs,
                          const char* other_certs, uint64_t rows, uint32_t dim) {
  veil_client* client = NULL;
  veil_client_options options;
  uint64_t indices[2];
  float values[2 * 16];
  uint32_t i, j;

  CHECK(dim <= 16);
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.server0 = server0;
  options.server1 = server1;
  options.timeout_ms = 2000;

  /* Without TLS settings: the TLS servers close the connection, within the timeout. */
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_UNAVAILABLE);
  CHECK(client == NULL);
  CHECK(strstr(veil_last_error(), "tls_trusted_certs") != NULL);

  /* Trusting another certificate. */
  options.tls_trusted_certs = other_certs;
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "its TLS certificate is not trusted") != NULL);

  /* Expecting another name. */
  options.tls_trusted_certs = trusted_certs;
  options.tls_server_name1 = "other.example";
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "server 1") != NULL);
  CHECK(strstr(veil_last_error(), "hostname mismatch") != NULL);

  options.tls_server_name1 = NULL;
  options.tls_trusted_certs = "/nonexistent/veil.pem";
  CHECK(veil_client_connect(&options, &client) == VEIL_ERR_NOT_FOUND);

  /* Trusted: rows over TLS as over plaintext. */
  options.tls_trusted_certs = trusted_certs;
  CHECK(veil_client_connect(&options, &client) == VEIL_OK);
  CHECK(client != NULL);
  indices[0] = rows - 1;
  indices[1] = 3;
  CHECK(veil_lookup(client, indices, 2, values, 2 * dim) == VEIL_OK);
  for (i = 0; i < 2; ++i) {
    for (j = 0; j < dim; ++j) CHECK(values[i * dim + j] == expected_value(indices[i], j));
  }
  veil_client_close(client);
  return 0;
}

/* Layout lookups from C: a bad layout file is a clear error; wanted rows come back in the caller's
 * order with the values and missing flags the C++ driver computed with the client library. */
int veil_c_abi_layout_checks(const char* server0, const char* server1, const char* layout_path,
                             const char* not_a_layout, const int32_t* rows, size_t count,
                             const float* expected, const uint8_t* expected_missing);

int veil_c_abi_layout_checks(const char* server0, const char* server1, const char* layout_path,
                             const char* not_a_layout, const int32_t* rows, size_t count,
                             const float* expected, const uint8_t* expected_missing) {
  veil_layout* layout = (veil_layout*)&layout; /* must be reset to NULL on failure */
  veil_layout_info info;
  veil_client_options options;
  veil_client* client = NULL;
  float values[64 * 16];
  uint8_t missing[64];
  size_t i;

  CHECK(veil_layout_open("/nonexistent.veillayout", &layout) == VEIL_ERR_NOT_FOUND);
  CHECK(layout == NULL);
  CHECK(veil_layout_open(not_a_layout, &layout) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_layout_open(NULL, &layout) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_layout_open(layout_path, &layout) == VEIL_OK);
  CHECK(veil_layout_get_info(layout, &info) == VEIL_OK);
  CHECK(count <= 64 && info.row_values <= 16);

  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.server0 = server0;
  options.server1 = server1;
  CHECK(veil_client_connect(&options, &client) == VEIL_OK);
  CHECK(veil_lookup_layout(client, layout, rows, count, values, count * info.row_values - 1,
                           missing, count) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_layout(client, NULL, rows, count, values, sizeof(values) / sizeof(float),
                           missing, count) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lookup_layout(client, layout, rows, count, values, sizeof(values) / sizeof(float),
                           missing, count) == VEIL_OK);
  for (i = 0; i < count; ++i) {
    CHECK(missing[i] == expected_missing[i]);
  }
  for (i = 0; i < count * info.row_values; ++i) {
    CHECK(values[i] == expected[i]);
  }
  veil_client_close(client);
  veil_layout_close(layout);
  veil_layout_close(NULL);

  /* A closed handle stays refused even once another handle of its kind is open (a handle was the
   * object's address, which the next open could be given: the stale one then named it). */
  for (i = 0; i < 8; ++i) {
    veil_layout* again = NULL;
    CHECK(veil_layout_open(layout_path, &again) == VEIL_OK);
    CHECK(again != layout);
    CHECK(veil_layout_get_info(layout, &info) == VEIL_ERR_INVALID_ARGUMENT);
    CHECK(veil_layout_get_info(again, &info) == VEIL_OK);
    veil_layout_close(again);
  }
  return 0;
}

/* A bfv-bag server (bag_server) and a dpf2 server (dpf_server) of the same table. */
int veil_c_abi_bag_checks(const char* bag_server, const char* dpf_server, uint64_t rows,
                          uint32_t dim) {
  veil_bag_client* client = (veil_bag_client*)&client; /* must be reset to NULL on failure */
  veil_bag_client_options options;
  veil_bag_table_info info;
  veil_call_stats stats;
  /* Bags {0, rows - 1, 0} (a repeated row) and {5}. */
  uint64_t indices[4] = {0, 0, 0, 5};
  uint32_t bag_sizes[2] = {3, 1};
  int64_t weights[4] = {2, -1, 3, 7};
  int64_t sums[2 * 16];
  float values[2 * 16];
  uint32_t j;

  CHECK(dim <= 16);
  indices[1] = rows - 1;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  CHECK(veil_bag_client_connect(NULL, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(client == NULL);
  CHECK(veil_bag_client_connect(&options, NULL) == VEIL_ERR_INVALID_ARGUMENT);

  /* A dpf2 server is refused with a clear message. */
  options.server = dpf_server;
  client = (veil_bag_client*)&client;
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(client == NULL);
  CHECK(strstr(veil_last_error(), "speaks protocol \"dpf2\"") != NULL);

  options.server = bag_server;
  /* Its table is epoch 1 and untagged: refused with a newer min_epoch, or a row key file (here
   * one that is not there). */
  options.min_epoch = 2;
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "(min_epoch 2)") != NULL);
  options.min_epoch = 0;
  options.row_key_file = "/nonexistent/table.rowkey";
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_ERR_NOT_FOUND);
  CHECK(strstr(veil_last_error(), "cannot open row key /nonexistent/table.rowkey") != NULL);
  CHECK(client == NULL);
  options.row_key_file = NULL;
  CHECK(write_latch() == 0);
  options.failure_latch_file = latch;
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "failure latch") != NULL);
  CHECK(remove(latch) == 0);
  options.threads = -1;
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "threads must be 0") != NULL);
  CHECK(client == NULL);
  options.threads = (int64_t)1 << 31;
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "threads is 2147483648") != NULL);
  CHECK(client == NULL);
  /* below int's range: refused, not truncated to its low 32 bits (1,536 threads) */
  options.threads = -((int64_t)1 << 40) + 1536;
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "threads is -1099511626240") != NULL);
  CHECK(client == NULL);
  /* threads reaches the client: a negative count is refused above, two give the same sums. */
  options.threads = 2;
  CHECK(veil_bag_client_connect(&options, &client) == VEIL_OK);
  CHECK(client != NULL);
  CHECK(veil_bag_client_table_info(client, &info) == VEIL_OK);
  CHECK(info.rows == rows && info.dim == dim && info.frac_bits == 16);
  CHECK(info.galois_key_bytes > 1000000 && info.query_bytes > 0 && info.answer_bytes > 0);

  /* Exact sums: row r, column j holds (7r + j) * 2^14 as an integer. */
  CHECK(veil_bag_lookup_pooled_sums(client, indices, 4, bag_sizes, 2, weights, sums, 2 * dim) ==
        VEIL_OK);
  CHECK(strcmp(veil_last_error(), "") == 0);
  for (j = 0; j < dim; ++j) {
    CHECK(sums[j] == (int64_t)(5 * j - (7 * (rows - 1) + j)) * 16384);
    CHECK(sums[dim + j] == (int64_t)(7 * (7 * 5 + j)) * 16384);
  }
  CHECK(veil_bag_last_call_stats(client, &stats) == VEIL_OK);
  CHECK(stats.lookups == 2 && stats.keys == 2);
  CHECK(stats.bytes_up >= 2 * info.query_bytes && stats.bytes_down >= 2 * info.answer_bytes);

  CHECK(veil_bag_lookup_pooled(client, indices, 4, bag_sizes, 2, NULL, VEIL_POOL_SUM, values,
                               2 * dim) == VEIL_OK);
  for (j = 0; j < dim; ++j) {
    CHECK(values[j] == 2 * expected_value(0, j) + expected_value(rows - 1, j));
    CHECK(values[dim + j] == expected_value(5, j));
  }
  CHECK(veil_bag_lookup_pooled(client, indices, 4, bag_sizes, 2, NULL, VEIL_POOL_MEAN, values,
                               2 * dim) == VEIL_OK);
  for (j = 0; j < dim; ++j) {
    CHECK(values[j] == (2 * expected_value(0, j) + expected_value(rows - 1, j)) / 3);
  }

  /* Bad calls: an error code and a message, and the client keeps working. */
  CHECK(veil_bag_lookup_pooled(client, indices, 4, bag_sizes, 2, NULL, 7, values, 2 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "unknown pooling mode 7") != NULL);
  CHECK(veil_bag_lookup_pooled_sums(client, indices, 4, bag_sizes, 2, weights, sums, dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "output buffer holds") != NULL);
  indices[3] = rows;
  CHECK(veil_bag_lookup_pooled_sums(client, indices, 4, bag_sizes, 2, weights, sums, 2 * dim) ==
        VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "outside the table") != NULL);
  indices[3] = 5;
  CHECK(veil_bag_lookup_pooled_sums(client, indices, 4, bag_sizes, 2, weights, sums, 2 * dim) ==
        VEIL_OK);
  CHECK(sums[dim] == (int64_t)(7 * 35) * 16384);

  veil_bag_client_close(client);
  veil_bag_client_close(NULL);
  return 0;
}

/* lwe_server speaks lwe-simple; dim <= 16. */
int veil_c_abi_lwe_checks(const char* lwe_server, const char* hint_cache_dir, uint64_t rows,
                          uint32_t dim) {
  veil_lwe_client* client = (veil_lwe_client*)&client; /* must be reset to NULL on failure */
  veil_lwe_client_options options;
  veil_lwe_table_info info;
  veil_call_stats stats;
  uint64_t indices[3] = {0, 0, 0};
  uint32_t words[3 * 16];
  float values[3 * 16];
  uint32_t i, j;

  indices[1] = rows - 1;
  indices[2] = 17;
  memset(&options, 0, sizeof(options));
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(client == NULL);
  CHECK(strstr(veil_last_error(), "struct_size") != NULL);
  options.struct_size = sizeof(options);
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(veil_lwe_client_connect(&options, NULL) == VEIL_ERR_INVALID_ARGUMENT);
  options.server = lwe_server;
  options.protocol = "lwe-triple";
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "lwe-hybrid or lwe-double-pack") != NULL);
  /* The server speaks lwe-simple: a DoublePIR client is refused before any query. */
  options.protocol = "lwe-double";
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "speaks protocol") != NULL);
  CHECK(client == NULL);

  options.protocol = NULL; /* lwe-simple */
  options.min_epoch = 2;  /* its table is epoch 1 */
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "(min_epoch 2)") != NULL);
  options.min_epoch = 0;
  options.hint_cache_dir = hint_cache_dir;
  CHECK(write_latch() == 0);
  options.failure_latch_file = latch;
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_ERR_FAILED_PRECONDITION);
  CHECK(strstr(veil_last_error(), "failure latch") != NULL);
  CHECK(remove(latch) == 0);
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_OK);
  CHECK(veil_lwe_client_table_info(client, &info) == VEIL_OK);
  CHECK(info.rows == rows && info.dim == dim && info.row_words == dim);
  CHECK(info.row_format == VEIL_FORMAT_FIXED && info.frac_bits == 16);
  CHECK(info.hint_bytes > 0 && info.query_bytes > 0 && info.answer_bytes > 0);
  CHECK(info.hint_from_cache == 0);

  CHECK(veil_lwe_lookup_words(client, indices, 3, words, 3 * dim) == VEIL_OK);
  for (i = 0; i < 3; ++i) {
    for (j = 0; j < dim; ++j) {
      CHECK(words[i * dim + j] == (uint32_t)((indices[i] * 7 + j) * 16384u));
    }
  }
  CHECK(veil_lwe_lookup(client, indices, 3, values, 3 * dim) == VEIL_OK);
  for (i = 0; i < 3; ++i) {
    for (j = 0; j < dim; ++j) CHECK(values[i * dim + j] == expected_value(indices[i], j));
  }
  CHECK(veil_lwe_last_call_stats(client, &stats) == VEIL_OK);
  CHECK(stats.lookups == 3 && stats.keys == 3);
  CHECK(stats.bytes_up >= 3 * info.query_bytes && stats.bytes_down >= 3 * info.answer_bytes);

  /* Short buffers, a row outside the table, no indices. */
  CHECK(veil_lwe_lookup(client, indices, 3, values, 3 * dim - 1) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "output buffer") != NULL);
  indices[0] = rows;
  CHECK(veil_lwe_lookup_words(client, indices, 1, words, dim) == VEIL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(veil_last_error(), "outside the table") != NULL);
  CHECK(veil_lwe_lookup_words(client, NULL, 1, words, dim) == VEIL_ERR_INVALID_ARGUMENT);
  /* A handle of another kind is refused. */
  CHECK(veil_lwe_last_call_stats((const veil_lwe_client*)&options, &stats) ==
        VEIL_ERR_INVALID_ARGUMENT);
  veil_lwe_client_close(client);
  CHECK(veil_lwe_client_table_info(client, &info) == VEIL_ERR_INVALID_ARGUMENT);
  veil_lwe_client_close(client); /* closing twice is harmless */
  veil_lwe_client_close(NULL);

  /* A second client finds the hint in the cache. */
  CHECK(veil_lwe_client_connect(&options, &client) == VEIL_OK);
  CHECK(veil_lwe_client_table_info(client, &info) == VEIL_OK);
  CHECK(info.hint_from_cache == 1);
  indices[0] = 5;
  CHECK(veil_lwe_lookup_words(client, indices, 1, words, dim) == VEIL_OK);
  for (j = 0; j < dim; ++j) CHECK(words[j] == (uint32_t)((5 * 7 + j) * 16384u));
  veil_lwe_client_close(client);
  return 0;
}
