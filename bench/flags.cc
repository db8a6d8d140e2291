// Every flag of veil-bench, declared once (Abseil flags; --help lists them). Each suite reads the
// ones it uses through bench::Flags with its own default; a flag given to a suite that does not
// use it is an error. A new suite flag gets one line here.
#include <string>

#include "absl/flags/flag.h"
#include "absl/types/optional.h"

ABSL_FLAG(absl::optional<std::string>, aggregate_count, absl::nullopt,
          "paillier: ciphertexts summed by the aggregation figures");
ABSL_FLAG(absl::optional<std::string>, backend, absl::nullopt,
          "cpu or gpu (forwards to the suite's -gpu variant)");
ABSL_FLAG(absl::optional<std::string>, bag, absl::nullopt, "bag size (pooled lookups)");
ABSL_FLAG(absl::optional<std::string>, bag_dim, absl::nullopt,
          "he: embedding dimension of the bfv-bag figure");
ABSL_FLAG(absl::optional<std::string>, bag_rows, absl::nullopt,
          "he: table rows of the bfv-bag figure");
ABSL_FLAG(absl::optional<std::string>, batch, absl::nullopt,
          "keys or queries answered in one pass (a list for some GPU suites)");
ABSL_FLAG(absl::optional<std::string>, bits, absl::nullopt,
          "paillier: modulus bits (1024, 2048, 3072)");
ABSL_FLAG(absl::optional<std::string>, budget_s, absl::nullopt, "seconds each timing may take");
ABSL_FLAG(absl::optional<std::string>, clients, absl::nullopt, "e2e, soak: client threads");
ABSL_FLAG(absl::optional<std::string>, columns, absl::nullopt, "GPU suites: table columns");
ABSL_FLAG(absl::optional<std::string>, count, absl::nullopt, "operations timed");
ABSL_FLAG(absl::optional<std::string>, device, absl::nullopt, "GPU suites: the CUDA device");
ABSL_FLAG(absl::optional<std::string>, devices, absl::nullopt,
          "GPU suites: how many devices share the table");
ABSL_FLAG(absl::optional<std::string>, dim, absl::nullopt,
          "bfv-bag-e2e, lwe-e2e: embedding dimension");
ABSL_FLAG(absl::optional<std::string>, dir, absl::nullopt,
          "table-load, soak: where the tables (and the soak servers' logs) are written");
ABSL_FLAG(absl::optional<std::string>, duration_s, absl::nullopt, "e2e: measured seconds");
ABSL_FLAG(absl::optional<std::string>, hostile, absl::nullopt,
          "neighbour: hostile connections (slow senders, idle, other key types)");
ABSL_FLAG(absl::optional<std::string>, hostile_interval_ms, absl::nullopt,
          "neighbour: pause between the other-key-type clients' calls (0: none)");
ABSL_FLAG(absl::optional<std::string>, kill_every_s, absl::nullopt,
          "soak: seconds between replica kills");
ABSL_FLAG(absl::optional<std::string>, json_out, absl::nullopt,
          "also append the JSON lines to this file");
ABSL_FLAG(absl::optional<std::string>, kernels, absl::nullopt,
          "lwe-answer: auto, or all to compare every CPU kernel");
ABSL_FLAG(absl::optional<std::string>, log_domain, absl::nullopt,
          "DPF domain: 2^log-domain points");
ABSL_FLAG(absl::optional<std::string>, lookups_per_call, absl::nullopt,
          "e2e: rows fetched per call");
ABSL_FLAG(absl::optional<std::string>, lookups_per_hint, absl::nullopt,
          "lattice: lookups a hint is amortised over when choosing the shape");
ABSL_FLAG(absl::optional<std::string>, matvec_cols, absl::nullopt,
          "he: columns of the BSGS matrix");
ABSL_FLAG(absl::optional<std::string>, matvec_rows, absl::nullopt, "he: rows of the BSGS matrix");
ABSL_FLAG(absl::optional<std::string>, matvec_threads, absl::nullopt,
          "he: threads of the BSGS product");
