#!/usr/bin/env bash
# Runs a libFuzzer target for a bounded time from a fresh seed corpus.
# usage: run_fuzz.sh FUZZER MAKE_SEEDS SECONDS
set -euo pipefail
fuzzer=$1 seeds=$2 secs=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$seeds" "$dir"
# -max_total_time bounds the run; a crash, leak or timeout exits 1:
# libFuzzer's own error exit code is 77, which meson takes for a skip.
# Crash inputs land in fuzz-artifacts/ under the build dir, for replay.
mkdir -p fuzz-artifacts
exec "$fuzzer" "$dir" -artifact_prefix=fuzz-artifacts/ -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 \
	-print_final_stats=1
