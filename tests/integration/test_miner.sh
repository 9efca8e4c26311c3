#!/usr/bin/env bash
# miner: sm-miner against streams stored by the real sm-ingest. Known streams
# give exact patterns (frames, cost, events, streams, supporting stacks) under
# each AOI mode, threshold and filter; runs are rows with a status and go
# through the queue to a worker; bad parameters are refused with the field.
. "$(dirname "$0")/../lib.sh"

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"
miner() { "$SM_BIN_DIR/sm-miner" "$@"; }

# stream ID APP VERSION LOCKSTACK: the symptom thread 1 waits on a lock held
# by thread 2, which computes meanwhile; thread 3 idles in epoll_wait; thread 1
# also waited before the symptom window.
stream() {
	printf '{"v":1,"stream_id":"%s","host":"h-%s","app":"%s","version":"%s",' "$1" "${1:0:4}" "$2" "$3"
	printf '"symptom":{"kind":"unit_violation","tid":1,"start_ns":1000,"end_ns":2000},'
	printf '"frames":["app!main","app!loop","app!handle","libc!lock_wait","app!worker","app!compute",'
	printf '"app!idle","libc!epoll_wait","app!loop2","app!before"],'
	printf '"stacks":[[0,1,2,3],[0,4,5],[0,6,7],[0,8,2,3],[0,9,3]],"events":['
	printf '{"kind":"wait","tid":1,"ts_ns":1000,"dur_ns":500,"stack":%d,"readier_tid":2},' "$4"
	printf '{"kind":"run","tid":2,"ts_ns":1100,"dur_ns":300,"stack":1},'
	printf '{"kind":"wait","tid":3,"ts_ns":1000,"dur_ns":900,"stack":2,"readier_tid":0},'
	printf '{"kind":"wait","tid":1,"ts_ns":0,"dur_ns":900,"stack":4,"readier_tid":0}]}\n'
}
newid() { cat /proc/sys/kernel/random/uuid; }
{
	for i in 1 2 3; do stream "$(newid)" lockapp 1 0; done
	for i in 1 2; do stream "$(newid)" lockapp 2 3; done
	stream "$(newid)" otherapp 1 0
} >"$T_TMP/fleet.ndjson"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" \
	-H 'Content-Type: application/x-ndjson' --data-binary "@$T_TMP/fleet.ndjson"
t_eq "fleet stored" "$HTTP_BODY" '{"accepted":6,"duplicates":0,"rejected":[]}'
stop_ingest

sid() { pg_q "SELECT id FROM stacks WHERE frame_ids = (SELECT array_agg(f.id ORDER BY o) FROM unnest(string_to_array(:'n', ',')) WITH ORDINALITY AS u(name, o) JOIN frames f ON f.name = u.name)" -v n="$1"; }
S1=$(sid 'app!main,app!loop,app!handle,libc!lock_wait')
S1B=$(sid 'app!main,app!loop2,app!handle,libc!lock_wait')
S2=$(sid 'app!main,app!worker,app!compute')
# patterns RUN: "kind rank cost events streams frames stacks" per line
patterns() {
	pg_q "SELECT p.kind, p.rank, p.cost_ns, p.events, p.streams,
		(SELECT string_agg(f.name, '>' ORDER BY u.o) FROM unnest(p.frame_ids) WITH ORDINALITY AS u(fid, o)
		 JOIN frames f ON f.id = u.fid), array_to_string(p.stack_ids, ',')
		FROM patterns p WHERE run_id = $1 ORDER BY p.kind DESC, p.rank" | tr '|' ' '
}
run() { # run ARGS...: mines now; sets RUN (the id) and RUN_RC
	RUN=$(miner run --quiet "$@" 2>"$T_TMP/miner.err")
	RUN_RC=$?
	[ "$RUN_RC" -eq 0 ] || { echo "sm-miner run $* failed:"; sed 's/^/  | /' "$T_TMP/miner.err"; }
}
counts() { pg_q "SELECT counts->>'streams', counts->>'aoi_events', counts->>'distinct_stacks', counts->>'patterns' FROM runs WHERE id = $1" | tr '|' ' '; }

