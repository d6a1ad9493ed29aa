#!/usr/bin/env bash
# bench e2e: kmirrord end to end on loopback, one worker — source, then
# kmirrord, then disk — against, side by side in one run:
#   (a) raw TCP-to-file copy of the same bytes (bench-raw-copy): the
#       physical limit of this machine;
#   (b) a librdkafka consumer reading the same source as fast as it can
#       (bench-consume-rate): the ceiling of a consume-and-reproduce mirror.
# The source is a kmirrord serving writable partitions that this script
# preloads (librdkafka's mock cluster is too slow and too small), with two
# workloads:
#   big:  64 KiB records, uncompressed - the cheapest case for a consumer
#         (few records per byte, nothing to decompress);
#   zstd: 1 KiB records, zstd-compressed batches - what production topics
#         usually hold: a consumer decompresses and walks every record, a
#         byte-for-byte mirror copies the compressed batches.
# Figures are in log bytes (what is on disk: compressed for zstd) per
# second. Targets (issue 4): mirror >= 0.8 x (a) and >= 2 x (b).
# E2E_BASE=OTHER_BUILD: that build's kmirrord mirrors too (k0), after
# this build's, in each pass (before/after on the same machine state).
# usage: bench/e2e.sh BUILD_DIR [GIB]   (GIB of the big workload; the zstd
#        one holds GIB/4 of log)
set -euo pipefail

BUILD=$(readlink -f "$1")
GIB=${2:-2}
BENCH="e2e"
. "$(dirname "$(readlink -f "$0")")/lib.sh"
bench_workdir e2e


status_json() { "$BUILD/tools/kmirrorctl" --socket "$1" status --json; }
# (sed, not python: a python start costs ~0.6 s here, which would swamp
# the timing)
field() { sed -n "s/.*\"$1\":\([0-9-]*\).*/\1/p"; }

# The source: writable partitions on kmirrord A.
"$BUILD/control/kmirrord" --set data.dir="$T/a" --set local.topics=big:1,zstd:1 \
	--set listeners=127.0.0.1:0 --set control.socket="$T/a.sock" \
	--set flush.ms=1000 >"$T/a.log" 2>&1 &
PIDS+=($!)
wait_file "$T/a/kmirrord.port"
A="127.0.0.1:$(cat "$T/a/kmirrord.port")"

hw_of() { # topic
	"$BUILD/tools/kmirrorctl" --socket "$T/a.sock" status --json |
		tr '{' '\n' | grep "\"partition\":\"$1:0\"" | field hw
}

# preload TOPIC COUNT SIZE CODEC: then END, BYTES and SEG describe it.
preload() {
	local topic=$1 count=$2 size=$3 codec=$4
	echo "preloading $topic:0 in $A: $count records of $size B, $codec"
	"$BUILD/tools/kmirror-produce" --bootstrap "$A" --topic "$topic" \
		--partition 0 --count "$count" --size "$size" --keys seq \
		--mode plain --compression "$codec" --batch-size 1048576 \
		--linger-ms 20 >/dev/null
	# acks=1 answers before the flush: wait until all of it is durable.
	until [ "$(hw_of "$topic")" = "$count" ]; do sleep 0.05; done
	END=$count
	SEG=$(ls "$T/a/$topic-0/"*.log)
	BYTES=$(stat -c %s $SEG | awk '{s += $1} END {print s}')
	cat $SEG >/dev/null # in the page cache, for every contender alike
	echo "source $topic: $END records, $BYTES bytes of log in $(echo $SEG | wc -w) segment(s)"
}

