#!/usr/bin/env bash
# bench dio (issue 18 item 1): kmirrord's .log written with direct I/O
# against the page cache, onto the disk, side by side in one run:
#   (a) raw TCP -> buffered file copy + fdatasync (bench-raw-copy);
#   (d) raw TCP -> O_DIRECT file copy (bench-raw-copy --direct): the
#       issue's reference;
#   (k) kmirrord, log.direct.io=true (the default);
#   (kb) kmirrord, log.direct.io=false (buffered, as before).
# The source is a kmirrord with a local topic preloaded with 64 KiB records
# (in the page cache for every contender alike; written buffered, so that
# its open .log ends at its data, which the mirror's must equal once it is
# stopped); each kmirrord mirrors it
# with one worker, timed from its first mirrored record until its durable
# offset (the HW) is the source's end. CPU is the whole process's
# (/proc/PID/stat utime + stime, its io_uring workers included), per GB of
# log moved. Targets: (k) >= 0.9 x (d), at <= 0.35 CPU s/GB.
# DIO_BASE=OTHER_BUILD: that build's kmirrord mirrors too, direct (k0), in
# the same round (before/after on the same machine state).
# DIO_SET="--set KEY=VALUE ...": more settings for the mirrors; DIO_BASE_SET
# the base build's instead (DIO_BASE=build with another DIO_BASE_SET
# compares two settings of one build side by side).
# DIO_PERF=FILE: perf record -g of this build's direct kmirrord while it
# mirrors (the last round's) into FILE, for `perf report -i FILE`.
# usage: bench/dio.sh BUILD_DIR [MIB] [ROUNDS]   (MIB of log, default 1000, under a segment;
#        data lives under ${TMPDIR:-/var/tmp}, on the disk, and is deleted)
set -euo pipefail

BUILD=$(readlink -f "$1")
MIB=${2:-1000}
ROUNDS=${3:-1}
BENCH="dio"
. "$(dirname "$(readlink -f "$0")")/lib.sh"
bench_workdir dio
[ "$(stat -f -c %T "$T")" != tmpfs ] || { echo "bench dio: $T is tmpfs; set TMPDIR to a disk dir" >&2; exit 1; }

status_json() { "$BUILD/tools/kmirrorctl" --socket "$1" status --json; }
field() { sed -n "s/.*\"$1\":\([0-9-]*\).*/\1/p"; }

"$BUILD/control/kmirrord" --set data.dir="$T/a" --set local.topics=big:1 \
	--set listeners=127.0.0.1:0 --set control.socket="$T/a.sock" \
	--set flush.ms=1000 --set log.direct.io=false >"$T/a.log" 2>&1 &
PIDS+=($!)
wait_file "$T/a/kmirrord.port"
A="127.0.0.1:$(cat "$T/a/kmirrord.port")"
END=$((MIB * 16))
echo "preloading big:0 in $A: $END records of 64 KiB"
"$BUILD/tools/kmirror-produce" --bootstrap "$A" --topic big --partition 0 \
	--count "$END" --size 65536 --keys seq --mode plain --compression none \
	--batch-size 1048576 --linger-ms 20 >/dev/null
until [ "$(status_json "$T/a.sock" | tr '{' '\n' | grep '"partition":"big:0"' | field hw)" = "$END" ]; do sleep 0.05; done
SEG=$(ls "$T/a/big-0/"*.log)
BYTES=$(stat -c %s $SEG | awk '{s += $1} END {print s}')
cat $SEG >/dev/null
echo "source: $END records, $BYTES bytes of log; destination $T (on $(stat -f -c %T "$T"))"

