#!/usr/bin/env bash
# what the cost depends on (docs/analysis.md): streams stored by the real sm-ingest, mined by
# sm-miner, then the attribution API's "numeric" and "modes" and the cluster page's sentences,
# exactly:
#   - app lin: each stream's cost is 2 ms + 0.8 ms per unit.calls (1 to 40 calls): a slope,
#     R^2 1; an identifier and the unit's own duration skipped, a constant label fitted in vain;
#   - app bi: 80 % of the streams near 3 ms, 20 % near 45 ms, the slow ones those with
#     body.size above 3200: two modes and a step; unit.calls unrelated: not reported;
#   - app none: a cost of one mode (5 ms give or take 4 %) and an unrelated numeric label.
. "$(dirname "$0")/../lib.sh"

py=/usr/bin/python3
[ -x "$py" ] || py=python3

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
AN=$(mk_token analyst 2>/dev/null)
[ -n "$TOKEN" ] && [ -n "$AN" ] || t_bail "tokens"
start_ingest || t_bail "sm-ingest starts"

"$py" "$(dirname "$0")/costmodel_streams.py" "$T_TMP/streams.ndjson"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/x-ndjson" \
	--data-binary @"$T_TMP/streams.ndjson"
t_eq "the streams stored" "$HTTP_STATUS $(printf '%s' "$HTTP_BODY" | "$py" -c 'import json, sys; j = json.load(sys.stdin); print(j["accepted"], j["rejected"])')" \
	"200 115 []"
stop_ingest

declare -A CL
for app in lin bi none; do
	run=$("$SM_BIN_DIR/sm-miner" run --quiet --app "$app" --kind run --aoi thread --threshold-ns 10000000 2>"$T_TMP/miner.err") ||
		t_bail "sm-miner run --app $app" "$(cat "$T_TMP/miner.err")"
	CL[$app]=$(pg_q "SELECT id FROM clusters WHERE run_id = $run ORDER BY rank_total_cost LIMIT 1")
	t_eq "$app: one cluster over every stream" "$(pg_q "SELECT count(*), max(streams) FROM clusters WHERE run_id = $run")" \
		"1|$(case $app in lin) echo 40 ;; bi) echo 50 ;; none) echo 25 ;; esac)"
done
start_web || t_bail "sm-web starts"

# j EXPR: EXPR (Python, j = the last answer's JSON) printed compactly
j() {
	"$py" -c 'import json, sys
j = json.loads(sys.stdin.read())
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))' "$1" <<<"$HTTP_BODY"
}

# ---- lin: a slope ----
http GET "$WEB_URL/api/v1/clusters/${CL[lin]}/attribution" -H "Authorization: Bearer $AN"
t_eq "lin: the attribution's fields as before, numeric ones added" "$HTTP_STATUS $(j 'list(j)')" \
	'200 ["cluster_id","run_streams","cluster_streams","baseline_streams","cost_ns","tested","keys_skipped","summary","values","numeric","numeric_tested","numeric_keys_skipped","modes"]'
t_eq "lin: unit.calls, a line; the id and the unit's duration skipped, the constant tested" \
	"$(j '[j["numeric_tested"], j["numeric_keys_skipped"], [[v["key"], v["form"], v["streams"], v["distinct"], round(v["slope_ns"], 3), round(v["intercept_ns"], 3), round(v["r2"], 9), round(v["r2_holdout"], 9), round(v["r2_linear"], 9)] for v in j["numeric"][:1]]]')" \
	'[3,2,[["unit.calls","linear",40,40,800000.0,2000000.0,1,1,1]]]'
t_eq "lin: a label numeric on 39 of 40 streams fitted on those, after the exact one" \
	"$(j '[[v["key"], v["form"], v["streams"], 0.9 < v["r2"] < 1] for v in j["numeric"][1:]]')" \
	'[["batch.size","linear",39,true]]'
t_eq "lin: its words" "$(j 'j["numeric"][1]["summary"]')" "cost grows with batch.size: 380 µs per unit, R^2 0.97"  # statistics.linear_regression: 380101 ns, r^2 0.9685
t_eq "lin: in words" "$(j 'j["numeric"][0]["summary"]')" "cost grows with unit.calls: 800 µs per call, R^2 1.00"
t_eq "lin: the tree beside it, its steps bounded by null at the ends" \
	"$(j '[(v := j["numeric"][0])["r2_tree"] < v["r2_linear"], v["steps"][0]["above"], v["steps"][-1]["up_to"], sum(s["streams"] for s in v["steps"])]')" \
	'[true,null,null,40]'
