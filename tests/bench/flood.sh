#!/usr/bin/env bash
# bench/flood.sh: sm-ingest and sm-web (release build, default limits) under connection floods
# from loopback (make bench, section "flood"; a report, not a test). Sourced by
# tests/bench/run.sh with its PostgreSQL (PG* in the environment), $bin, $tools and $work.
#
# Each phase runs SM_BENCH_FLOOD_S seconds (default 30) with tests/tools/flood.c: the attack's
# connections (every one the server closes opened again, at most 1,000 a second) while a
# legitimate client from 127.0.0.1 asks /healthz every 100 ms (for sm-ingest every other
# request stores a stream); printed: its requests and their latency, the server's RSS and
# descriptors, how many attack connections the server closed. tests/integration/test_flood.sh
# asserts the same, shorter.
set -euo pipefail

fs=${SM_BENCH_FLOOD_S:-30}
from8=127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8,127.0.0.9
# sixteen: more than --max-connections / --max-connections-per-ip, so the total limit binds
from16=$from8,127.0.0.10,127.0.0.11,127.0.0.12,127.0.0.13,127.0.0.14,127.0.0.15,127.0.0.16,127.0.0.17
echo
echo "== flood: half-open and trickling connections from loopback, $fs s each; a client asks every 100 ms"

# flood_line LABEL FLOOD-ARGS...: one phase, one line of figures
flood_line() {
	local label=$1 line
	shift
	line=$("$tools/flood" --duration "$fs" "$@" 2>"$work/flood.err")
	awk -v l="$label" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		printf "%-44s probes %5d  failed %d  p50 %5.1f ms  p99 %6.1f ms  max %6.1f ms  RSS %3.0f -> %3.0f MB  fds <= %4d  closed %6d of %6d\n",
			l, f["probes"], f["failed"], f["p50_ms"], f["p99_ms"], f["max_ms"], f["rss_start_kb"] / 1024,
			f["rss_peak_kb"] / 1024, f["fds_peak"], f["closed_by_server"], f["opened"]
	}' <<<"$line"
	sed 's/^/    /' "$work/flood.err"
}
# shed URL PREFIX: the server's shed counters, non-zero ones
shed() {
	curl -s "$1/metrics" | awk -v p="$2_connections_shed_total" 'index($1, p) == 1 && $2 > 0 {
		sub(/.*reason="/, "", $1); sub(/"}/, "", $1); printf "%s %s  ", $1, $2 } END { print "" }'
}
start_srv() { # NAME ARGS...: sets srv_pid, srv_url
	local name=$1
	shift
	rm -f "$work/port"
	"$bin/sm-$name" --listen 127.0.0.1:0 --port-file "$work/port" --log-level warn "$@" 2>"$work/$name-flood.log" &
	srv_pid=$!
	for _ in $(seq 100); do
		[ -s "$work/port" ] && curl -sf -o /dev/null "http://127.0.0.1:$(cat "$work/port")/healthz" && break
		sleep 0.1
	done
	srv_url=http://127.0.0.1:$(cat "$work/port")
}

ftoken=$("$bin/sm-admin" token create --role ingest --name flood 2>/dev/null)
"$tools/genfleet" --streams 1 --events 200 --apps floodbench --hosts 1 --seed 5 --out "$work/flood1.json" 2>/dev/null
start_srv ingest
ingest_pid=$srv_pid
a=${srv_url#http://}
echo "sm-ingest (--max-connections 512, --max-connections-per-ip 64, --header-timeout 10, --min-body-rate 1k):"
flood_line "  5000 half-open from 16 addresses" --target "$a" --conns 5000 --mode half --from "$from16" \
	--pid "$srv_pid" --probe /healthz --probe-post "$work/flood1.json" --token "$ftoken"
flood_line "  2000 half-open from the client's address" --target "$a" --conns 2000 --mode half --from 127.0.0.1 \
	--pid "$srv_pid" --probe /healthz
flood_line "  500 trickling headers (1 byte/s), 8 addr." --target "$a" --conns 500 --mode trickle --from "$from8" \
	--pid "$srv_pid" --probe /healthz
flood_line "  300 bodies at 1 byte/s, 6 addresses" --target "$a" --conns 300 --mode body --token "$ftoken" \
	--from 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7 --pid "$srv_pid" --probe /healthz
echo "  shed by sm-ingest: $(shed "$srv_url" sm_ingest)"
kill "$ingest_pid"
wait "$ingest_pid" || true
ingest_pid=

start_srv web --no-worker
web_pid=$srv_pid
a=${srv_url#http://}
echo "sm-web (--max-connections 256, --max-connections-per-ip 32, --header-timeout 10, --min-body-rate 1k):"
flood_line "  300 half-open from the client's address" --target "$a" --conns 300 --mode half --from 127.0.0.1 \
	--pid "$srv_pid" --probe /healthz
flood_line "  5000 half-open from 16 addresses" --target "$a" --conns 5000 --mode half --from "$from16" \
	--pid "$srv_pid" --probe /healthz
flood_line "  250 trickling headers (1 byte/s), 8 addr." --target "$a" --conns 250 --mode trickle --from "$from8" \
	--pid "$srv_pid" --probe /healthz
echo "  shed by sm-web: $(shed "$srv_url" sm_web)"
kill "$web_pid"
wait "$web_pid" || true
web_pid=
rm -f "$work/flood1.json"
