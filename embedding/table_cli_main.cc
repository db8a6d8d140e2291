// veil-table: the table commands on their own, for development and tests (the `veil` binary
// offers the same as `veil table ...`).
#include "embedding/table_cli.h"

int main(int argc, char** argv) { return veil::embedding::RunTableCli(argc, argv); }
