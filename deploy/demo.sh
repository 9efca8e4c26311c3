#!/usr/bin/env bash
# demo.sh: the whole stack on this machine, with a demo fleet's trace streams
# stored, for trying stackmine out. `make demo` builds and runs `demo.sh start`;
# `make stop` runs `demo.sh stop`.
#
#   deploy/demo.sh start    private PostgreSQL (deploy/pg.sh), schema, tokens,
#                           sm-ingest on 127.0.0.1:8080 (or the next free port),
#                           a generated fleet shipped with sm-agent, mined and
#                           clustered, a real redis-server run under the guard
#                           agent (trained, then guarded while a slow command
#                           and a slow script run: its violations mined too),
#                           and sm-web (the dashboard and the REST API) on
#                           127.0.0.1:8081; prints what to open and try
#   deploy/demo.sh stop     stop sm-web and sm-ingest (SIGTERM, waits) and PostgreSQL
#   deploy/demo.sh status   what is running
#
# Everything lives in var/: var/pg (the cluster), var/tokens and
# var/ingest.token (mode 0600), var/log/{ingest,web,guard}.log,
# var/run/{ingest,web}.{pid,port}, var/demo (the fleet), var/spool (what
# sm-agent could not deliver), var/profiles (the guard agent's profiles).
# Both commands may be repeated: what already runs is left running.
#
# Environment: SM_INGEST_PORT (first port to try, 8080), SM_WEB_PORT (8081), SM_DEMO_STREAMS (300), SM_DEMO_BASELINE (300),
# SM_DEMO_EVENTS (events per stream, 2000), SM_DEMO_HOSTS (60), SM_DEMO_SEED (1),
# SM_BIN (bin), SM_GENFLEET (build/rel/tests/genfleet).
set -euo pipefail