# --- waitgraph (the default): the lock wait and the holder's CPU, not the idle thread ---
run --app lockapp --threshold-ns 1200
t_eq "waitgraph: exit status" "$RUN_RC" 0
t_eq "waitgraph: run done" "$(pg_q "SELECT status, error IS NULL FROM runs WHERE id = $RUN")" "done|t"
t_eq "waitgraph: counts" "$(counts "$RUN")" "5 10 3 2"
t_eq "waitgraph: patterns" "$(patterns "$RUN")" \
"w 1 1500 3 3 app!main>app!loop>app!handle>libc!lock_wait $S1
r 1 1500 5 5 app!main>app!worker>app!compute $S2"
t_eq "waitgraph: collapsed stacks stored per stream" \
	"$(pg_q "SELECT kind, stack_id, count(*), sum(cost_ns), sum(events) FROM run_stacks WHERE run_id = $RUN GROUP BY 1, 2 ORDER BY 1 DESC, 2" | tr '\n' ' ')" \
	"w|$S1|3|1500|3 w|$S1B|2|1000|2 r|$S2|5|1500|5 "
t_match "waitgraph: timings per phase" "$(pg_q "SELECT timings_ms::text FROM runs WHERE id = $RUN")" '"mine": [0-9]+'

FIRST_RUN=$RUN

# the paper's guideline: C = share x delay x the 5 streams selected = 0.5 x 480 x 5 = 1200
run --app lockapp --threshold-guideline 0.5,480
t_eq "guideline: the threshold" "$(pg_q "SELECT counts->>'threshold_run_ns', counts->>'threshold_wait_ns',
	params->'threshold_guideline' FROM runs WHERE id = $RUN")" '1200|1200|{"share": 0.5, "delay_ns": 480}'
t_eq "guideline: the patterns of C = 1200" "$(patterns "$RUN")" "$(patterns "$FIRST_RUN")"
miner run --app lockapp --threshold-guideline 0.5 2>"$T_TMP/e"
t_eq "guideline: bad option" "$?|$(cat "$T_TMP/e")" \
	"2|sm-miner: --threshold-guideline '0.5': SHARE,DELAY_NS (e.g. 0.1,300000000)
(see sm-miner --help)"

# --- a lower threshold: both lock paths are maximal ---
run --app lockapp --kind wait --threshold-ns 900
WAIT_RUN=$RUN
t_eq "lower threshold: patterns" "$(patterns "$RUN")" \
"w 1 1500 3 3 app!main>app!loop>app!handle>libc!lock_wait $S1
w 2 1000 2 2 app!main>app!loop2>app!handle>libc!lock_wait $S1B"
# the two lock paths are variants of one bug: one cluster, the common part without the callers
clusters() {
	pg_q "SELECT c.kind, c.total_cost_ns, c.streams, c.events, c.avg_cost_ns,
		c.rank_total_cost, c.rank_streams, c.rank_events, c.rank_avg_cost,
		(SELECT string_agg(f.name, '>' ORDER BY u.o) FROM unnest(c.common_frame_ids) WITH ORDINALITY AS u(fid, o)
		 JOIN frames f ON f.id = u.fid),
		(SELECT string_agg(p.rank::text, ',' ORDER BY p.rank) FROM patterns p WHERE p.id = ANY(c.members)),
		(SELECT rank FROM patterns WHERE id = c.medoid),
		(SELECT string_agg(a->>'ops', ',' ORDER BY o) FROM jsonb_array_elements(c.alignment) WITH ORDINALITY AS x(a, o))
		FROM clusters c WHERE c.run_id = $1 ORDER BY c.kind DESC, c.rank_total_cost" | tr '|' ' '
}
t_eq "lower threshold: one cluster of both variants" "$(clusters "$RUN")" \
	"w 2500 5 5 500 1 1 1 1 app!main>app!handle>libc!lock_wait 1,2 1 MMMM,MSMM"
t_eq "lower threshold: the run counts it" "$(pg_q "SELECT counts->>'clusters', timings_ms ? 'cluster' FROM runs WHERE id = $RUN")" "1|t"
LOCK_CLUSTER=$(pg_q "SELECT id FROM clusters WHERE run_id = $RUN")

# --- signatures from the common part, their coverage, export and import ---
cl() { "$SM_BIN_DIR/sm-cluster" "$@"; }
SIG1=$(cl signatures create --name lock-convoy --frame 'app!main' --frame 'app!handle' --frame 'libc!lock_wait' \
	--note 'stock ledger lock' --from-cluster "$LOCK_CLUSTER")
t_eq "signature created" "$(pg_q "SELECT name, array_to_string(frames, '>'), status, note, from_cluster FROM signatures WHERE id = $SIG1")" \
	"lock-convoy|app!main>app!handle>libc!lock_wait|open|stock ledger lock|$LOCK_CLUSTER"
