#!/usr/bin/env bash
# bench e2e: kmirrord end to end on loopback, one worker — source, then
# kmirrord, then disk — against, side by side in one run:
#   (a) raw TCP-to-file copy of the same bytes (bench-raw-copy): the
#       physical limit of this machine;
#   (b) a librdkafka consumer reading the same source as fast as it can
#       (bench-consume-rate): the ceiling of a consume-and-reproduce mirror.
# The source is a kmirrord serving a writable partition that this script
# preloads (librdkafka's mock cluster is too slow and too small).
# Targets (issue 4): mirror >= 0.8 x (a) and >= 2 x (b).
# usage: bench/e2e.sh BUILD_DIR [GIB]
set -euo pipefail

BUILD=$(readlink -f "$1")
GIB=${2:-2}
T=$(mktemp -d "${TMPDIR:-/var/tmp}/kmirror-bench-e2e.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

wait_file() {
	for _ in $(seq 300); do [ -s "$1" ] && return 0; sleep 0.1; done
	echo "bench e2e: timed out waiting for $1" >&2
	exit 1
}

status_json() { "$BUILD/tools/kmirrorctl" --socket "$1" status --json; }
field() { python3 -c "import json,sys; r=json.load(sys.stdin); print(r['partitions'][0]['$1'])"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# The source: a writable partition on kmirrord A.
"$BUILD/control/kmirrord" --set data.dir="$T/a" --set local.topics=src:1 \
	--set listeners=127.0.0.1:0 --set control.socket="$T/a.sock" \
	--set flush.ms=1000 >"$T/a.log" 2>&1 &
PIDS+=($!)
wait_file "$T/a/kmirrord.port"
A="127.0.0.1:$(cat "$T/a/kmirrord.port")"
COUNT=$((GIB * 1024 * 1024 / 64))
echo "preloading $GIB GiB into $A src:0 ($COUNT messages of 64 KiB)"
"$BUILD/tools/kmirror-produce" --bootstrap "$A" --topic src --partition 0 \
	--count "$COUNT" --size 65536 --keys none --mode plain \
	--compression none --batch-size 1048576 --linger-ms 20 >/dev/null
END=$(status_json "$T/a.sock" | field hw)
SEG=$(ls "$T"/a/src-0/*.log)
BYTES=$(stat -c %s $SEG | awk '{s += $1} END {print s}')
cat $SEG >/dev/null # all of it in the page cache, for every contender alike
echo "source: $END records, $BYTES bytes in $(echo $SEG | wc -w) segment(s)"

# (a) raw TCP-to-file copy of the same bytes.
RAW=$("$BUILD/bench/bench-raw-copy" "$(echo $SEG | cut -d' ' -f1)" "$T/raw.out")
rm -f "$T/raw.out"
echo "(a) $RAW"

# kmirrord B mirrors A: from start until B's durable offset is A's end.
HZ=$(getconf CLK_TCK)
t0=$(date +%s.%N)
"$BUILD/control/kmirrord" --set data.dir="$T/b" --set topics=src \
	--set source.bootstrap.servers="$A" --set listeners=127.0.0.1:0 \
	--set control.socket="$T/b.sock" --set workers=1 \
	--set flush.ms=1000 >"$T/b.log" 2>&1 &
B=$!
PIDS+=("$B")
until [ -S "$T/b.sock" ] && [ "$(status_json "$T/b.sock" 2>/dev/null | field hw 2>/dev/null)" = "$END" ]; do
	kill -0 "$B" || { cat "$T/b.log"; exit 1; }
	sleep 0.02
done
t1=$(date +%s.%N)
ticks=$(cpu_ticks "$B")
MIR=$(python3 -c "b=$BYTES; s=$t1-$t0; c=$ticks/$HZ; print(f'mirror bytes={b} seconds={s:.3f} gbps={b/s/1e9:.3f} cpu_s_per_gb={c/(b/1e9):.3f}')")
echo "(k) $MIR"
kill -TERM "$B"; wait "$B" || true

# (b) librdkafka consumer, as fast as it goes.
CON=$("$BUILD/bench/bench-consume-rate" "$A" src 0 "$END" "$BYTES")
echo "(b) $CON"

python3 - "$RAW" "$MIR" "$CON" <<'EOF'
import sys
def gbps(s): return float(dict(kv.split("=") for kv in s.split()[1:])["gbps"])
a, k, b = (gbps(s) for s in sys.argv[1:])
print(f"e2e kmirrord {k:.3f} GB/s vs raw copy {a:.3f} GB/s: ratio {k/a:.2f} (target >= 0.8)")
print(f"e2e kmirrord {k:.3f} GB/s vs librdkafka consumer {b:.3f} GB/s: ratio {k/b:.2f} (target >= 2)")
EOF
