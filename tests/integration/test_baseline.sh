#!/usr/bin/env bash
# baseline: streams of normal units (role baseline) and the excess cost of a run's
# clusters over them (docs/analysis.md).
#   - the wire format's role: stored, the default, refusals naming the field;
#   - a hand-made app whose numbers are worked out exactly: own cost, cost per
#     baseline stream, expected and excess cost, the ranks, the API's default order;
#   - genfleet's fleet with as many baseline streams as violating ones: the ordinary
#     request dispatch, first by total cost, sinks; every injected bug ranks above it
#     by excess cost, with an interval above 0 (baseline_check.py).
. "$(dirname "$0")/../lib.sh"

genfleet=${SM_GENFLEET:-$SM_BIN_DIR/../tests/genfleet}
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"

# ---- the wire format's role ----
# stream ID ROLE_JSON APP HOST COSTS...: a JSON line; COSTS "STACK:NS" of run events on thread 1
stream() {
	local id=$1 role=$2 app=$3 host=$4 ev="" t=0 c
	shift 4
	for c in "$@"; do
		ev+="${ev:+,}{\"kind\":\"run\",\"tid\":1,\"ts_ns\":$t,\"dur_ns\":${c#*:},\"stack\":${c%%:*}}"
		t=$((t + ${c#*:}))
	done
	printf '{"v":1,"stream_id":"%s",%s"host":"%s","app":"%s","symptom":{"kind":"unit_violation","tid":1,"start_ns":0,"end_ns":%d},"frames":["tiny!main","tiny!work","tiny!leaf","tiny!slow"],"stacks":[[0,1,2],[0,3]],"events":[%s]}\n' \
		"$id" "$role" "$host" "$app" "$t" "$ev"
}
V1=00000000-0000-4000-8000-000000000001
V2=00000000-0000-4000-8000-000000000002
B1=00000000-0000-4000-8000-000000000003
B2=00000000-0000-4000-8000-000000000004
BAD=00000000-0000-4000-8000-000000000005
{
	stream "$V1" '' tiny h1 0:100000000 1:30000000
	stream "$V2" '"role":"violation",' tiny h2 0:100000000 1:40000000
	stream "$B1" '"role":"baseline",' tiny h1 0:90000000
	stream "$B2" '"role":"baseline",' tiny h2 0:90000000
	stream "$BAD" '"role":"slow",' tiny h1 0:1
	stream 00000000-0000-4000-8000-000000000006 '"role":1,' tiny h1 0:1
} >"$T_TMP/tiny.ndjson"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/x-ndjson" \
	--data-binary @"$T_TMP/tiny.ndjson"
t_eq "role: the valid lines stored, the others refused with the field" "$HTTP_STATUS $HTTP_BODY" \
	"200 {\"accepted\":4,\"duplicates\":0,\"rejected\":[{\"line\":5,\"stream_id\":\"$BAD\",\"error\":\"role: must be \\\"violation\\\" or \\\"baseline\\\"\"},{\"line\":6,\"stream_id\":\"00000000-0000-4000-8000-000000000006\",\"error\":\"role: must be a string, not an integer\"}]}"
t_eq "role: stored (absent means violation)" \
	"$(pg_q "SELECT string_agg(host || ':' || role, ' ' ORDER BY stream_id) FROM streams")" \
	"h1:violation h2:violation h1:baseline h2:baseline"

# sm-agent marks what it ships or imports as baseline when told
stream 00000000-0000-4000-8000-000000000007 '' marked h3 0:1000 >"$T_TMP/marked.ndjson"
printf 'tiny!main;tiny!work 3\n' >"$T_TMP/normal.folded"
SM_TOKEN=$TOKEN "$SM_BIN_DIR/sm-agent" ship --baseline --url "$INGEST_URL" --spool "$T_TMP/spool" "$T_TMP/marked.ndjson" \
	>"$T_TMP/ship.out" 2>&1 || t_fail "sm-agent ship --baseline" "$(cat "$T_TMP/ship.out")"
SM_TOKEN=$TOKEN "$SM_BIN_DIR/sm-agent" import --baseline --format folded --host h3 --app marked \
	--url "$INGEST_URL" --spool "$T_TMP/spool" "$T_TMP/normal.folded" >"$T_TMP/ship.out" 2>&1 ||
	t_fail "sm-agent import --baseline" "$(cat "$T_TMP/ship.out")"
t_eq "sm-agent ship --baseline, import --baseline: stored as baseline" \
	"$(pg_q "SELECT string_agg(symptom_kind || ':' || role, ' ' ORDER BY symptom_kind) FROM streams WHERE app = 'marked'")" \
	"import:baseline unit_violation:baseline"
pg_q "DELETE FROM streams WHERE app = 'marked'" >/dev/null

# ---- the tiny app, exactly ----
# [main work leaf]: 200 ms in the slow units; the normal ones spend 90 ms each: 2 x 90 = 180 expected,
# excess 20 ms. [main slow]: 70 ms, none in the normal units: excess 70 ms. By total cost the first
# ranks first; by excess the second.
run=$("$SM_BIN_DIR/sm-miner" run --quiet --app tiny --kind run --aoi thread --threshold-ns 60000000 2>"$T_TMP/miner.err") ||
	t_bail "sm-miner run" "$(cat "$T_TMP/miner.err")"
t_eq "tiny: the run's counts" "$(pg_q "SELECT counts->>'streams', counts->>'baseline_streams' FROM runs WHERE id = $run")" "2|2"
t_eq "tiny: the baseline is not mined" \
	"$(pg_q "SELECT count(DISTINCT stream_ref) FROM run_stacks WHERE run_id = $run AND stream_ref IN (SELECT id FROM streams WHERE role = 'baseline')")" "0"
t_eq "tiny: each cluster's excess, exactly" "$(pg_q "SELECT string_agg(concat_ws(':',
	(SELECT string_agg(split_part(f.name, '!', 2), '>' ORDER BY o.i) FROM unnest(c.common_frame_ids) WITH ORDINALITY o(id, i) JOIN frames f ON f.id = o.id),
	total_cost_ns, own_cost_ns, baseline_streams, baseline_cost_ns, expected_cost_ns, excess_cost_ns, rank_total_cost, rank_excess_cost), ' ' ORDER BY rank_total_cost)
	FROM clusters c WHERE run_id = $run")" \
	"main>work>leaf:200000000:200000000:2:90000000:180000000:20000000:1:2 main>slow:70000000:70000000:0:0:0:70000000:2:1"
t_eq "tiny: intervals hold the excess" "$(pg_q "SELECT bool_and(excess_lo_ns <= excess_cost_ns AND excess_cost_ns <= excess_hi_ns) FROM clusters WHERE run_id = $run")" "t"
# both clusters cost in both slow streams: one problem, measured over both (each event once) against
# the baseline: 270 ms spent, 2 x 90 ms expected at the normal units' rate
t_eq "tiny: one problem, its excess over both clusters" "$(pg_q "SELECT rank, total_cost_ns, streams, events, own_cost_ns,
	baseline_streams, expected_cost_ns, excess_cost_ns, cardinality(members), excess_lo_ns <= excess_cost_ns AND excess_cost_ns <= excess_hi_ns
	FROM problems WHERE run_id = $run")" "1|270000000|2|4|270000000|2|180000000|90000000|2|t"
start_web || t_bail "sm-web starts"
AN=$(mk_token analyst 2>/dev/null)
http GET "$WEB_URL/api/v1/runs/$run/clusters" -H "Authorization: Bearer $AN"
t_eq "tiny: the API ranks by excess cost by default" \
	"$HTTP_STATUS $(printf '%s' "$HTTP_BODY" | "$py" -c 'import json, sys; j = json.load(sys.stdin); print(j["sort"], [(c["rank"], c["excess_cost_ns"]) for c in j["clusters"]])')" \
	"200 excess_cost [(1, 70000000), (2, 20000000)]"
http GET "$WEB_URL/runs/$run" -H "Authorization: Bearer $AN"
t_match "tiny: the run page shows the baseline and sorts by excess" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<dt[^>]*>Baseline streams</dt><dd>2</dd>.*aria-sort="descending"><a [^>]*data-sort="excess_cost">Excess cost ▼'
stop_web
norun=$("$SM_BIN_DIR/sm-miner" run --quiet --app tiny --kind run --aoi thread --threshold-ns 60000000 --no-baseline 2>>"$T_TMP/miner.err") ||
	t_bail "sm-miner run --no-baseline" "$(cat "$T_TMP/miner.err")"
t_eq "tiny: --no-baseline: no excess" \
	"$(pg_q "SELECT counts->>'baseline_streams', count(excess_cost_ns) FROM runs r JOIN clusters c ON c.run_id = r.id WHERE r.id = $norun GROUP BY 1")" "0|0"

# ---- a generated fleet with a baseline ----
"$genfleet" --streams 300 --baseline 300 --regression-conf --seed 1 --out "$T_TMP/fleet.ndjson" --truth "$T_TMP/truth.json" ||
	t_bail "genfleet"
SM_TOKEN=$TOKEN "$SM_BIN_DIR/sm-agent" ship --url "$INGEST_URL" --spool "$T_TMP/spool" "$T_TMP/fleet.ndjson" \
	>"$T_TMP/ship.out" 2>&1 || { sed 's/^/  | /' "$T_TMP/ship.out"; t_bail "sm-agent ship"; }
stop_ingest
t_eq "fleet: stored with their roles" "$(pg_q "SELECT role, count(*) FROM streams WHERE app <> 'tiny' GROUP BY 1 ORDER BY 1" | tr '\n' ' ')" \
	"baseline|300 violation|300 "
runs=()
for app in checkout search; do
	n=$(pg_q "SELECT count(*) FROM streams WHERE app = :'app' AND role = 'violation'" -v app="$app")
	for kd in run:300 wait:150; do
		id=$("$SM_BIN_DIR/sm-miner" run --quiet --app "$app" --kind "${kd%:*}" --threshold-ns $((n * ${kd#*:} * 100000)) \
			2>"$T_TMP/miner.err") || t_bail "sm-miner run --app $app --kind ${kd%:*}" "$(cat "$T_TMP/miner.err")"
		runs+=("$id")
	done
done
"$py" "$SM_REPO/tests/integration/baseline_check.py" "$T_TMP/truth.json" "${runs[@]}" >"$T_TMP/check.out" 2>&1 ||
	t_bail "baseline_check.py" "$(cat "$T_TMP/check.out")"
t_verdicts "$T_TMP/check.out"
# checkout run: 3 bugs x (interval, above) + sinks + owned; the 3 other runs: 1 bug each: 4
t_eq "fleet: every check ran" "$T_VERDICTS" 20

# ---- attribution: the regression is on version 2.4.0 and on hosts with conf.db_pool = 16 ----
reg=$(pg_q "SELECT c.id FROM clusters c WHERE c.run_id = ${runs[0]} AND EXISTS (SELECT 1 FROM unnest(c.common_frame_ids) x
	JOIN frames f ON f.id = x WHERE f.name LIKE '%ProductCache::rebuild_index') ORDER BY c.rank_total_cost LIMIT 1")
start_web || t_bail "sm-web starts"
http GET "$WEB_URL/api/v1/clusters/$reg/attribution?limit=5" -H "Authorization: Bearer $AN"
printf '%s' "$HTTP_BODY" >"$T_TMP/attribution.json"
"$py" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["summary"])
for v in j["values"]: print("  %-20s %-10s cost %3.0f %%  streams %3.0f %% of the cluster, %3.0f %% of the run, %3.0f %% of the baseline  lift %.2f  q %.2g  q(baseline) %.2g" % (v["key"], v["value"], 100 * v["cost_share"], 100 * v["cluster_share"], 100 * v["run_share"], 100 * v["baseline_share"], v["lift"], v["q"], v["q_baseline"]))' "$T_TMP/attribution.json"
t_eq "attribution: the regression's version and configuration value first, p < 0.001" \
	"$HTTP_STATUS $("$py" -c 'import json, sys; j = json.load(open(sys.argv[1]))
print(sorted((v["key"], v["value"]) for v in j["values"][:2]), all(v["q"] < 0.001 and v["q_baseline"] < 0.001 for v in j["values"][:2]))' "$T_TMP/attribution.json")" \
	"200 [('conf.db_pool', '16'), ('version', '2.4.0')] True"
t_match "attribution: in words" "$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"])' "$T_TMP/attribution.json")" \
	"^[0-9]+(\.[0-9])? % of this cluster's cost is on (version 2\.4\.0|conf\.db_pool = 16), which has [0-9]+(\.[0-9])? % of the run's streams \([0-9]+(\.[0-9])? % of the baseline's\); p < 10\^-[0-9]+$"
http GET "$WEB_URL/clusters/$reg" -H "Authorization: Bearer $AN"
t_match "attribution: the cluster page leads with it" "$HTTP_STATUS $HTTP_BODY" \
	"^200 .*<h2>Where it happens</h2><p class=\"lead\">[0-9]+(\.[0-9])? % of this cluster&#39;s cost is on (version 2\.4\.0|conf\.db_pool = 16)"
http GET "$WEB_URL/api/v1/clusters/$reg/attribution?limit=0" -H "Authorization: Bearer $AN"
t_eq "attribution: a bad limit" "$HTTP_STATUS $HTTP_BODY" "400 {\"error\": \"limit: must be a whole number from 1 to 1000\"}"$'\n'

# ---- compare: checkout 2.3.1 (A) against 2.4.0 (B), where the regression is ----
cmp_runs=()
for v in 2.3.1 2.4.0; do
	n=$(pg_q "SELECT count(*) FROM streams WHERE app = 'checkout' AND role = 'violation' AND version = :'v'" -v v="$v")
	id=$("$SM_BIN_DIR/sm-miner" run --quiet --app checkout --kind run --version "$v" --threshold-ns $((n * 300 * 100000)) \
		2>"$T_TMP/miner.err") || t_bail "sm-miner run --version $v" "$(cat "$T_TMP/miner.err")"
	cmp_runs+=("$id")
done
"$SM_BIN_DIR/sm-miner" compare "${cmp_runs[@]}" >"$T_TMP/compare.out" 2>&1 || t_fail "sm-miner compare" "$(cat "$T_TMP/compare.out")"
sed 's/^/  /' "$T_TMP/compare.out" | cut -c1-160 | head -14
t_match "compare: sm-miner compare prints the clusters by status" "$(cat "$T_TMP/compare.out")" \
	"^run ${cmp_runs[1]} \([0-9]+ streams\) against run ${cmp_runs[0]} \([0-9]+ streams\): [0-9]+ clusters"
http GET "$WEB_URL/api/v1/runs/${cmp_runs[0]}/compare/${cmp_runs[1]}" -H "Authorization: Bearer $AN"
printf '%s' "$HTTP_BODY" >"$T_TMP/compare.json"
# the regression's cluster in B: new or grown; a grown cluster is always one of a bug of 2.4.0
t_eq "compare: the regression is new or grown, and only bugs grew" "$HTTP_STATUS $("$py" - "$T_TMP/truth.json" "$T_TMP/compare.json" <<-'PY'
	import json, subprocess, sys
	truth, cmp = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
	def members(cid):
	    out = subprocess.check_output(["psql", "-XAtq", "-c", "SELECT coalesce(json_agg((SELECT array_agg(f.name ORDER BY o.i) "
	        "FROM unnest(p.frame_ids) WITH ORDINALITY o(id, i) JOIN frames f ON f.id = o.id)), '[]') FROM clusters c "
	        f"JOIN patterns p ON p.id = ANY(c.members) WHERE c.id = {int(cid)}"])
	    return json.loads(out)
	def contains(pat, frames):
	    it = iter(frames)
	    return all(any(f == p for f in it) for p in pat)
	bugs = [b for b in truth["bugs"] if b["app"] == "checkout" and b["kind"] == "run" and b["version"] in (None, "2.4.0")]
	reg = next(b for b in bugs if b["version"] == "2.4.0")
	rows = [r for r in cmp["clusters"] if r["b_cluster"]]
	holders = [r for r in rows if any(contains(reg["frames"], m) for m in members(r["b_cluster"]))]
	grown_ok = all(any(contains(b["frames"], m) for b in bugs for m in members(r["b_cluster"]))
	               for r in rows if r["status"] == "grown")
	print(holders[0]["status"] in ("new", "grown") if holders else "no holder", grown_ok)
	PY
	)" "200 True True"
t_eq "compare: each row carries its cluster's title, the same as the cluster's own" "$("$py" - "$WEB_URL" "$AN" "$T_TMP/compare.json" <<-'PY'
	import json, sys, urllib.request
	url, tok, cmp = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
	def title(cid):
	    rq = urllib.request.Request(f"{url}/api/v1/clusters/{cid}", headers={"Authorization": "Bearer " + tok})
	    return json.load(urllib.request.urlopen(rq))["title"]
	rows = cmp["clusters"]
	same = [r["title"] == title(r["b_cluster"] or r["a_cluster"]) for r in rows[:8]]
	print(len(rows) > 0 and all(r["title"] for r in rows), len(same) > 0 and all(same))
	PY
	)" "True True"
http GET "$WEB_URL/api/v1/runs/${cmp_runs[0]}/compare/999999" -H "Authorization: Bearer $AN"
t_eq "compare: a missing run" "$HTTP_STATUS $HTTP_BODY" "404 {\"error\": \"run 999999: no such run\"}"$'\n'
http GET "$WEB_URL/compare?a=${cmp_runs[0]}&b=${cmp_runs[1]}" -H "Authorization: Bearer $AN"
t_match "compare: the Compare page lists them, with a differential flame graph" "$HTTP_STATUS $HTTP_BODY" \
	"^200 .*<h1>Compare two runs</h1>.*<table class=\"compare\" id=\"compare\">.*<tr class=\"(new|grown)\">.*<section id=\"flame\">.*<svg [^>]*class=\"flame\".*ProductCache::rebuild_index[^<]*
[^<]*per stream: before 0 ns, after [0-9.]+ (s|ms|µs)</title>"
stop_web
t_done