t_eq "lin: one mode" "$(j '[j["modes"]["streams"], j["modes"]["k"], j["modes"]["summary"], j["modes"]["modes"], len(j["modes"]["bic"])]')" \
	'[40,1,null,[],3]'
http GET "$WEB_URL/clusters/${CL[lin]}" -H "Authorization: Bearer $AN"
t_match "lin: the cluster page says it" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<section class="costmodel"><h2>What the cost depends on</h2><ul class="lead"><li>Cost grows with unit\.calls: 800 µs per call, R\^2 1\.00\. <span class="hint">\(40 streams, R\^2 1\.00 on held-out streams\)</span></li><li>Cost grows with batch\.size: 380 µs per unit, R\^2 0\.[0-9]{2}\. <span class="hint">\(39 streams, R\^2 0\.[0-9]{2} on held-out streams\)</span></li></ul><p class="hint">Over 40 of the cluster'"'"'s streams: '

# ---- bi: two modes, and the size that tells them apart ----
http GET "$WEB_URL/api/v1/clusters/${CL[bi]}/attribution" -H "Authorization: Bearer $AN"
t_eq "bi: two modes, their centres and weights" \
	"$(j '[(m := j["modes"])["streams"], m["k"], [[round(x["cost_ns"] / 1e6, 1), round(x["weight"], 6)] for x in m["modes"]], m["bic"][1] < m["bic"][0] - 10]')" \
	'[50,2,[[3.0,0.8],[45.0,0.2]],true]'
t_eq "bi: in words" "$(j 'j["modes"]["summary"]')" "two modes: 3 ms (80 %) and 45 ms (20 %)"
t_eq "bi: body.size steps, unit.calls says nothing" \
	"$(j '[j["numeric_tested"], [[v["key"], v["form"], [[s["above"], s["up_to"], round(s["cost_ns"] / 1e6, 2), s["streams"]] for s in v["steps"]]] for v in j["numeric"]]]')" \
	'[2,[["body.size","steps",[[null,3200.0,3.0,40],[3200.0,null,45.0,10]]]]]'
t_eq "bi: the step in words" "$(j 'j["numeric"][0]["summary"]')" "cost jumps from 3 ms to 45 ms above body.size 3,200, R^2 1.00"
http GET "$WEB_URL/clusters/${CL[bi]}" -H "Authorization: Bearer $AN"
t_match "bi: the cluster page says both" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<h2>What the cost depends on</h2><ul class="lead"><li>Cost jumps from 3 ms to 45 ms above body\.size 3,200, R\^2 1\.00\. <span class="hint">\(50 streams, R\^2 1\.00 on held-out streams\)</span></li><li>Two modes: 3 ms \(80 %\) and 45 ms \(20 %\)\.</li></ul>'

# ---- none: a numeric label unrelated to a cost of one mode ----
http GET "$WEB_URL/api/v1/clusters/${CL[none]}/attribution" -H "Authorization: Bearer $AN"
t_eq "none: nothing to say" "$HTTP_STATUS $(j '[j["numeric"], j["numeric_tested"], j["modes"]["k"], j["modes"]["summary"], round(j["modes"]["bic"][0], 3) < round(j["modes"]["bic"][1], 3)]')" \
	'200 [[],1,1,null,true]'
http GET "$WEB_URL/clusters/${CL[none]}" -H "Authorization: Bearer $AN"
t_match "none: the page says so" "$HTTP_STATUS $HTTP_BODY" \
	"^200 .*<h2>What the cost depends on</h2><ul class=\"lead\"><li>None of its 1 numeric label explains this cluster's cost, which has a single mode around 5 ms\.</li></ul><p class=\"hint\">Over 25 of the cluster's streams: "