# coverage is per kind: the first run mined both, its wait events (2500 ns) come first
t_eq "coverage of one signature (the lock waits of the first run)" "$(cl coverage "$FIRST_RUN")" \
	"coverage 1.0000  covered 2500 ns of 2500 ns (wait events)
  $SIG1	2500	lock-convoy"
SIG2=$(cl signatures create --name holder-cpu --frame 'app!compute' --status known)
t_eq "coverage of all signatures, wait events" "$(cl coverage "$FIRST_RUN")" \
	"coverage 1.0000  covered 2500 ns of 2500 ns (wait events)
  $SIG1	2500	lock-convoy
  $SIG2	0	holder-cpu"
t_eq "coverage of all signatures, run events" "$(cl coverage --kind run "$FIRST_RUN")" \
	"coverage 1.0000  covered 1500 ns of 1500 ns (run events)
  $SIG1	0	lock-convoy
  $SIG2	1500	holder-cpu"
t_eq "coverage of the chosen ones" "$(cl coverage --signatures "$SIG2" --kind run "$FIRST_RUN")" \
	"coverage 1.0000  covered 1500 ns of 1500 ns (run events)
  $SIG2	1500	holder-cpu"
# a wait-only run keeps no run events in its mining database, and has no run coverage
t_eq "a wait-only run stores only wait stacks" \
	"$(pg_q "SELECT string_agg(DISTINCT kind::text, ',') FROM run_stacks WHERE run_id = $WAIT_RUN")" "w"
cl coverage --kind run "$WAIT_RUN" >/dev/null 2>"$T_TMP/e"
t_eq "run coverage of a wait-only run" "$?|$(cat "$T_TMP/e")" "1|sm-cluster: kind: run $WAIT_RUN mined wait events only"
cl coverage --kind cpu "$WAIT_RUN" >/dev/null 2>"$T_TMP/e"
t_eq "coverage: a bad kind" "$?|$(head -n 1 "$T_TMP/e")" "2|sm-cluster: --kind 'cpu': wait or run"
# triage over the first run's wait events (5 streams; each reveals lock-convoy): one stream is enough
t_eq "triage" "$(cl triage "$FIRST_RUN" | sed -n '1,2p;12p')" \
"5 streams, coverage of all signatures 1.0000 (wait events)
coverage	random	greedy-total	greedy-max	signature
1.0000	1	1	1	1"
t_eq "triage of run events" "$(cl triage --kind run "$FIRST_RUN" | sed -n '1p;12p')" \
"5 streams, coverage of all signatures 1.0000 (run events)
1.0000	1	1	1	1"
cl signatures update "$SIG1" --status known --note 'fixed in 1.3'
t_eq "signature updated" "$(pg_q "SELECT status, note FROM signatures WHERE id = $SIG1")" "known|fixed in 1.3"
cl signatures update "$SIG1" --status open --note 'stock ledger lock'
cl signatures update 99999 --status fixed 2>"$T_TMP/e"
t_eq "update of a missing signature" "$?|$(cat "$T_TMP/e")" "1|sm-cluster: signature 99999: no such signature"
cl signatures create --name lock-convoy --frame 'x!y' >/dev/null 2>"$T_TMP/e"
t_eq "signature names are unique" "$?|$(cat "$T_TMP/e")" "1|sm-cluster: name: a signature named 'lock-convoy' exists already"
cl signatures create --name s --frame 'x!y' --status done >/dev/null 2>"$T_TMP/e"
t_eq "signature status checked" "$?|$(cat "$T_TMP/e")" "1|sm-cluster: status: must be open, known or fixed"
# --- problems: the first run's lock waits (3 streams) and the holder's CPU (all 5): one problem ---
# (the wait cluster has all of its cost in the run cluster's streams, the run one 900 of 1500 in
# the wait one's); measured over both clusters' events, titled, its clusters with titles
t_eq "problems: the lock wait and the holder's CPU are one problem" \
	"$(pg_q "SELECT p.rank, p.total_cost_ns, p.streams, p.events, p.avg_cost_ns,
		(SELECT string_agg(c.kind::text || ':' || c.total_cost_ns, ',' ORDER BY o) FROM unnest(p.members) WITH ORDINALITY u(cid, o) JOIN clusters c ON c.id = u.cid),
		(SELECT string_agg(f.name, '>' ORDER BY o) FROM unnest(p.title_frame_ids) WITH ORDINALITY u(fid, o) JOIN frames f ON f.id = u.fid),
		(SELECT count(*) FROM clusters c WHERE c.run_id = p.run_id AND c.problem_id = p.id)
		FROM problems p WHERE p.run_id = $FIRST_RUN")" \
	"1|3000|5|8|375|w:1500,r:1500|app!loop>libc!lock_wait|2"