mirror() { # DIRECT [KMIRRORD] -> MIR line
	local dest="$T/b" B t0 t1 ticks
	rm -rf "$dest" && mkdir -p "$dest"
	"${2:-$BUILD/control/kmirrord}" --set data.dir="$dest" --set topics=big \
		--set source.bootstrap.servers="$A" --set listeners=127.0.0.1:0 \
		--set control.socket="$T/b.sock" --set workers=1 \
		--set flush.ms=20 --set log.direct.io="$1" ${3-${DIO_SET:-}} >"$T/b.log" 2>&1 &
	B=$!
	PIDS+=("$B")
	until [ -S "$T/b.sock" ] && [ -n "$(status_json "$T/b.sock" 2>/dev/null | field leo 2>/dev/null)" ] &&
	      [ "$(status_json "$T/b.sock" 2>/dev/null | field leo 2>/dev/null)" != 0 ]; do
		kill -0 "$B" || { cat "$T/b.log" >&2; exit 1; }
		sleep 0.005
	done
	t0=$(date +%s.%N)
	local perf=
	if [ -n "${DIO_PERF:-}" ] && [ "$1" = true ] && [ -z "${2:-}" ]; then
		perf record -g -q -o "$DIO_PERF" -p "$B" 2>/dev/null &
		perf=$!
	fi
	# Every 20 ms, not 5: each status answer (JSON, /proc reads) cost
	# kmirrord's main thread ~5% of its CPU in the profile, work the raw
	# copy does not do; t1 is then at most 20 ms late (~2% of a 1 GB run,
	# against kmirrord).
	until [ "$(status_json "$T/b.sock" 2>/dev/null | field hw 2>/dev/null)" = "$END" ]; do
		kill -0 "$B" || { cat "$T/b.log" >&2; exit 1; }
		sleep 0.02
	done
	t1=$(date +%s.%N)
	ticks=$(cpu_ticks "$B")
	[ -z "$perf" ] || { kill -INT "$perf"; wait "$perf" || true; }
	local writes=$(status_json "$T/b.sock" | sed -n 's/.*"log_writes":"\([^"]*\)".*/\1/p')
	kill -TERM "$B"; wait "$B" || true
	cmp "$SEG" "$dest/big-0/$(basename "$SEG")" >&2 || { echo "bench dio: the mirrored .log differs from the source's" >&2; exit 1; }
	rm -rf "$dest"
	writes=${writes// /_}
	python3 -c "b=$BYTES; s=$t1-$t0; c=$ticks/$HZ; print(f'kmirrord_$1${2:+_base} bytes={b} seconds={s:.3f} gbps={b/s/1e9:.3f} cpu_s_per_gb={c/(b/1e9):.3f} writes=$writes')"
}

for r in $(seq "$ROUNDS"); do
	RAW=$("$BUILD/bench/bench-raw-copy" "$SEG" "$T/raw.out"); rm -f "$T/raw.out"
	echo "[round $r] (a)  $RAW"
	DIR=$("$BUILD/bench/bench-raw-copy" --direct "$SEG" "$T/raw.out"); rm -f "$T/raw.out"
	echo "[round $r] (d)  $DIR"
	KD=$(mirror true)
	echo "[round $r] (k)  $KD"
	KB=$(mirror false)
	echo "[round $r] (kb) $KB"
	if [ -n "${DIO_BASE:-}" ]; then
		K0=$(mirror true "$DIO_BASE/control/kmirrord" "${DIO_BASE_SET-${DIO_SET:-}}")
		echo "[round $r] (k0) $K0"
		python3 - "$r" "$KD" "$K0" "$DIR" <<'PYEOF'
import sys
def f(s, k): return float(dict(kv.split("=", 1) for kv in s.split()[1:])[k])
r, kd, k0, dio = sys.argv[1:]
print(f"[round {r}] this build / DIO_BASE's kmirrord, direct: {f(kd, 'gbps') / f(k0, 'gbps'):.2f} x the rate "
      f"({f(kd, 'gbps'):.3f} vs {f(k0, 'gbps'):.3f} GB/s), CPU {f(kd, 'cpu_s_per_gb'):.2f} vs {f(k0, 'cpu_s_per_gb'):.2f} s/GB; "
      f"DIO_BASE's / raw O_DIRECT copy {f(k0, 'gbps') / f(dio, 'gbps'):.2f}")
PYEOF
	fi
	python3 - "$r" "$RAW" "$DIR" "$KD" "$KB" <<'PYEOF'
import sys
def f(s, k): return dict(kv.split("=", 1) for kv in s.split()[1:])[k]
r, raw, dio, kd, kb = sys.argv[1:]
g = {n: float(f(s, "gbps")) for n, s in (("a", raw), ("d", dio), ("k", kd), ("kb", kb))}
c = {n: float(f(s, "cpu_s_per_gb")) for n, s in (("a", raw), ("d", dio), ("k", kd), ("kb", kb))}
print(f"[round {r}] GB/s: kmirrord direct {g['k']:.3f}, kmirrord buffered {g['kb']:.3f}, raw O_DIRECT copy {g['d']:.3f}, raw buffered copy {g['a']:.3f}")
print(f"[round {r}] CPU s/GB: kmirrord direct {c['k']:.2f}, kmirrord buffered {c['kb']:.2f}, raw O_DIRECT copy {c['d']:.2f}, raw buffered copy {c['a']:.2f} (raw: the receiving thread)")
ratio = g['k'] / g['d']
print(f"[round {r}] kmirrord direct / raw O_DIRECT copy: {ratio:.2f} (target >= 0.9: {'met' if ratio >= 0.9 else 'not met'})")
print(f"[round {r}] kmirrord direct / kmirrord buffered: {g['k'] / g['kb']:.2f} x the rate, {c['k'] / c['kb']:.2f} x the CPU per GB")
print(f"[round {r}] kmirrord direct CPU {c['k']:.2f} s/GB (target <= 0.35: {'met' if c['k'] <= 0.35 else 'not met'})")
PYEOF
done
