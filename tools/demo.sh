#!/usr/bin/env bash
# ./kmirror demo: a live mirror, end to end, on this machine.
#   1. an embedded source: librdkafka's mock cluster (3 brokers) in a helper
#      process, with topics `orders` (3 partitions) and `payments` (2);
#   2. real librdkafka producers: plain+gzip and idempotent+zstd, with keys
#      and headers (the mock cluster writes no transaction markers, so a
#      transactional producer would look forever open on a mirror: see
#      ../shared/spec/test-peers.md; transactions are tested elsewhere);
#   3. kmirrord mirroring both topics, progress shown live from
#      `kmirrorctl status` (records/s, bytes/s, lag per partition);
#   4. kcat reading the mirror back, compared with the source, and a dump
#      of a mirrored segment showing the mapped (negative) producer ids;
#   5. an application's consumer group on the source (kcat -G) commits;
#   6. a failover of one topic (kmirrorctl stop) right after the commits,
#      while the source still answers: the stop's last offset sync, the
#      MIRROR_PID_RESET barrier, local idempotent producers on the former
#      mirror, and the application's group resuming on kmirrord exactly at
#      the offsets it committed on the source (checked: the demo fails
#      otherwise).
# usage: tools/demo.sh BUILD_DIR [SECONDS_OF_PRODUCING]
set -euo pipefail

BUILD=$(readlink -f "$1")
SECS=${2:-8}
DIR=$(mktemp -d /tmp/kmirror-demo.XXXXXX)
PIDS=()

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

# Wait (bounded) until a command succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	for _ in $(seq $((secs * 10))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "demo: timed out waiting for $what" >&2
	exit 1
}

say "1. source: librdkafka mock cluster, 3 brokers (work dir $DIR)"
"$BUILD/tools/kmirror-mock-source" --brokers 3 --topic orders:3 \
	--topic payments:2 --ready-file "$DIR/source.ready" >"$DIR/source.log" 2>&1 &
PIDS+=($!)
wait_for "the mock cluster" 20 test -s "$DIR/source.ready"
SRC=$(sed -n 's/^bootstrap=//p' "$DIR/source.ready")
echo "bootstrap=$SRC"

say "2. producers: plain+gzip on orders, idempotent+zstd on payments"
RATE=4000
COUNT=$((RATE * SECS))
"$BUILD/tools/kmirror-produce" --bootstrap "$SRC" --topic orders \
	--mode plain --compression gzip --keys seq --headers 2 --size 200 \
	--count "$COUNT" --rate "$RATE" >"$DIR/p1.log" 2>&1 &
P1=$!
"$BUILD/tools/kmirror-produce" --bootstrap "$SRC" --topic payments \
	--mode idempotent --compression zstd --keys random --size 500 \
	--count "$COUNT" --rate "$RATE" >"$DIR/p2.log" 2>&1 &
P2=$!
PIDS+=("$P1" "$P2")

say "3. kmirrord mirroring orders and payments"
cat >"$DIR/kmirrord.properties" <<EOF
data.dir=$DIR/data
source.bootstrap.servers=$SRC
topics=orders,payments
listeners=127.0.0.1:0
control.socket=$DIR/kmirrord.sock
flush.ms=100
fetch.max.wait.ms=100
groups=billing
group.sync.interval.ms=5000
EOF
cat "$DIR/kmirrord.properties"
"$BUILD/control/kmirrord" --config "$DIR/kmirrord.properties" \
	>"$DIR/kmirrord.log" 2>&1 &
KMD=$!
PIDS+=("$KMD")
wait_for "kmirrord" 30 test -s "$DIR/data/kmirrord.port"
PORT=$(cat "$DIR/data/kmirrord.port")
CTL=("$BUILD/tools/kmirrorctl" --socket "$DIR/kmirrord.sock")

# Live progress until the producers are done and every lag is 0.
producing() { kill -0 "$P1" 2>/dev/null || kill -0 "$P2" 2>/dev/null; }
caught_up() {
	"${CTL[@]}" status --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
sys.exit(0 if all(p.get("lag") == 0 and p["state"] == "MIRRORING"
                  for p in r["partitions"]) else 1)'
}
for _ in $(seq $((SECS * 4 + 120))); do
	printf '\033[2J\033[H'
	echo "kmirrord live (Kafka API 127.0.0.1:$PORT) — $(date +%T)"
	"${CTL[@]}" status || true
	if ! producing && caught_up; then break; fi
	sleep 1