t_eq "problems: the clusters' titles" "$(pg_q "SELECT c.kind, (SELECT string_agg(f.name, '>' ORDER BY o) FROM unnest(c.title_frame_ids) WITH ORDINALITY u(fid, o) JOIN frames f ON f.id = u.fid) FROM clusters c WHERE c.run_id = $FIRST_RUN ORDER BY c.kind DESC" | tr '\n' ' ')" \
	"w|app!loop>libc!lock_wait r|app!worker>app!compute "
PROB=$(pg_q "SELECT id FROM problems WHERE run_id = $FIRST_RUN")
t_eq "problem signature: one per cluster" "$(cl signatures create --name convoy --from-problem "$PROB" --status known)" 2
t_eq "problem signature: the clusters' common parts, costliest first" \
	"$(pg_q "SELECT name, array_to_string(frames, '>'), status, from_run = $FIRST_RUN FROM signatures WHERE name LIKE 'convoy%' ORDER BY id" | tr '\n' ' ')" \
	"convoy|app!main>app!loop>app!handle>libc!lock_wait|known|t convoy #2|app!main>app!worker>app!compute|known|t "
# (the second lock path, 1000 ns through app!loop2, is outside the wait cluster: outside its signature)
t_eq "problem signature: its coverage of the run's waits" "$(cl coverage --signatures "$(pg_q "SELECT string_agg(id::text, ',') FROM signatures WHERE name LIKE 'convoy%'")" "$FIRST_RUN" | head -n 1)" \
	"coverage 0.6000  covered 1500 ns of 2500 ns (wait events)"
cl signatures create --name convoy --from-problem "$PROB" >/dev/null 2>"$T_TMP/e"
t_eq "problem signature: names taken, nothing created" "$?|$(cat "$T_TMP/e")|$(pg_q "SELECT count(*) FROM signatures WHERE name LIKE 'convoy%'")" \
	"1|sm-cluster: name: a signature named 'convoy' (or 'convoy #N') exists already|2"
cl signatures create --name x --from-problem 999999 >/dev/null 2>"$T_TMP/e"
t_eq "problem signature: a missing problem" "$?|$(cat "$T_TMP/e")" "1|sm-cluster: from_problem: no problem 999999"
pg_q "DELETE FROM signatures WHERE name LIKE 'convoy%'"
cl coverage 999999 >/dev/null 2>"$T_TMP/e"
t_eq "coverage of a missing run" "$?|$(cat "$T_TMP/e")" "1|sm-cluster: run 999999: no such run"
cl signatures export "$T_TMP/sigs.json"
t_eq "export" "$(cat "$T_TMP/sigs.json")" \
	'{"version": 1, "signatures": [{"name": "holder-cpu", "note": "", "frames": ["app!compute"], "status": "known"}, {"name": "lock-convoy", "note": "stock ledger lock", "frames": ["app!main", "app!handle", "libc!lock_wait"], "status": "open"}]}'
pg_q "CREATE DATABASE \"${PGDATABASE}_sigs\"" -d postgres
t_cleanup "pg_q 'DROP DATABASE IF EXISTS \"${PGDATABASE}_sigs\" WITH (FORCE)' -d postgres"
PGDATABASE=${PGDATABASE}_sigs sm_admin migrate >/dev/null
t_eq "import into another database" "$(PGDATABASE=${PGDATABASE}_sigs cl signatures import "$T_TMP/sigs.json")" "2 signatures imported"
t_eq "export of the import is unchanged" "$(PGDATABASE=${PGDATABASE}_sigs cl signatures export -)" "$(cat "$T_TMP/sigs.json")"
printf '{"signatures": [{"name": "x", "frames": []}]}' >"$T_TMP/bad.json"
PGDATABASE=${PGDATABASE}_sigs cl signatures import "$T_TMP/bad.json" >/dev/null 2>"$T_TMP/e"
t_eq "import names the bad field" "$?|$(cat "$T_TMP/e")" "1|sm-cluster: $T_TMP/bad.json: signatures[0].frames: an array of 1 to 512 frames"

