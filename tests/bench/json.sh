#!/usr/bin/env bash
# bench/json.sh: memory per byte of JSON body (make bench, section "json"; a report, not a test).
# Sourced by tests/bench/run.sh with its PostgreSQL (PG* in the environment), $bin and $work.
#
# For every JSON endpoint of sm-ingest (streams, reports, profiles) and sm-web (every POST and
# PATCH), tests/bench/json_rss.py sends a large legitimate body and a node bomb of about 4 MB and
# prints the server's peak RSS growth per body byte (goal: at most 4; issue 25).
set -euo pipefail

echo
echo "== json: peak RSS growth per body byte, each JSON endpoint (goal <= 4)"
"$bin/sm-admin" migrate >/dev/null
itok=$("$bin/sm-admin" token create --role ingest --name json-bench 2>/dev/null)
atok=$("$bin/sm-admin" token create --role admin --name json-bench-admin 2>/dev/null)
rm -f "$work/port"
"$bin/sm-ingest" --listen 127.0.0.1:0 --port-file "$work/port" --log-level error 2>"$work/ingest.log" &
ingest_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
python3 "$repo/tests/bench/json_rss.py" ingest "http://127.0.0.1:$(cat "$work/port")" "$ingest_pid" "$itok"
kill "$ingest_pid"; wait "$ingest_pid" 2>/dev/null || true; ingest_pid=
rm -f "$work/port"
"$bin/sm-web" --listen 127.0.0.1:0 --port-file "$work/port" --no-worker --max-body 16M --log-level error \
	2>"$work/web.log" &
web_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
python3 "$repo/tests/bench/json_rss.py" web "http://127.0.0.1:$(cat "$work/port")" "$web_pid" "$atok" "$atok"
kill "$web_pid"; wait "$web_pid" 2>/dev/null || true; web_pid=
