#!/usr/bin/env bash
# Builds the matrix-I/O fuzzer with clang's libFuzzer, AddressSanitizer and UBSan, and runs it:
#   tests/fuzz/run.sh [SECONDS]          (default 300; Debian: apt-get install clang libclang-rt-14-dev)
# It starts from tests/fuzz/corpus and writes new interesting inputs back there (merged, minimal).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-300}
build=../../build/fuzz
mkdir -p "$build"
clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I../../apps \
  matrix_io_fuzzer.cpp ../../apps/common/matrix_io.cpp ../../apps/common/files.cpp -o "$build/matrix_io_fuzzer"
mkdir -p "$build/new"
"$build/matrix_io_fuzzer" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$build/new" corpus
# Keep the committed corpus small: only inputs that add coverage.
"$build/matrix_io_fuzzer" -merge=1 corpus "$build/new" >/dev/null 2>&1
echo "corpus: $(ls corpus | wc -l) files"