done
for p in "$P1" "$P2"; do wait "$p"; done
echo
cat "$DIR"/p?.log

say "4. kcat reads the mirror; same messages as the source"
for t in orders:0 orders:1 orders:2 payments:0 payments:1; do
	topic=${t%:*} part=${t#*:}
	a=$(kcat -C -b "$SRC" -t "$topic" -p "$part" -o beginning -e -q \
		-X check.crcs=true -f '%o %k %s\n' | md5sum)
	b=$(kcat -C -b "127.0.0.1:$PORT" -t "$topic" -p "$part" -o beginning -e -q \
		-X check.crcs=true -f '%o %k %s\n' | md5sum)
	n=$(kcat -C -b "127.0.0.1:$PORT" -t "$topic" -p "$part" -o beginning -e -q \
		-f '.' | wc -c)
	printf '%-11s %7d messages  source %s  mirror %s  %s\n' "$t" "$n" \
		"${a:0:8}" "${b:0:8}" "$([ "$a" = "$b" ] && echo identical || echo DIFFERENT)"
done
echo "first messages of orders:0 from the mirror:"
kcat -C -b "127.0.0.1:$PORT" -t orders -p 0 -o beginning -c 3 -q \
	-f '  offset %o key %k headers %h value %s\n' | cut -c1-100 || true

say "5. the mirrored segment: producer ids mapped into the negative space"
"$BUILD/tools/kmirror-dump-log" --deep \
	"$DIR/data/payments-0/00000000000000000000.log" | sed -n 1,6p

say "6. an application on the source: group billing reads 3000 payments and commits"
kcat -b "$SRC" -G billing -X auto.offset.reset=earliest -X session.timeout.ms=6000 \
	-c 3000 -q -f '%p %o\n' payments >"$DIR/billing.src" 2>/dev/null
# kcat commits what it consumed as it closes: the next offset per partition.
declare -A COMMITTED
for p in 0 1; do
	COMMITTED[$p]=$(awk -v p=$p '$1 == p { o = $2 + 1 } END { print (o == "" ? 0 : o) }' \
		"$DIR/billing.src")
	echo "payments:$p: billing committed ${COMMITTED[$p]} on the source"
done
echo "kmirrord's group rows now (the periodic sync runs every 5 s; it may not have yet):"
"${CTL[@]}" status | grep -E '^GROUP|^billing' || true

say "7. failover of payments right away: kmirrorctl stop (a last offset sync while the source answers), then the source goes away, local producers"
"${CTL[@]}" stop payments
kill "${PIDS[0]}" # the source goes away after the failover
"$BUILD/tools/kmirror-dump-log" --deep \
	"$DIR/data/payments-0/00000000000000000000.log" | tail -n 1
"$BUILD/tools/kmirror-produce" --bootstrap "127.0.0.1:$PORT" --topic payments \
	--mode idempotent --count 1000 --seed 99
"${CTL[@]}" status | grep -E 'PARTITION|payments'

say "8. the application fails over: same group.id, bootstrap.servers=kmirrord"
# Read each partition to its end; the first offset per partition is where
# the group resumed.
timeout 60 kcat -b "127.0.0.1:$PORT" -G billing -X auto.offset.reset=earliest \
	-X session.timeout.ms=6000 -e -q -f '%p %o\n' payments 2>/dev/null |
	awk '!($1 in first) { first[$1] = $2 } END { for (p in first) print p, first[p] }' \
	>"$DIR/billing.mirror" || true
for p in 0 1; do
	got=$(awk -v p=$p '$1 == p { print $2 }' "$DIR/billing.mirror")
	if [ "$got" != "${COMMITTED[$p]}" ]; then
		echo "demo: FAILED: on kmirrord billing resumed payments:$p at" \
			"${got:-nothing}, but it committed ${COMMITTED[$p]} on the source" >&2
		exit 1
	fi
	echo "  payments:$p: resumed at offset $got = the offset billing committed on the source"
done

say "9. SIGTERM: flush, snapshots, clean shutdown"
kill -TERM "$KMD"
wait "$KMD" && echo "kmirrord exited 0"
tail -n 3 "$DIR/kmirrord.log"
ls "$DIR/data/payments-0"
echo
echo "demo files kept in $DIR"