run --app lockapp --kind wait --threshold-ns 900 --cut 0.05
t_eq "a tight cut keeps the variants apart" "$(clusters "$RUN" | cut -d' ' -f1-11)" \
"w 1500 3 3 500 1 1 1 1 app!main>app!loop>app!handle>libc!lock_wait 1
w 1000 2 2 500 2 2 2 2 app!main>app!loop2>app!handle>libc!lock_wait 2"

# and a threshold between: only the common part is costly enough past the first
run --app lockapp --kind wait --threshold-ns 1600
t_eq "threshold above each path: their common part" "$(patterns "$RUN")" \
"w 1 2500 5 5 app!main>app!handle>libc!lock_wait $S1,$S1B"

# --- relative threshold ---
run --app lockapp --kind wait --threshold-fraction 0.5
t_eq "fraction: threshold recorded" "$(pg_q "SELECT counts->>'threshold_wait_ns' FROM runs WHERE id = $RUN")" 1250
t_eq "fraction: patterns" "$(patterns "$RUN" | cut -d' ' -f1-5)" "w 1 1500 3 3"

# --- other AOI modes ---
run --app lockapp --aoi thread --threshold-ns 1
t_eq "thread: only the symptom thread's events in the window" "$(counts "$RUN")" "5 5 2 2"
t_eq "thread: no run pattern" "$(pg_q "SELECT count(*) FROM patterns WHERE run_id = $RUN AND kind = 'r'")" 0
run --app lockapp --aoi stream --threshold-ns 1
t_eq "stream: every event" "$(counts "$RUN" | cut -d' ' -f1-3)" "5 20 5"
run --app lockapp --aoi critical --threshold-ns 1
t_eq "critical: done" "$(pg_q "SELECT status FROM runs WHERE id = $RUN")" done

# --- content filters ---
run --app lockapp --aoi stream --exclude '*epoll*' --threshold-ns 1
t_eq "exclude: the idle waits are gone" "$(counts "$RUN" | cut -d' ' -f1-3)" "5 15 4"
run --app lockapp --include 'libc!lock*' --kind wait --threshold-ns 1200
t_eq "include: only lock waits" "$(patterns "$RUN" | cut -d' ' -f1-6)" \
	"w 1 1500 3 3 app!main>app!loop>app!handle>libc!lock_wait"

# --- stream filters ---
run --app lockapp --version 1 --kind wait --threshold-ns 1
t_eq "version filter" "$(counts "$RUN" | cut -d' ' -f1)" 3
run --app otherapp --threshold-ns 1
t_eq "app filter" "$(counts "$RUN" | cut -d' ' -f1)" 1
run --app lockapp --since 2000-01-01T00:00:00Z --until 2000-01-02T00:00:00Z --threshold-ns 1
t_eq "time filter: nothing then" "$(counts "$RUN")" "0 0 0 0"
t_eq "time filter: still done" "$(pg_q "SELECT status FROM runs WHERE id = $RUN")" done
EMPTY=$RUN

# --- the same parameters as JSON ---
printf '{"app": "lockapp", "kind": "wait", "threshold_ns": 900, "filter": {"version": "2"}}' >"$T_TMP/p.json"
run --params "$T_TMP/p.json"
t_eq "--params: patterns" "$(patterns "$RUN" | cut -d' ' -f1-5)" "w 1 1000 2 2"
t_eq "--params: stored with defaults" "$(pg_q "SELECT params::text FROM runs WHERE id = $RUN")" \
	'{"aoi": "waitgraph", "app": "lockapp", "cut": 0.5, "kind": "wait", "filter": {"version": "2"}, "exclude": [], "include": [], "linkage": "average", "baseline": true, "bootstrap": 200, "threshold_ns": 900}'

# --- the queue and a worker ---
QID=$(miner run --queue --app lockapp --threshold-ns 1200 2>/dev/null)
t_eq "queued" "$(pg_q "SELECT status FROM runs WHERE id = $QID")" queued
miner worker --once --quiet 2>"$T_TMP/worker.err"
t_eq "worker exits 0" "$?" 0
t_eq "worker did the run" "$(pg_q "SELECT status, worker IS NOT NULL, attempts FROM runs WHERE id = $QID")" "done|t|1"
t_eq "worker: same result as a direct run" "$(patterns "$QID" | cut -d' ' -f1-5)" "w 1 1500 3 3
r 1 1500 5 5"
t_match "worker logs the run" "$(cat "$T_TMP/worker.err")" "msg=\"run done\" run=$QID"
# a run whose worker died is taken again
pg_q "UPDATE runs SET status = 'running', heartbeat_at = now() - interval '5 minutes', attempts = 1 WHERE id = $QID" >/dev/null
miner worker --once --quiet 2>/dev/null
t_eq "abandoned run taken again" "$(pg_q "SELECT status, attempts FROM runs WHERE id = $QID")" "done|2"
pg_q "UPDATE runs SET status = 'running', heartbeat_at = now() - interval '5 minutes', attempts = 3 WHERE id = $QID" >/dev/null
miner worker --once --quiet 2>/dev/null
t_eq "a run that killed three workers fails" "$(pg_q "SELECT status, error FROM runs WHERE id = $QID")" \
	"failed|abandoned: its worker stopped 3 times while mining it"

