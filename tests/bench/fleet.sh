#!/usr/bin/env bash
# bench/fleet.sh: what a fleet of guard agents costs the backend (make bench,
# section "fleet"; a report, not a test). Sourced by tests/bench/run.sh with its
# PostgreSQL (PG* in the environment), $bin, $tools and $work.
#
# Heartbeats: wrk posts agent reports (POST /api/v1/agents/report) for 1,000
# hosts of 4 guarded processes each, as fast as one sm-ingest takes them for
# 10 s; the CPU that sm-ingest and PostgreSQL spent per report, and the table
# bytes per process and per host-hour, give the load of 1,000 hosts reporting
# every 60 s, extrapolated linearly.
# Profiles: guardtest trained three ways, each profile uploaded as many hosts'
# (10, 100, 1,000 uploads); the time the merge of a build's uploads takes
# (recorded by sm-ingest in profiles_merged.merge_ms) and the size of the result.
set -euo pipefail

fleet_cpu_ms() { # CPU of sm-ingest (pid $1) and of every postgres process, in ms: "INGEST PG"
	local pg=0 p
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = postgres ] || continue
		pg=$((pg + $(awk '{ print $14 + $15 }' "$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$(awk '{ print ($14 + $15) * 10 }' "/proc/$1/stat") $((pg * 10))"
}

echo
echo "== fleet: agents' reports and profiles against one sm-ingest"
psql -Xqc "TRUNCATE agent_procs, agent_hours, profile_uploads, profiles_merged"
token=$("$bin/sm-admin" token create --role ingest --name fleet-bench 2>/dev/null)
rm -f "$work/port"
"$bin/sm-ingest" --listen 127.0.0.1:0 --port-file "$work/port" --log-level warn --profile-merge-ms 3600000 \
	2>"$work/ingest.log" &
ingest_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
url=http://127.0.0.1:$(cat "$work/port")

cat >"$work/report.lua" <<'LUA'
local token = os.getenv("SM_BENCH_TOKEN")
local n = 0
request = function()
	n = n + 1
	local host = n % 1000
	local pid = 1000 + math.floor(n / 1000) % 4
	local body = string.format('{"v":1,"host":"host-%04d","exe":"/usr/sbin/nginx","build_id":"3f9a0c11","mode":"guard",' ..
		'"agent_version":"1.0","app":"nginx","pid":%d,"started_ns":1700000000000000000,"units":%d,' ..
		'"violations":%d,"drops":0,"spool_backlog":0,"ship_errors":0}', host, pid, n, math.floor(n / 97))
	return wrk.format("POST", "/api/v1/agents/report",
		{ ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. token }, body)
end
LUA
# warm the token cache and the prepared paths, then measure
SM_BENCH_TOKEN=$token wrk -t1 -c4 -d2s -s "$work/report.lua" "$url" >/dev/null 2>&1
read -r ing0 pg0 < <(fleet_cpu_ms "$ingest_pid")
SM_BENCH_TOKEN=$token wrk -t1 -c8 -d10s --latency -s "$work/report.lua" "$url" >"$work/wrk" 2>&1
read -r ing1 pg1 < <(fleet_cpu_ms "$ingest_pid")
reqs=$(awk '/requests in/ { print $1 }' "$work/wrk")
rps=$(awk '$1 == "Requests/sec:" { print $2 }' "$work/wrk")
bad=$(awk '/Non-2xx/ { print $NF }' "$work/wrk")
p99=$(awk '$1 == "99%" { print $2 }' "$work/wrk")
procs=$(psql -XAtc "SELECT count(*) FROM agent_procs")
bytes_proc=$(psql -XAtc "SELECT pg_total_relation_size('agent_procs') / greatest(count(*), 1) FROM agent_procs")
bytes_hour=$(psql -XAtc "SELECT pg_total_relation_size('agent_hours') / greatest(count(*), 1) FROM agent_hours")
awk -v n="$reqs" -v rps="$rps" -v bad="${bad:-0}" -v p99="$p99" -v di="$((ing1 - ing0))" -v dp="$((pg1 - pg0))" \
	-v procs="$procs" -v bp="$bytes_proc" -v bh="$bytes_hour" 'BEGIN {
	ci = di / n; cp = dp / n
	printf "reports: %d in 10 s, %.0f/s (8 connections), p99 %s, non-2xx %d; %d processes of 1,000 hosts stored\n", n, rps, p99, bad, procs
	printf "per report: sm-ingest %.3f ms CPU, PostgreSQL %.3f ms CPU\n", ci, cp
	r = 1000 * 4 / 60
	printf "1,000 hosts x 4 guarded processes, a report a minute each: %.1f reports/s = %.1f %% of one core " \
		"(sm-ingest %.1f %%, PostgreSQL %.1f %%); one sm-ingest on this machine takes %.0f such hosts\n",
		r, r * (ci + cp) / 10, r * ci / 10, r * cp / 10, rps / (4 / 60)
	printf "tables: %d bytes per process (agent_procs), %d bytes per host-hour (agent_hours): %.1f MB a day per 1,000 hosts\n",
		bp, bh, (bh * 24 * 1000) / 1e6
}'

# ---- profiles ----
prof=$work/profiles
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
i=0
for mix in fast:80,file:20 fast:50,file:50 fast:95,sleep=1:5; do
	i=$((i + 1))
	"$bin/sm-guard" run --train --profile-dir "$prof/$i" -- "$tools/guardtest" epoll "$port" >/dev/null 2>&1 &
	gp=$!
	sleep 0.3
	"$tools/guardtest" client "$port" 20000 4 "$mix" >/dev/null
	"$tools/guardtest" client "$port" 1 1 quit:1 >/dev/null 2>&1 || true
	wait "$gp" || true
done
bid=$(basename "$(ls "$prof/1"/*.json)" .json)
printf '%s\n' "$token" >"$work/token"
upload() { # upload N: N processes' uploads, of hosts h-0..h-N-1, cycling through the three profiles
	local k
	for k in $(seq 0 $(($1 - 1))); do
		printf '{"v":1,"host":"h-%d","pid":%d,"started_ns":1700000000000000000,"profile":' "$k" "$((k + 100))"
		tr -d '\n' <"$prof/$((k % 3 + 1))/$bid.json"
		printf '}\n'
	done | split -l 1 -d -a 5 - "$work/up."
	ls "$work"/up.* | xargs -P 4 -I{} curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $token" \
		-H 'Content-Type: application/json' --data-binary @{} "$url/api/v1/profiles" | sort | uniq -c | awk '$2 != 200 {
		print "bench: profile uploads answered " $2 " (" $1 ")" > "/dev/stderr"; exit 1 }'
	rm -f "$work"/up.*
}
echo "profile of guardtest: $(du -k "$prof/1/$bid.json" | cut -f1) KB, $(tr -d '\n' <"$prof/1/$bid.json" | grep -o '"contexts"' | wc -l) context lists"
for n in 10 100 1000; do
	psql -Xqc "TRUNCATE profile_uploads, profiles_merged"
	upload "$n"
	# the merge when an agent asks for the build's profile and an upload made it stale
	psql -Xqc "UPDATE profiles_merged SET stale = true, merged_at = now() - interval '1 day'"
	t0=$(date +%s%N)
	code=$(curl -s -o "$work/merged.json" -w '%{http_code}' -H "Authorization: Bearer $token" "$url/api/v1/profiles/$bid")
	t1=$(date +%s%N)
	[ "$code" = 200 ] || { echo "bench: GET /api/v1/profiles/$bid answered $code" >&2; exit 1; }
	psql -XAtc "SELECT 'profile merge of ' || processes || ' uploads from ' || hosts || ' hosts: ' ||
		round(merge_ms::numeric, 1) || ' ms (the GET: $(( (t1 - t0) / 1000000 )) ms), ' || units || ' units, ' ||
		length(profile) / 1024 || ' KB merged' FROM profiles_merged"
done
echo "sm-ingest: peak RSS $(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$ingest_pid/status") MB"
kill "$ingest_pid"
wait "$ingest_pid" || true
ingest_pid=