# ---- a problem: the same fields ----
prob=$(pg_q "SELECT problem_id FROM clusters WHERE id = ${CL[bi]}")
if [ -n "$prob" ]; then
	http GET "$WEB_URL/api/v1/problems/$prob/attribution" -H "Authorization: Bearer $AN"
	t_eq "bi: the problem's attribution says the same" "$HTTP_STATUS $(j '[j["modes"]["summary"], [v["summary"] for v in j["numeric"]]]')" \
		'200 ["two modes: 3 ms (80 %) and 45 ms (20 %)",["cost jumps from 3 ms to 45 ms above body.size 3,200, R^2 1.00"]]'
else
	t_fail "bi: the cluster has a problem"
fi

# ---- the server's copy (web/costcache.h): a stored run's models never change, each is computed once ----
# a server of its own: the first answer is fitted, not copied
start_web || t_bail "sm-web starts again"
http GET "$WEB_URL/api/v1/clusters/${CL[bi]}/attribution" -H "Authorization: Bearer $AN"
first=$(j '[j["numeric"], j["numeric_tested"], j["numeric_keys_skipped"], j["modes"]]')
# (the attribution's values: what the counted values say)
vals='[j["cluster_streams"], j["run_streams"], j["cost_ns"], j["tested"], j["summary"], [[v["key"], v["value"], v["cluster_streams"], v["q"]] for v in j["values"]]]'
firstv=$(j "$vals")
t_eq "bi: the attribution counts the cluster's streams" "$(j 'j["cluster_streams"]')" \
	"$(pg_q "SELECT streams FROM match_values WHERE of = 'c' AND id = ${CL[bi]} AND key = ''")"
# its sampled streams and its counted values gone (as if never stored): a copy still has the model
# fitted first and the attribution computed first
pg_q "DELETE FROM match_streams WHERE of = 'c' AND id = ${CL[bi]}" >/dev/null
pg_q "DELETE FROM match_values WHERE of = 'c' AND id = ${CL[bi]}" >/dev/null
http GET "$WEB_URL/api/v1/clusters/${CL[bi]}/attribution" -H "Authorization: Bearer $AN"
t_eq "bi: asked again, the model computed first, whole" \
	"$HTTP_STATUS $(j '[j["numeric"], j["numeric_tested"], j["numeric_keys_skipped"], j["modes"]]')" "200 $first"
t_eq "bi: and the attribution computed first, whole" "$(j "$vals")" "$firstv"
http GET "$WEB_URL/clusters/${CL[bi]}" -H "Authorization: Bearer $AN"
t_match "bi: the page from the same copy" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<h2>What the cost depends on</h2><ul class="lead"><li>Cost jumps from 3 ms to 45 ms above body\.size 3,200, R\^2 1\.00\. <span class="hint">\(50 streams, R\^2 1\.00 on held-out streams\)</span></li><li>Two modes: 3 ms \(80 %\) and 45 ms \(20 %\)\.</li></ul>'