ABSL_FLAG(absl::optional<std::string>, max_batch, absl::nullopt, "e2e: the servers' --max_batch");
ABSL_FLAG(absl::optional<std::string>, max_wait_us, absl::nullopt,
          "e2e: the servers' --max_wait_us");
ABSL_FLAG(absl::optional<std::string>, method, absl::nullopt,
          "lwe-answer-gpu: cuda-cores, tensor-cores or all");
ABSL_FLAG(absl::optional<std::string>, mode, absl::nullopt, "dpf-eval: full or point");
ABSL_FLAG(absl::optional<std::string>, n, absl::nullopt, "he: ring dimension N");
ABSL_FLAG(absl::optional<std::string>, output, absl::nullopt,
          "DPF output: add1, add4, add16 or xor");
ABSL_FLAG(absl::optional<std::string>, pad_bags, absl::nullopt,
          "bfv-bag-e2e: keys per bag of the two-server pooled lookup (0: not padded)");
ABSL_FLAG(absl::optional<std::string>, plain_bits, absl::nullopt, "he: plaintext modulus bits");
ABSL_FLAG(absl::optional<std::string>, prg, absl::nullopt,
          "DPF PRG: aes128, chacha8, chacha12, chacha20 or siphash");
ABSL_FLAG(absl::optional<std::string>, protocol, absl::nullopt,
          "lwe-answer, lwe-e2e: simple or double; lattice: simple, double or exppack-s");
ABSL_FLAG(absl::optional<std::string>, records_per_column, absl::nullopt,
          "lattice: records per database column (0: chosen)");
ABSL_FLAG(absl::optional<std::string>, reference, absl::nullopt,
          "e2e: 1 measures the backend alone too (serving_ratio)");
ABSL_FLAG(absl::optional<std::string>, reps, absl::nullopt, "repetitions");
ABSL_FLAG(absl::optional<std::string>, row_bytes, absl::nullopt,
          "lwe-answer, lattice: bytes per table row");
ABSL_FLAG(absl::optional<std::string>, round_s, absl::nullopt,
          "neighbour: seconds of each alternating round alone / with the hostiles");
ABSL_FLAG(absl::optional<std::string>, restart_after_s, absl::nullopt,
          "soak: seconds a killed replica stays down");
ABSL_FLAG(absl::optional<std::string>, roll_at_s, absl::nullopt,
          "soak: when every replica rolls to the new table version");
ABSL_FLAG(absl::optional<std::string>, row_tags, absl::nullopt,
          "bfv-bag-e2e: 1 tags the table with the linear MAC (kind 4) and checks both clients");
ABSL_FLAG(absl::optional<std::string>, rows, absl::nullopt, "table rows");
ABSL_FLAG(absl::optional<std::string>, server_bin, absl::nullopt,
          "e2e suites: the veil-server executable");
ABSL_FLAG(absl::optional<std::string>, single_query_rows, absl::nullopt,
          "GPU suites: rows from which one query runs alone");
ABSL_FLAG(absl::optional<std::string>, strategy, absl::nullopt,
          "GPU/pir-answer: expansion strategy");
ABSL_FLAG(absl::optional<std::string>, table_dtype, absl::nullopt, "pir-answer: u32 or int8");
ABSL_FLAG(absl::optional<std::string>, threads, absl::nullopt, "CPU threads");
ABSL_FLAG(absl::optional<std::string>, tls, absl::nullopt, "e2e: on or off");
ABSL_FLAG(absl::optional<std::string>, verify, absl::nullopt,
          "1 checks results against the reference");
ABSL_FLAG(absl::optional<std::string>, verify_keys, absl::nullopt,
          "GPU suites: keys checked against the CPU");
ABSL_FLAG(absl::optional<std::string>, warmup_s, absl::nullopt, "e2e: warm-up seconds");
ABSL_FLAG(absl::optional<std::string>, window_log, absl::nullopt,
          "dpf-eval: bounded window, 2^window-log leaves");
ABSL_FLAG(absl::optional<std::string>, with_product, absl::nullopt,
          "exppack-gpu: 1 also builds the table and times SimplePIR's product");
ABSL_FLAG(absl::optional<std::string>, words, absl::nullopt, "32-bit words per row");