die() { echo "demo.sh: $*" >&2; exit 1; }
say() { echo "demo.sh: $*" >&2; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
var=$repo/var
bin=${SM_BIN:-$repo/bin}
genfleet=${SM_GENFLEET:-$repo/build/rel/tests/genfleet}
tokf=$var/tokens

# True while pid $1 runs (kill -0 also succeeds for a zombie, which an exited
# child of ours stays until it is waited for).
alive() {
	local st
	[ -n "$1" ] && st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}

# True while pid $2 is a live sm-$1 (not a recycled pid).
is_svc() {
	alive "$2" && [ "$(cat "/proc/$2/comm" 2>/dev/null)" = "sm-$1" ]
}

# The pid of the running sm-$1 of the demo, or nothing.
svc_pid() {
	local pid=
	[ -r "$var/run/$1.pid" ] && pid=$(cat "$var/run/$1.pid")
	is_svc "$1" "$pid" && echo "$pid"
	return 0
}

port_busy() {
	(: <>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# psql on the demo database; SQL on stdin, so that -v variables are interpolated.
q() {
	"$repo/deploy/pg.sh" psql -XAtq -v ON_ERROR_STOP=1 "$@"
}

# Creates the ingest and analyst tokens, or keeps the saved ones while the
# database still knows them (it stores only their SHA-256).
ensure_tokens() {
	local role tok name ok
	SM_INGEST_TOKEN='' SM_ANALYST_TOKEN=''
	# shellcheck disable=SC1090
	[ -r "$tokf" ] && . "$tokf"
	for role in ingest analyst; do
		name=SM_${role^^}_TOKEN
		tok=${!name}
		ok=0
		if [ -n "$tok" ]; then
			ok=$(q -v tok="$tok" <<-'EOF'
			SELECT count(*) FROM tokens
			 WHERE token_hash = sha256(convert_to(:'tok', 'UTF8')) AND revoked_at IS NULL
			EOF
			)
		fi
		if [ "$ok" != 1 ]; then
			tok=$("$bin/sm-admin" --db "$db" token create --role "$role" --name "demo-$role") ||
				die "sm-admin token create --role $role failed"
			printf -v "$name" '%s' "$tok"
		fi
	done
	(umask 077 && cat >"$tokf.new" <<-EOF
	# stackmine demo tokens (deploy/demo.sh); load them with: . var/tokens
	SM_INGEST_TOKEN=$SM_INGEST_TOKEN
	SM_ANALYST_TOKEN=$SM_ANALYST_TOKEN
	EOF
	)
	mv "$tokf.new" "$tokf"
	# the guard agent reads its token from a file of its own
	(umask 077 && printf '%s\n' "$SM_INGEST_TOKEN" >"$var/ingest.token")
}

# svc_start NAME FIRST_PORT [ARGS...]: starts sm-NAME on 127.0.0.1 (FIRST_PORT or
# the next free one) unless it runs; sets svc_url. Log var/log/NAME.log.
svc_start() {
	local name=$1 base=$2 pid port i logpos pidf=$var/run/$1.pid portf=$var/run/$1.port logf=$var/log/$1.log
	shift 2
	pid=$(svc_pid "$name")
	if [ -n "$pid" ]; then
		if [[ "$(readlink "/proc/$pid/exe")" == *" (deleted)" ]]; then
			say "sm-$name (pid $pid) runs an older build; restarting it"
			svc_stop "$name"
		else
			svc_url=http://127.0.0.1:$(cat "$portf")
			say "sm-$name already running (pid $pid, $svc_url)"
			return 0
		fi
	fi
	port=$base
	while port_busy "$port"; do
		port=$(( port + 1 ))
		[ $port -lt $(( base + 100 )) ] || die "ports $base to $port are all in use"
	done
	[ "$port" = "$base" ] || say "port $base is in use, sm-$name uses $port"
	rm -f "$portf"
	touch "$logf"
	logpos=$(stat -c %s "$logf") # what this start adds to the log begins here
	echo "--- $(date -u +%FT%TZ) deploy/demo.sh start" >>"$logf"
	nohup "$bin/sm-$name" --db "$db" --listen "127.0.0.1:$port" --port-file "$portf" "$@" \
		</dev/null >>"$logf" 2>&1 &
	pid=$!
	echo "$pid" >"$pidf"
	for i in $(seq 1 300); do
		# alive, not is_svc: until nohup execs it, the child is not sm-NAME yet
		if ! alive "$pid"; then
			wait "$pid" 2>/dev/null && i=0 || i=$?
			rm -f "$pidf"
			tail -c +$((logpos + 1)) "$logf" | tail -n 30 >&2
			die "sm-$name exited with status $i while starting (log: var/log/$name.log, last lines above)"
		fi
		if [ -s "$portf" ] &&
		   curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(cat "$portf")/healthz" 2>/dev/null; then
			svc_url=http://127.0.0.1:$(cat "$portf")
			say "sm-$name running (pid $pid, $svc_url, log var/log/$name.log)"
			return 0
		fi
		sleep 0.1
	done
	tail -c +$((logpos + 1)) "$logf" | tail -n 30 >&2
	die "sm-$name (pid $pid) did not answer /healthz within 30 s (log: var/log/$name.log); 'make stop' stops it"
}

svc_stop() {
	local name=$1 pid i
	pid=$(svc_pid "$name")
	if [ -z "$pid" ]; then
		say "sm-$name is not running"
		rm -f "$var/run/$name.pid" "$var/run/$name.port"
		return 0
	fi
	kill -TERM "$pid"
	# sm-ingest drains the requests in flight for up to 30 s (--drain-timeout)
	for i in $(seq 1 450); do
		is_svc "$name" "$pid" || break
		sleep 0.1
	done
	if is_svc "$name" "$pid"; then
		tail -n 20 "$var/log/$name.log" >&2
		die "sm-$name (pid $pid) still runs 45 s after SIGTERM (log above); kill -KILL $pid if it must go"
	fi
	rm -f "$var/run/$name.pid" "$var/run/$name.port"
	say "sm-$name stopped (pid $pid)"
}

# Generates the demo fleet once and ships it unless the database has it already
# (the stream ids are fixed by the seed, so this is also what the server's
# idempotency would decide, only without sending 600k events again).
# Real captures of other profilers (../shared/data), pushed as a scraper would: a Go service's
# pprof CPU profile with thread labels and bcc's offwaketime (waits with their wakers) to
# POST /api/v1/import, the OpenTelemetry eBPF profiler's off-CPU capture through sm-agent import.
import_captures() {
	local data=$repo/../shared/data f out
	[ -d "$data/pprof" ] || { say "no ../shared/data: skipping the imports of other profilers' captures"; return 0; }
	for f in pprof/parca-profile-with-labels.pb.gz:parca-1:parca bcc/bcc-offwaketime_example.txt:db-7:kernel; do
		out=$(curl -s -H "Authorization: Bearer $SM_INGEST_TOKEN" --data-binary "@$data/${f%%:*}" \
			"$ingest_url/api/v1/import?host=$(cut -d: -f2 <<<"$f")&app=$(cut -d: -f3 <<<"$f")")
		say "POST /api/v1/import ${f%%:*}: $(sed -n 's/.*"format":"\([^"]*\)","accepted":\([0-9]*\),"duplicates":\([0-9]*\).*/\1, \2 accepted, \3 already stored/p' <<<"$out")"
	done
	SM_TOKEN=$SM_INGEST_TOKEN "$bin/sm-agent" import --host desktop --app otel-ebpf --url "$ingest_url" \
		--spool "$var/spool" "$data/otel/pyroscope-otel-ebpf-offcpu.pb.json" 2>&1 | sed 's/^/demo.sh: /' >&2 || true
}

ship_fleet() {
	local fleet=$var/demo/fleet.ndjson truth=$var/demo/truth.json first n
	local streams=${SM_DEMO_STREAMS:-300} events=${SM_DEMO_EVENTS:-2000} seed=${SM_DEMO_SEED:-1}
	local hosts=${SM_DEMO_HOSTS:-60} baseline=${SM_DEMO_BASELINE:-300}
	local stamp="streams=$streams baseline=$baseline events=$events hosts=$hosts seed=$seed regression-conf"
	if [ ! -s "$fleet" ] || [ "$(cat "$fleet.params" 2>/dev/null)" != "$stamp" ]; then
		say "generating a demo fleet: $streams slow units and $baseline normal ones (baseline) x $events events from $hosts hosts (seed $seed)"
		"$genfleet" --streams "$streams" --baseline "$baseline" --regression-conf --events "$events" --hosts "$hosts" --seed "$seed" \
			--out "$fleet.tmp" --truth "$truth" || die "genfleet failed"
		mv "$fleet.tmp" "$fleet"
		echo "$stamp" >"$fleet.params"
	fi
	# the last line: a fleet stored before it had baseline streams is shipped again (idempotent)
	first=$(tail -n 1 "$fleet" | grep -o '"stream_id": *"[^"]*"' | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
	[ -n "$first" ] || die "$fleet has no stream_id on its last line"
	n=$(q -v id="$first" <<<"SELECT count(*) FROM streams WHERE stream_id = :'id'::uuid")
	if [ "$n" = 1 ]; then
		say "the demo fleet is stored already"
		return 0
	fi
	say "shipping the demo fleet to $ingest_url"
	# the token through the environment: a command line is visible to every user
	SM_TOKEN=$SM_INGEST_TOKEN "$bin/sm-agent" ship --url "$ingest_url" --spool "$var/spool" "$fleet" ||
		die "sm-agent ship failed (sm-ingest log: var/log/ingest.log)"
}

# sm-miner run ... --quiet for the summary: the run's id on stdout; of stderr, what is not routine
# ("run N started", which the caller's line says already, and info lines such as "no debug file"
# for a build id), warnings and errors in full
mine() {
	{ "$bin/sm-miner" --db "$db" run "$@" --quiet 2>&1 >&3 3>&- |
		{ grep -v -e '^sm-miner: run [0-9]* started$' -e ' level=info ' >&2 || true; }; } 3>&1
}

# Mines each demo app's run stacks and wait stacks once (unless done runs exist),
# with the paper's threshold guideline (docs/clustering.md): to find bugs that
# hit 10% of the streams with a delay d each, C = 0.1 * d * the app's streams;
# d = 0.3 s of CPU, 0.15 s of waiting.
mine_fleet() {
	local app kind id d
	for app in checkout search; do
		for kind in run wait; do
			id=$(q -v app="$app" -v kind="$kind" <<-'EOF'
			SELECT max(id) FROM runs WHERE status = 'done' AND params->>'app' = :'app' AND params->>'kind' = :'kind'
			  AND params->'filter' = '{}' AND (coalesce((counts->>'baseline_streams')::bigint, 0) > 0) = EXISTS (SELECT 1 FROM streams WHERE role = 'baseline')
			EOF
			)
			if [ -z "$id" ]; then
				[ $kind = run ] && d=300000000 || d=150000000
				say "mining the $app $kind stacks (sm-miner run --app $app --kind $kind --threshold-guideline 0.1,$d)"
				id=$(mine --app "$app" --kind "$kind" --threshold-guideline "0.1,$d") ||
					die "sm-miner run failed"
			fi
			MINED="$MINED $app/$kind:$id"
		done
	done
	# checkout's run stacks per version, to compare 2.3.1 (before) with 2.4.0 (after)
	COMPARED=
	for v in 2.3.1 2.4.0; do
		id=$(q -v v="$v" <<-'EOF'
		SELECT max(id) FROM runs WHERE status = 'done' AND params->>'app' = 'checkout' AND params->>'kind' = 'run'
		  AND params->'filter'->>'version' = :'v'
		EOF
		)
		if [ -z "$id" ]; then
			say "mining checkout $v's run stacks, to compare the versions"
			id=$(mine --app checkout --kind run --version "$v" --threshold-guideline 0.1,300000000) || die "sm-miner run --version $v failed"
		fi
		COMPARED="$COMPARED $id"
	done
}

# A real server under the guard agent: redis-server trained on a normal load,
# then guarded while DEBUG SLEEP and a CPU-heavy script make two units slow; its
# streams are mined like any other app's. Done once (while no redis stream is stored).
guard_redis() {
	local port n id kind rpid prof=$var/profiles
	command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
		{ say "redis-server is not installed: skipping the guarded server ('make demo' installs it)"; return 0; }
	n=$(q <<<"SELECT count(*) FROM streams WHERE app = 'redis'")
	if [ "$n" = 0 ]; then
		port=7379
		while port_busy "$port"; do port=$((port + 1)); done
		redis_run() {
			"$bin/sm-guard" run --profile-dir "$prof" --log "$var/log/guard.log" "$@" -- redis-server --port "$port" \
				--bind 127.0.0.1 --save '' --appendonly no --dir "$var/run" --enable-debug-command yes \
				--logfile "$var/log/redis.log" &
			rpid=$!
			local i
			for i in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
			die "redis-server did not start (var/log/redis.log)"
		}
		say "training the guard agent on redis-server (sm-guard run --train; redis-benchmark)"
		redis_run --train
		redis-benchmark -p "$port" -t get,set -n 200000 -c 20 -q >/dev/null 2>&1
		redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
		wait "$rpid" || true
		say "guarding redis-server; a DEBUG SLEEP and a slow EVAL make two units slow"
		redis_run --url "$ingest_url" --token-file "$var/ingest.token" --app redis --label demo=guard
		redis-benchmark -p "$port" -t get,set -n 100000 -c 20 -q >/dev/null 2>&1
		for n in 1 2 3; do
			redis-cli -p "$port" debug sleep 0.2 >/dev/null
			redis-cli -p "$port" eval 'local i = 0 while i < 10000000 do i = i + 1 end return i' 0 >/dev/null
		done
		sleep 1
		redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
		wait "$rpid" || true
	fi
	for kind in wait run; do
		id=$(q -v kind="$kind" <<-'EOF'
		SELECT max(id) FROM runs WHERE status = 'done' AND params->>'app' = 'redis' AND params->>'kind' = :'kind'
		EOF
		)
		[ -n "$id" ] || id=$(mine --app redis --kind "$kind") ||
			die "sm-miner run --app redis failed"
		MINED="$MINED redis/$kind:$id"
	done
}

cmd_start() {
	local p
	for p in "$bin/sm-admin" "$bin/sm-ingest" "$bin/sm-agent" "$bin/sm-miner" "$bin/sm-web" "$bin/sm-guard" "$genfleet"; do
		[ -x "$p" ] || die "$p is missing: run 'make demo', which builds it first"
	done
	command -v curl >/dev/null || die "curl is missing (apt-get install curl; 'make demo' installs it)"
	mkdir -p "$var/run" "$var/log" "$var/demo"
	"$repo/deploy/pg.sh" start
	db=$("$repo/deploy/pg.sh" url)
	"$bin/sm-admin" --db "$db" migrate || die "sm-admin migrate failed"
	"$bin/sm-admin" --db "$db" maintain >/dev/null || die "sm-admin maintain failed"
	ensure_tokens
	svc_start ingest "${SM_INGEST_PORT:-8080}"
	ingest_url=$svc_url
	ship_fleet
	import_captures
	MINED=
	mine_fleet
	guard_redis
	svc_start web "${SM_WEB_PORT:-8081}"
	web_url=$svc_url
	print_guide
}

print_guide() {
	local p perf=$repo/../shared/data/perf/dspeyer-sched-61cb776.perf.txt
	cat <<-EOF

	stackmine demo is running
	  dashboard $web_url/  (log in with the analyst token: . var/tokens; echo \$SM_ANALYST_TOKEN)
	  ingest    $ingest_url  (pid $(svc_pid ingest), log var/log/ingest.log)
	  web       pid $(svc_pid web), log var/log/web.log; the REST API is under $web_url/api/v1/
	  database  deploy/pg.sh psql   (for --db: $db)
	  tokens    var/tokens          (load them: . var/tokens)
	  admin     bin/sm-admin --db "\$(deploy/pg.sh url)" token create --role admin --name me
	            (prints an admin token: log in with it to delete runs, manage tokens, alerts, schedules)

	Try:
	  curl -s $ingest_url/healthz
	  curl -s $ingest_url/metrics | grep -v '^#' | head -20
	  bin/sm-admin --db "\$(deploy/pg.sh url)" status

	  # one stream by hand (tests/integration/data/stream.json, with a fresh id)
	  . var/tokens
	  sed "s/@ID@/\$(cat /proc/sys/kernel/random/uuid)/" tests/integration/data/stream.json |
	    curl -s -H "Authorization: Bearer \$SM_INGEST_TOKEN" -H 'Content-Type: application/json' \\
	         --data-binary @- $ingest_url/api/v1/streams
	  # without a token: 401
	  curl -s -w ' %{http_code}\n' -H 'Content-Type: application/json' --data '{}' $ingest_url/api/v1/streams

	  # a real perf capture (scheduler waits with their wakers), converted and shipped
	  SM_TOKEN=\$SM_INGEST_TOKEN bin/sm-agent import --format perf --host laptop --app pingpong \\
	      --url $ingest_url --spool var/spool ../shared/data/perf/$(basename "$perf")
	  # other profilers' formats (docs/import.md): the format is told from the file
	  bin/sm-agent import -o - ../shared/data/pprof/pprof-java.contention | head -c 400; echo
	  curl -s -H "Authorization: Bearer \$SM_INGEST_TOKEN" --data-binary @../shared/data/pprof/parca-fgprof.pb.gz \\
	      "$ingest_url/api/v1/import?host=parca-2&app=parca&label=profiler:fgprof"

	  # what is stored: streams per app and version
	  deploy/pg.sh psql -c 'SELECT app, version, count(*) AS streams, count(DISTINCT host) AS hosts, sum(n_events) AS events, avg(symptom_end_ns - symptom_start_ns)::bigint / 1000000 AS avg_symptom_ms FROM streams GROUP BY 1, 2 ORDER BY 1, 2'
	  # the stack (outermost first) of the longest wait on the slowest stream's symptom thread
	  deploy/pg.sh psql -c "WITH s AS (SELECT * FROM streams ORDER BY symptom_end_ns - symptom_start_ns DESC LIMIT 1), e AS (SELECT e.* FROM events e, s WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND e.kind = 'w' ORDER BY e.dur_ns DESC LIMIT 1) SELECT o.i AS depth, f.name AS frame FROM e, stacks st, unnest(st.frame_ids) WITH ORDINALITY o(id, i), frames f WHERE st.id = e.stack_id AND f.id = o.id ORDER BY o.i"

	Mined, clustered and measured against the normal units (the top clusters of each run by excess cost,
	docs/analysis.md; the dashboard has them all):
	EOF
	for p in $MINED; do
		echo "  ${p%%:*}: run ${p#*:}   $web_url/runs/${p#*:}   (as pprof: $web_url/api/v1/runs/${p#*:}/profile)"
		"$bin/sm-miner" --db "$db" clusters "${p#*:}" --limit 4 | sed 's/^/    /'
		# where they happen, when a host, version or label value stands out (attribution, docs/analysis.md)
		for top in $(q -v run="${p#*:}" <<<"SELECT id FROM clusters WHERE run_id = :'run' ORDER BY coalesce(run_rank_excess_cost, run_rank_total_cost), id LIMIT 4"); do
			words=$(curl -s -H "Authorization: Bearer $SM_ANALYST_TOKEN" "$web_url/api/v1/clusters/$top/attribution?limit=1" |
				sed -n 's/.*"summary": *"\([^"]*\)".*/\1/p')
			case $words in ''|No\ *) ;; *) echo "    cluster $top: $words" ;; esac
		done
	done
	set -- $COMPARED
	if [ $# = 2 ]; then
		echo
		echo "  checkout 2.4.0 against 2.3.1 (sm-miner compare $1 $2; $web_url/compare?a=$1&b=$2):"
		"$bin/sm-miner" --db "$db" compare "$1" "$2" --limit 6 | sed 's/^/    /' | cut -c1-150
	fi
	cat <<-EOF

	  # scheduled runs and alert rules (docs/analysis.md, "Watching"), as an admin, e.g.:
	  #   curl -H "Authorization: Bearer ADMIN_TOKEN" -d '{"app": "checkout", "kind": "run", "every_s": 600,
	  #     "window_s": 86400}' $web_url/api/v1/schedules        (then see $web_url/alerts)

	  # guard a server yourself (docs/guard.md): learn its profile on a normal load, then guard it
	  bin/sm-guard run --train --profile-dir var/profiles -- redis-server --port 7400 --save '' &
	  redis-benchmark -p 7400 -q -n 100000 -t get,set; redis-cli -p 7400 shutdown
	  bin/sm-guard run --profile-dir var/profiles --url $ingest_url --token-file var/ingest.token \\
	      -- redis-server --port 7400 --save '' --enable-debug-command yes &
	  redis-cli -p 7400 debug sleep 0.5; redis-cli -p 7400 shutdown   # one slow unit, shipped
	  bin/sm-guard profile show var/profiles/*.json

	  # mine again with other parameters: the lock-convoy's holder CPU is found through the wait graph
	  bin/sm-miner --db "\$(deploy/pg.sh url)" run --app checkout --kind run --threshold-fraction 0.02
	  bin/sm-miner --db "\$(deploy/pg.sh url)" run --app search --aoi thread --exclude '*epoll*'

	  # the REST API (docs/api.md)
	  curl -s -H "Authorization: Bearer \$SM_ANALYST_TOKEN" $web_url/api/v1/runs | head -c 600

	Open the dashboard: $web_url/   (token: . var/tokens; echo \$SM_ANALYST_TOKEN)
	Stop everything: make stop
	EOF
}

cmd_stop() {
	local rc=0
	svc_stop web || rc=1
	svc_stop ingest || rc=1
	"$repo/deploy/pg.sh" stop || rc=1
	return $rc
}

cmd_status() {
	local pid name
	for name in ingest web; do
		pid=$(svc_pid "$name")
		if [ -n "$pid" ]; then
			echo "sm-$name: running, pid $pid, http://127.0.0.1:$(cat "$var/run/$name.port" 2>/dev/null)"
		else
			echo "sm-$name: not running"
		fi
	done
	"$repo/deploy/pg.sh" status | sed 's/^/postgresql: /' || true
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
	sed -n '6,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