# ---- fitted before the first view (web/costwarm.h) ----
# metric NAME: its value in sm-web's /metrics
metric() { curl -s "$WEB_URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
# wait_metric NAME VALUE: until it has that value, 15 s at most
wait_metric() {
	for _ in $(seq 150); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.1; done
	return 1
}
# want RUN: how many models the run's costliest make (20 clusters, 20 problems at most)
want() { pg_q "SELECT least(count(*), 20) + (SELECT least(count(*), 20) FROM problems WHERE run_id = $1) FROM clusters WHERE run_id = $1"; }
start_web || t_bail "sm-web starts with its models fitted ahead"
# the latest done run and those done in the 5 minutes before it (here: every run so far)
n0=0
for r in $(pg_q "SELECT id FROM runs WHERE status = 'done'
	AND finished_at > (SELECT max(finished_at) FROM runs WHERE status = 'done') - interval '5 minutes'"); do
	n0=$((n0 + $(want "$r")))
done
t_eq "warm: the runs of the 5 minutes before the latest: all three" \
	"$(pg_q "SELECT count(*) FROM runs WHERE status = 'done'
	AND finished_at > (SELECT max(finished_at) FROM runs WHERE status = 'done') - interval '5 minutes'")" 3
wait_metric sm_web_models_warmed_total "$n0"
t_eq "warm: at start, the recent done runs' costliest models are fitted, unasked, and their attributions computed" \
	"$(metric sm_web_models_warmed_total) $(metric sm_web_models_kept) $(metric sm_web_attributions_warmed_total) $(metric sm_web_attributions_kept)" \
	"$n0 $n0 $n0 $n0"
run=$("$SM_BIN_DIR/sm-miner" run --quiet --app bi --kind run --aoi thread --threshold-ns 10000000 2>"$T_TMP/miner.err") ||
	t_bail "sm-miner run --app bi, again" "$(cat "$T_TMP/miner.err")"
cl=$(pg_q "SELECT id FROM clusters WHERE run_id = $run ORDER BY rank_total_cost LIMIT 1")
prob=$(pg_q "SELECT problem_id FROM clusters WHERE id = $cl")
n1=$(want "$run")
wait_metric sm_web_models_warmed_total "$((n0 + n1))"
t_eq "warm: a run done later: its models too, within a poll" "$(metric sm_web_models_warmed_total)" "$((n0 + n1))"
# its sampled streams and counted values gone before any request: the answers are the models
# fitted and the attributions computed ahead
cln=$(pg_q "SELECT streams FROM match_values WHERE of = 'c' AND id = $cl AND key = ''")
pg_q "DELETE FROM match_streams WHERE (of = 'c' AND id = $cl) OR (of = 'p' AND id = ${prob:-0})" >/dev/null
pg_q "DELETE FROM match_values WHERE of = 'c' AND id = $cl" >/dev/null
http GET "$WEB_URL/api/v1/clusters/$cl/attribution" -H "Authorization: Bearer $AN"
t_eq "warm: the new run's cluster, never asked for, answers with its model" \
	"$HTTP_STATUS $(j '[j["numeric"], j["numeric_tested"], j["numeric_keys_skipped"], j["modes"]]')" "200 $first"
t_eq "warm: and its attribution, of its $cln streams" "$(j 'j["cluster_streams"] > 0 and j["cluster_streams"]')" "$cln"
http GET "$WEB_URL/api/v1/problems/$prob/attribution" -H "Authorization: Bearer $AN"
t_eq "warm: and its problem" "$HTTP_STATUS $(j '[j["modes"]["summary"], [v["summary"] for v in j["numeric"]]]')" \
	'200 ["two modes: 3 ms (80 %) and 45 ms (20 %)",["cost jumps from 3 ms to 45 ms above body.size 3,200, R^2 1.00"]]'
t_eq "warm: nothing fitted again for them" "$(metric sm_web_models_warmed_total)" "$((n0 + n1))"
# its connection ended under it (as by a database's restart): a new one, and a later run's models
t_eq "warm: its connection, named, ended by the database" \
	"$(pg_q "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'sm-web cost models'")" 1
run2=$("$SM_BIN_DIR/sm-miner" run --quiet --app bi --kind run --aoi thread --threshold-ns 10000000 2>"$T_TMP/miner.err") ||
	t_bail "sm-miner run --app bi, a third time" "$(cat "$T_TMP/miner.err")"
n2=$(want "$run2")
wait_metric sm_web_models_warmed_total "$((n0 + n1 + n2))"
t_eq "warm: connected again, a run done after that has its models fitted" \
	"$(metric sm_web_models_warmed_total) $(pg_q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sm-web cost models'")" \
	"$((n0 + n1 + n2)) 1"
# the pages first: while a request is in the server's hands (here one held by a lock on what it
# reads, which no fit reads), each fit waits, a second at most, then goes on
printf 'BEGIN;\nLOCK TABLE agent_settings IN ACCESS EXCLUSIVE MODE;\nSELECT pg_sleep(120);\n' |
	PGAPPNAME=sm-test-holder psql -X -q >/dev/null 2>&1 &
holder=$!
t_cleanup "kill $holder 2>/dev/null; true"
pg_until 1 "SELECT count(*) FROM pg_locks WHERE relation = 'agent_settings'::regclass
	AND mode = 'AccessExclusiveLock' AND granted" 100 >/dev/null
curl -s -o "$T_TMP/held.body" -w '%{http_code}' -H "Authorization: Bearer $AN" "$WEB_URL/api/v1/agent-settings" \
	>"$T_TMP/held.code" &
held=$!
t_eq "yield: a request waits on the lock" "$(pg_until 1 "SELECT count(*) FROM pg_stat_activity
	WHERE wait_event_type = 'Lock' AND query LIKE '%agent_settings%' AND application_name <> 'sm-test-holder'" 100)" 1
y0=$(metric sm_web_model_warm_yield_seconds_total)
run3=$("$SM_BIN_DIR/sm-miner" run --quiet --app bi --kind run --aoi thread --threshold-ns 10000000 2>"$T_TMP/miner.err") ||
	t_bail "sm-miner run --app bi, a fourth time" "$(cat "$T_TMP/miner.err")"
n3=$(want "$run3")
# the first fit of the new run: a whole second given to the request, then it is done
wait_metric sm_web_models_warmed_total "$((n0 + n1 + n2 + 1))"
y1=$(metric sm_web_model_warm_yield_seconds_total)
t_eq "yield: the new run's first fit waited a whole second for the request, then was made" \
	"$(awk -v a="$y0" -v b="$y1" 'BEGIN { print (b - a >= 1.0) }') $(metric sm_web_models_warmed_total)" \
	"1 $((n0 + n1 + n2 + 1))"
t_eq "yield: the request still waits (the lock)" "$(cat "$T_TMP/held.code" 2>/dev/null)" ""
pg_q "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sm-test-holder'" >/dev/null
wait "$held" "$holder" 2>/dev/null
t_eq "yield: the lock gone, the request is answered" "$(cat "$T_TMP/held.code")" 200
wait_metric sm_web_models_warmed_total "$((n0 + n1 + n2 + n3))"
t_eq "yield: and the run's other fits are made" "$(metric sm_web_models_warmed_total)" "$((n0 + n1 + n2 + n3))"
# stopped while a fit waits: a fresh sm-web fits the latest run's models at its start, and the
# lock held here on what a fit reads keeps its first one waiting; SIGTERM ends it at once, with
# no warning of a failed fit
stop_web
unlock() { pg_q "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sm-test-locker'"; }
printf 'BEGIN;\nLOCK TABLE match_streams IN ACCESS EXCLUSIVE MODE;\nSELECT pg_sleep(120);\n' |
	PGAPPNAME=sm-test-locker psql -X -q >/dev/null 2>&1 &
locker=$!
t_cleanup "kill $locker 2>/dev/null; true"
pg_until 1 "SELECT count(*) FROM pg_locks WHERE relation = 'match_streams'::regclass
	AND mode = 'AccessExclusiveLock' AND granted" 100 >/dev/null
start_web || t_bail "sm-web starts with a lock in its way"
t_eq "warm: a fit waits on the lock" "$(pg_until Lock "SELECT wait_event_type FROM pg_stat_activity
	WHERE application_name = 'sm-web cost models' AND state = 'active'" 150)" Lock
t0=$(date +%s%N)
wlog=$WEB_LOG
stop_web
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
t_eq "warm: SIGTERM during that fit: sm-web exits 0 within 3 s ($ms ms), nothing logged of a failed fit" \
	"${WEB_RC:-} $((ms < 3000)) $(grep -c 'a fit failed\|reading the run failed' "$wlog")" "0 1 0"
t_eq "warm: and its waiting query is gone from the database" \
	"$(pg_until 0 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sm-web cost models'")" 0
t_eq "warm: (the lock let go)" "$(unlock)" 1
wait "$locker" 2>/dev/null
start_web --model-warm 0 || t_bail "sm-web starts with --model-warm 0"
http GET "$WEB_URL/api/v1/clusters/$cl/attribution" -H "Authorization: Bearer $AN"
t_eq "warm: --model-warm 0 fits nothing ahead: the cluster's streams left make none" \
	"$HTTP_STATUS $(j '[j["numeric"], j["modes"]["k"]]') $(metric sm_web_models_warmed_total) $(metric sm_web_models_kept)" \
	'200 [[],0] 0 1'

start_web --model-cache 0 || t_bail "sm-web starts with --model-cache 0"
http GET "$WEB_URL/api/v1/clusters/${CL[bi]}/attribution" -H "Authorization: Bearer $AN"
t_eq "bi: without the copy, computed from the streams left: none" \
	"$HTTP_STATUS $(j '[j["numeric"], j["modes"]["streams"], j["modes"]["k"]]')" '200 [[],0,0]'
t_eq "bi: nor from the values left: nothing attributed" "$(j '[j["cluster_streams"], j["summary"], j["values"]]')" '[0,null,[]]'
stop_web
t_done
