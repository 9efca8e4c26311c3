#!/usr/bin/env bash
# bench/formats.sh: other profilers' formats (make bench, section "formats"; a report, not a
# test). Sourced by tests/bench/run.sh with its PostgreSQL (PG* in the environment), $bin,
# $tools, $work and $SM_DATA_DIR.
#
# Decoders and encoders on one core (tests/tools/formatbench): events per second and input
# MB per second of pprof (generated, 500,000 samples; and the real captures), OTLP JSON
# (generated, 500,000 timed values; and the real capture), bcc and perf text; pprof,
# speedscope and folded exports of 100,000 stacks.
# Through the server: pprof-large.cpu (20,430 samples, 1.2 MB gzipped) pushed to
# POST /api/v1/import 60 times as 60 hosts (so that none is a duplicate), 2 at a time, and
# the same 60 pushed again (all duplicates): pushes and events per second, stored.
set -euo pipefail

echo
echo "== formats: importing pprof, OTLP, bcc and perf; exporting pprof, speedscope, folded"
"$tools/formatbench" "$SM_DATA_DIR"

token=$("$bin/sm-admin" token create --role ingest --name formats-bench 2>/dev/null)
rm -f "$work/port"
"$bin/sm-ingest" --listen 127.0.0.1:0 --port-file "$work/port" --log-level warn 2>"$work/ingest.log" &
ingest_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
url=http://127.0.0.1:$(cat "$work/port")/api/v1/import
f=$SM_DATA_DIR/pprof/pprof-large.cpu
for pass in new again; do
	t0=$(now)
	seq 1 60 | xargs -P 2 -I{} curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $token" \
		--data-binary "@$f" "$url?host=fmt-{}&app=formats-bench" >"$work/codes"
	t1=$(now)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	ok=$(grep -c '^200$' "$work/codes" || true)
	echo "POST /api/v1/import of pprof-large.cpu x 60 ($pass): $ok x 200 in $secs s," \
		"$(rate 60 "$secs") pushes/s, $(rate $((60 * 20430)) "$secs") events/s (2 at a time)"
done
echo "stored: $(psql -XAtc "SELECT count(*) || ' streams, ' || sum(n_events) || ' events' FROM streams
	WHERE app = 'formats-bench'"); sm-ingest peak memory $(awk '/VmHWM/ { printf "%.0f MB", $2 / 1024 }' \
	"/proc/$ingest_pid/status")"
kill "$ingest_pid"
wait "$ingest_pid" 2>/dev/null || true
ingest_pid=