# two workers share a queue: every run mined exactly once
ids=
for i in 1 2 3 4 5 6; do ids="$ids $(miner run --queue --app lockapp --threshold-ns $((1000 + i)) 2>/dev/null)"; done
miner worker --once --quiet 2>"$T_TMP/w1.err" &
w1=$!
miner worker --once --quiet 2>"$T_TMP/w2.err" &
w2=$!
wait $w1 $w2
in_list=$(echo $ids | tr ' ' ',')
t_eq "two workers: every queued run done, each taken once" \
	"$(pg_q "SELECT count(*) FILTER (WHERE status = 'done' AND attempts = 1) FROM runs WHERE id IN ($in_list)")" 6
t_eq "two workers: the logs name each run once" \
	"$(cat "$T_TMP/w1.err" "$T_TMP/w2.err" | grep -o 'msg="run taken" run=[0-9]*' | sort | uniq -d | wc -l)" 0
t_eq "two workers: together they took all six" \
	"$(cat "$T_TMP/w1.err" "$T_TMP/w2.err" | grep -c 'msg="run taken"')" 6

# --- show ---
out=$(miner show "$QID" --limit 1)
t_match "show: status line" "$out" "^run $QID: failed"
run --app lockapp --threshold-ns 1200
t_match "show: patterns with frame names" "$(miner show "$RUN")" "wait #1  cost 1.5 µs  events 3  streams 3
    app!main > app!loop > app!handle > libc!lock_wait"
t_match "clusters: the costliest with their titles, numbers as people read them" "$(miner clusters "$RUN" --limit 2)" \
	"^#1  wait  total 1.5 µs \(#1\)  3 streams  cluster [0-9]+
    loop › lock_wait
#2  run   total 1.5 µs \(#2\)  5 streams  cluster [0-9]+
    worker › compute$"
t_eq "clusters: --limit" "$(miner clusters "$RUN" --limit 1 | wc -l)" 2
miner clusters 999999 >"$T_TMP/o" 2>&1
t_eq "clusters of a missing run" "$?|$(cat "$T_TMP/o")" "1|sm-miner: run 999999: no such run"
t_eq "clusters of a run without any" "$(miner clusters "$EMPTY")" "run $EMPTY: done, no clusters"

# --- bad parameters ---
miner run --app lockapp --aoi bogus >/dev/null 2>"$T_TMP/e"
t_eq "bad aoi: usage error" "$?|$(head -n 1 "$T_TMP/e")" "2|sm-miner: aoi: must be waitgraph, thread, critical or stream"
miner run --kind wait >/dev/null 2>"$T_TMP/e"
t_eq "no app" "$?|$(head -n 1 "$T_TMP/e")" "2|sm-miner: app: required"
printf '{"app": "x", "treshold_ns": 5}' >"$T_TMP/bad.json"
miner run --params "$T_TMP/bad.json" >/dev/null 2>"$T_TMP/e"
t_eq "unknown field in --params" "$?|$(head -n 1 "$T_TMP/e")" "2|sm-miner: --params: treshold_ns: unknown field"
printf '{"app": "x", "threshold_ns": 5, "threshold_fraction": 0.1}' >"$T_TMP/bad.json"
miner run --params "$T_TMP/bad.json" >/dev/null 2>"$T_TMP/e"
t_eq "both thresholds" "$?|$(head -n 1 "$T_TMP/e")" "2|sm-miner: --params: threshold_ns: give one of threshold_ns, threshold_fraction and threshold_guideline"
miner run --app x --threshold-fraction 2 >/dev/null 2>"$T_TMP/e"
t_eq "fraction out of range" "$?|$(head -n 1 "$T_TMP/e")" "2|sm-miner: threshold_fraction: must be more than 0 and at most 1"
miner show 999999 >/dev/null 2>"$T_TMP/e"
t_eq "show of a missing run" "$?|$(cat "$T_TMP/e")" "1|sm-miner: run 999999: no such run"

