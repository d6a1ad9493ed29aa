# Shared by the shell benchmarks (e2e.sh, dio.sh, scale.sh, scale_stream.sh):
# a work directory removed at exit with every process started into PIDS,
# and the small helpers each of them needs. Source it after BENCH=NAME.

# T: a fresh directory under $2 (default $TMPDIR or /var/tmp); at exit,
# every pid in PIDS is killed and T removed.
bench_workdir() {
	T=$(mktemp -d "${2:-${TMPDIR:-/var/tmp}}/kmirror-bench-$1.XXXXXX")
	PIDS=()
	trap bench_cleanup EXIT
}
bench_cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}

# Wait for a file to be non-empty: $2 tenths of a second at most (300).
wait_file() {
	for _ in $(seq "${2:-300}"); do [ -s "$1" ] && return 0; sleep 0.1; done
	echo "bench $BENCH: timed out waiting for $1" >&2
	exit 1
}

# utime + stime of a process, in clock ticks (HZ a second).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