# mirror KMIRRORD DEST LABEL TOPIC NAME -> the NAME line (stdout): a
# kmirrord B mirrors A, timed from its first mirrored record until its
# durable offset is A's end (startup, about 0.3 s, is reported apart, on
# stderr).
mirror() {
	local bin=$1 dest=$2 label=$3 topic=$4 name=$5 B t0 t1 ticks
	local ts=$(date +%s.%N)
	"$bin" --set data.dir="$dest/b" --set topics="$topic" \
		--set source.bootstrap.servers="$A" --set listeners=127.0.0.1:0 \
		--set control.socket="$T/b.sock" --set workers=1 \
		--set flush.ms=20 >"$T/b.log" 2>&1 &
	B=$!
	PIDS+=("$B")
	until [ -S "$T/b.sock" ] && [ "$(status_json "$T/b.sock" 2>/dev/null | field leo 2>/dev/null)" != 0 ] &&
	      [ -n "$(status_json "$T/b.sock" 2>/dev/null | field leo 2>/dev/null)" ]; do
		kill -0 "$B" || { cat "$T/b.log" >&2; exit 1; }
		sleep 0.005
	done
	t0=$(date +%s.%N)
	local leo0=$(status_json "$T/b.sock" | field leo)
	until [ -S "$T/b.sock" ] && [ "$(status_json "$T/b.sock" 2>/dev/null | field hw 2>/dev/null)" = "$END" ]; do
		kill -0 "$B" || { cat "$T/b.log" >&2; exit 1; }
		sleep 0.005
	done
	t1=$(date +%s.%N)
	echo "[$label] kmirrord B ($name): first record $(python3 -c "print(f'{$t0-$ts:.2f}')") s after exec (started at offset $leo0 of $END)" >&2
	ticks=$(cpu_ticks "$B")
	python3 -c "b=$BYTES; s=$t1-$t0; c=$ticks/$HZ; print(f'$name bytes={b} seconds={s:.3f} gbps={b/s/1e9:.3f} cpu_s_per_gb={c/(b/1e9):.3f}')"
	kill -TERM "$B"; wait "$B" || true
	rm -rf "$dest/b"
}

# One pass writes into DEST: the disk (bounded by it), then tmpfs, where
# only the software path is measured.
pass() {
	local dest=$1 label=$2 topic=$3 B t0 t1 ticks
	rm -rf "$dest" && mkdir -p "$dest"
	# (a) raw TCP-to-file copy of the same bytes.
	RAW=$("$BUILD/bench/bench-raw-copy" "$(echo $SEG | cut -d' ' -f1)" "$dest/raw.out")
	rm -f "$dest/raw.out"
	echo "[$label] (a) $RAW"
	MIR=$(mirror "$BUILD/control/kmirrord" "$dest" "$label" "$topic" mirror)
	echo "[$label] (k) $MIR"
	if [ -n "${E2E_BASE:-}" ]; then
		MIR0=$(mirror "$E2E_BASE/control/kmirrord" "$dest" "$label" "$topic" mirror_base)
		echo "[$label] (k0) $MIR0"
		python3 - "$label" "$MIR" "$MIR0" <<'PYEOF'
import sys
def f(s, k): return float(dict(kv.split("=") for kv in s.split()[1:])[k])
label, k, k0 = sys.argv[1:]
print(f"[{label}] this build / E2E_BASE's kmirrord: {f(k, 'gbps') / f(k0, 'gbps'):.2f} x the rate, "
      f"CPU {f(k, 'cpu_s_per_gb'):.2f} vs {f(k0, 'cpu_s_per_gb'):.2f} s/GB")
PYEOF
	fi
	rm -rf "$dest"
	# (b) librdkafka consumer, as fast as it goes (reads only).
	CON=$("$BUILD/bench/bench-consume-rate" "$A" "$topic" 0 "$END" "$BYTES")
	echo "[$label] (b) $CON"
	python3 - "$label" "$RAW" "$MIR" "$CON" <<'PYEOF'
import sys
def f(s, k): return float(dict(kv.split("=") for kv in s.split()[1:])[k])
label, raw, mir, con = sys.argv[1:]
a, k, b = (f(s, "gbps") for s in (raw, mir, con))
ca, ck, cb = (f(s, "cpu_s_per_gb") for s in (raw, mir, con))
print(f"[{label}] kmirrord {k:.3f} GB/s vs raw copy {a:.3f} GB/s: ratio {k/a:.2f} (target >= 0.8)")
print(f"[{label}] kmirrord {k:.3f} GB/s vs librdkafka consumer {b:.3f} GB/s: ratio {k/b:.2f} (target >= 2)")
print(f"[{label}] CPU s/GB: kmirrord {ck:.2f}, raw copy {ca:.2f} (receiver), consumer {cb:.2f} (reads only, writes nothing)")
PYEOF
}

for w in big zstd; do
	if [ $w = big ]; then
		preload big $((GIB * 1024 * 1024 / 64)) 65536 none
	else
		# zstd shrinks these payloads about 7x: ~GIB/4 of log.
		preload zstd $((GIB * 1024 * 1024 * 7 / 4)) 1024 zstd
	fi
	pass "$T/disk" "$w disk" $w
	if [ -d /dev/shm ]; then
		pass "/dev/shm/kmirror-bench-e2e.$$" "$w tmpfs" $w
	fi
done