# --- sm-miner spmf: the BIDE paper's database (A=1 B=2 C=3: CAABC ABCB CABC ABBCA) ---
printf '3 -1 1 -1 1 -1 2 -1 3 -1 -2\n1 -1 2 -1 3 -1 2 -1 -2\n3 -1 1 -1 2 -1 3 -1 -2\n1 -1 2 -1 2 -1 3 -1 1 -1 -2\n' >"$T_TMP/bide.txt"
miner spmf --closed --minsup 2 "$T_TMP/bide.txt" "$T_TMP/closed.txt" 2>/dev/null
t_eq "spmf closed: exit status" "$?" 0
t_eq "spmf closed: the paper's closed patterns" "$(sort "$T_TMP/closed.txt" | tr '\n' ';')" \
	"1 1 #SUP: 2;1 2 2 #SUP: 2;1 2 3 #SUP: 4;3 1 #SUP: 3;3 1 2 3 #SUP: 2;3 2 #SUP: 3;"
miner spmf --maximal --minsup-rel 0.5 "$T_TMP/bide.txt" - >"$T_TMP/maximal.txt" 2>/dev/null
t_eq "spmf maximal: three patterns" "$(sort "$T_TMP/maximal.txt" | tr '\n' ';')" \
	"1 1 #SUP: 2;1 2 2 #SUP: 2;3 1 2 3 #SUP: 2;"
miner spmf --closed --minsup 2 "$SM_DATA/spmf/contextPrefixSpan.txt" - >/dev/null 2>"$T_TMP/e"
t_eq "spmf refuses itemsets of several items" "$?|$(cat "$T_TMP/e")" \
	"1|sm-miner: $SM_DATA/spmf/contextPrefixSpan.txt:1: itemset with 3 items; only one item per itemset is supported"
miner spmf --closed "$T_TMP/bide.txt" - >/dev/null 2>"$T_TMP/e"
t_eq "spmf needs a minimum support" "$?|$(head -n 1 "$T_TMP/e")" "2|sm-miner: spmf: give --minsup N or --minsup-rel F (one of them)"

# --- real scheduler data: the wait graph reaches the waker ---
start_ingest || t_bail "sm-ingest starts again"
"$SM_BIN_DIR/sm-agent" import --format perf --host laptop --app pingpong --symptom-comm pass \
	--url "$INGEST_URL" --token "$TOKEN" --spool "$T_TMP/spool" \
	"$SM_DATA/perf/dspeyer-sched-61cb776.perf.txt" 2>/dev/null
t_eq "real capture shipped" "$?" 0
stop_ingest
run --app pingpong --aoi thread --threshold-fraction 0.01
THREAD_RUN=$RUN
run --app pingpong --threshold-fraction 0.01
t_eq "real capture: mined" "$(pg_q "SELECT status FROM runs WHERE id = $RUN")" done
t_eq "real capture: the wait graph holds more than the symptom thread's events" \
	"$(pg_q "SELECT (SELECT (counts->>'aoi_events')::int FROM runs WHERE id = $RUN) > (SELECT (counts->>'aoi_events')::int FROM runs WHERE id = $THREAD_RUN)")" t
t_eq "real capture: costly patterns of both kinds" \
	"$(pg_q "SELECT count(DISTINCT kind) FROM patterns WHERE run_id = $RUN")" 2
t_eq "real capture: ranks follow cost" "$(pg_q "SELECT bool_and(ok) FROM (SELECT cost_ns >= coalesce(lead(cost_ns)
	OVER (PARTITION BY kind ORDER BY rank), 0) AS ok FROM patterns WHERE run_id = $RUN) s")" t

# --- triage's greedy-max order: each stream's longest wait among its run's stacks, unpacked from
# the stored chunks (clusterer/signature.c). tri2, stored first (the lower id), has the longer
# symptom and, outside what triage weighs, a run event on its wait's stack and a wait after its
# window, each longer than anything of tri1; tri1's one wait (1,000 ns, signature tri-a) is its
# run's longest.
# tri-a covers 1,000 of 1,100 ns: opening tri1 first reaches half of the coverage with one stream;
# tri2 first (by symptom, or by a longest event read wrong) needs both.
tri() { # tri ID START END EVENTS...
	local id=$1 start=$2 end=$3
	shift 3
	printf '{"v":1,"stream_id":"%s","host":"tri","app":"triapp","symptom":{"kind":"unit_violation","tid":1,"start_ns":%s,"end_ns":%s},' \
		"$id" "$start" "$end"
	printf '"frames":["tri!main","tri!a_wait","tri!b_wait","tri!spin","tri!after"],'
	printf '"stacks":[[0,1],[0,2],[0,3],[0,4]],"events":[%s]}\n' "$(IFS=,; echo "$*")"
}
T2=$(newid) T1=$(newid)
start_ingest || t_bail "sm-ingest starts for triage"
for body in "$(tri "$T2" 1000 201000 '{"kind":"wait","tid":1,"ts_ns":1000,"dur_ns":100,"stack":1,"readier_tid":0}' \
		'{"kind":"run","tid":1,"ts_ns":1200,"dur_ns":4000000,"stack":1}' \
		'{"kind":"wait","tid":1,"ts_ns":300000,"dur_ns":5000000,"stack":3,"readier_tid":0}')" \
	"$(tri "$T1" 1000 2000 '{"kind":"wait","tid":1,"ts_ns":1000,"dur_ns":1000,"stack":0,"readier_tid":0}')"; do
	http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		--data-binary "$body"
	t_eq "triage streams stored" "$HTTP_BODY" '{"accepted":1,"duplicates":0,"rejected":[]}'
done
stop_ingest
run --app triapp --kind both --threshold-ns 1
t_eq "triage run: its wait rows are the two waits in the windows" \
	"$(pg_q "SELECT string_agg(s.stream_id || ':' || rs.cost_ns, ' ' ORDER BY s.id) FROM run_stacks rs
		JOIN streams s ON s.id = rs.stream_ref WHERE rs.run_id = $RUN AND rs.kind = 'w'")" "$T2:100 $T1:1000"
cl signatures create --name tri-a --frame 'tri!a_wait' >/dev/null
cl signatures create --name tri-b --frame 'tri!b_wait' >/dev/null
t_eq "triage: greedy-max opens the stream of the longest wait first, greedy-total the longest symptom" \
	"$(cl triage "$RUN" | awk 'NR == 2 || $1 == "0.5000"')" \
"coverage	random	greedy-total	greedy-max	signature
0.5000	$(cl triage "$RUN" | awk '$1 == "0.5000" { print $2 }')	2	1	1"

# --- the phase: the heartbeat writes runs.progress (phase and counters) while the run is mined,
# the end writes "done"; a trigger of the test's own records every phase the runs table held ---
pg_q "CREATE TABLE test_phases (n serial, run_id bigint, status text, phase text, progress jsonb);
	CREATE FUNCTION test_phase_log() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
		INSERT INTO test_phases (run_id, status, phase, progress) VALUES (NEW.id, NEW.status, NEW.progress->>'phase', NEW.progress);
		RETURN NEW; END \$\$;
	CREATE TRIGGER test_phase_log AFTER UPDATE OF progress ON runs FOR EACH ROW EXECUTE FUNCTION test_phase_log()" >/dev/null
run --app pingpong --threshold-fraction 0.01
t_eq "phase: the run is done" "$(pg_q "SELECT status, progress->>'phase' FROM runs WHERE id = $RUN")" "done|done"
t_eq "phase: the heartbeat wrote a phase, with its counters, while it ran" \
	"$(pg_q "SELECT count(*) > 0, bool_and(phase IS NOT NULL AND phase <> 'done' AND progress ? 'streams_read' AND progress ? 'streams')
		FROM test_phases WHERE run_id = $RUN AND status = 'running'")" "t|t"
# (which phases a 1 s heartbeat catches depends on the machine's speed: only known ones, in order)
t_eq "phase: only the run's phases, in order, the last done" \
	"$(pg_q "SELECT bool_and(k > 0), bool_and(k >= coalesce(prev, 0)), (SELECT phase FROM test_phases WHERE run_id = $RUN ORDER BY n DESC LIMIT 1)
		FROM (SELECT k, lag(k) OVER (ORDER BY n) AS prev FROM (SELECT n, array_position(ARRAY['selecting streams',
		'reading events and extracting the AOI', 'collapsing stacks', 'mining', 'clustering', 'storing', 'done'], phase) AS k
		FROM test_phases WHERE run_id = $RUN AND phase IS NOT NULL) a) b")" "t|t|done"
pg_q "DROP TRIGGER test_phase_log ON runs; DROP FUNCTION test_phase_log(); DROP TABLE test_phases" >/dev/null

t_done
