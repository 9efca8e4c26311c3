#!/usr/bin/env bash
# matches: what the pages of a run's clusters and problems read of their streams, counted once by
# the miner (miner/matches.c, sql/027_match.sql). A generated fleet of 2,600 small streams of one
# app, so that a cluster matches more streams than the rows kept of them (the 1,000 costliest and
# a sample of 2,000), is mined; then:
#   - the miner's rows equal what the SQL definition sm_match_streams() writes for the same run;
#   - each cluster keeps exactly its top 1,000 by cost and the 2,000 first by SHA-256 of the id;
#   - the API's top streams and breakdowns, and attribution's counts, equal the same figures
#     counted from run_stacks and streams as the pages counted them before (an independent query);
#   - the cluster's stacks read the same per-stack sums as run_stacks gives, and its page's flame
#     graph draws the 1,500 costliest, the others summed in one frame.
. "$(dirname "$0")/../lib.sh"

genfleet=${SM_GENFLEET:-$SM_BIN_DIR/../tests/genfleet}
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"
"$genfleet" --streams 2600 --events 64 --hosts 60 --apps shop --seed 11 --out "$T_TMP/fleet.ndjson" || t_bail "genfleet"
SM_TOKEN=$TOKEN "$SM_BIN_DIR/sm-agent" ship --url "$INGEST_URL" --spool "$T_TMP/spool" --batch 200 "$T_TMP/fleet.ndjson" \
	>"$T_TMP/ship.out" 2>&1 || { sed 's/^/  | /' "$T_TMP/ship.out"; t_bail "sm-agent ship"; }
stop_ingest
t_eq "fleet stored" "$(pg_q 'SELECT count(*) FROM streams')" 2600

RUN=$("$SM_BIN_DIR/sm-miner" run --quiet --app shop --kind both --threshold-fraction 0.02 2>"$T_TMP/miner.err") ||
	t_bail "sm-miner run" "$(cat "$T_TMP/miner.err")"
t_eq "run done" "$(pg_q "SELECT status FROM runs WHERE id = $RUN")" done
BIG=$(pg_q "SELECT id FROM clusters WHERE run_id = $RUN ORDER BY streams DESC, id LIMIT 1")
t_eq "a cluster of more than 2,000 streams" "$(pg_q "SELECT streams > 2000 FROM clusters WHERE id = $BIG")" t

# --- the miner's rows are sm_match_streams()'s ---
pg_q "CREATE TABLE c_streams AS SELECT * FROM match_streams WHERE run_id = $RUN;
      CREATE TABLE c_values AS SELECT * FROM match_values WHERE run_id = $RUN;
      CREATE TABLE c_totals AS SELECT * FROM run_stack_totals WHERE run_id = $RUN;
      SELECT sm_match_streams($RUN)" >/dev/null
for t in "match_streams c_streams" "match_values c_values" "run_stack_totals c_totals"; do
	set -- $t
	t_eq "$1: the miner's rows are the SQL definition's" \
		"$(pg_q "SELECT (SELECT count(*) FROM $2) > 0, (SELECT count(*) FROM $2) - (SELECT count(*) FROM $1 WHERE run_id = $RUN),
		  (SELECT count(*) FROM (SELECT * FROM $2 EXCEPT SELECT * FROM $1 WHERE run_id = $RUN) x),
		  (SELECT count(*) FROM (SELECT * FROM $1 WHERE run_id = $RUN EXCEPT SELECT * FROM $2) x)")" "t|0|0|0"
done
t_eq "every cluster's stack_ids come costliest first, and its totals are their sums" \
	"$(pg_q "SELECT count(*) FROM clusters c WHERE c.run_id = $RUN AND (c.stack_ids <> (SELECT array_agg(t.stack_id
	  ORDER BY t.cost_ns DESC, t.stack_id) FROM run_stack_totals t WHERE t.run_id = c.run_id AND t.kind = c.kind
	  AND t.stack_id = ANY(c.stack_ids)) OR (c.total_cost_ns, c.events) <> (SELECT sum(t.cost_ns), sum(t.events)
	  FROM run_stack_totals t WHERE t.run_id = c.run_id AND t.kind = c.kind AND t.stack_id = ANY(c.stack_ids)))")" 0
t_eq "every cluster and problem has its totals row" \
	"$(pg_q "SELECT (SELECT count(*) FROM clusters WHERE run_id = $RUN) + (SELECT count(*) FROM problems WHERE run_id = $RUN)
	  - (SELECT count(*) FROM match_values WHERE run_id = $RUN AND key = '')")" 0

# --- what is kept of a big cluster's streams: the 1,000 costliest and 2,000 sampled ---
# (the streams and their costs counted from run_stacks, independently of both)
ALL="SELECT rs.stream_ref, sum(rs.cost_ns) AS cost FROM clusters c JOIN run_stacks rs ON rs.run_id = c.run_id
     AND rs.kind = c.kind AND rs.stack_id = ANY(c.stack_ids) WHERE c.id = $BIG GROUP BY rs.stream_ref"
t_eq "the big cluster: every stream counted" \
	"$(pg_q "SELECT streams, cost_ns FROM match_values WHERE of = 'c' AND id = $BIG AND key = ''")" \
	"$(pg_q "SELECT count(*), sum(cost) FROM ($ALL) a")"
t_eq "the big cluster: its rows are the top 1,000 and the sample of 2,000" \
	"$(pg_q "SELECT string_agg(stream_ref || ':' || coalesce(pick::text, '-'), ',' ORDER BY stream_ref)
	  FROM match_streams WHERE of = 'c' AND id = $BIG")" \
	"$(pg_q "SELECT string_agg(stream_ref || ':' || CASE WHEN s <= 2000 THEN s::text ELSE '-' END, ',' ORDER BY stream_ref)
	  FROM (SELECT stream_ref, row_number() OVER (ORDER BY cost DESC, stream_ref) AS t,
	  row_number() OVER (ORDER BY sha256(stream_ref::text::bytea), stream_ref) AS s FROM ($ALL) a) x WHERE t <= 1000 OR s <= 2000")"
t_eq "the big cluster: fewer rows than streams" \
	"$(pg_q "SELECT count(*) < (SELECT streams FROM clusters WHERE id = $BIG) AND count(*) >= 2000 FROM match_streams WHERE of = 'c' AND id = $BIG")" t

# --- the API reads them: the same figures as counted from run_stacks ---
AN=$(mk_token analyst 2>/dev/null)
start_web || t_bail "sm-web starts"
H=(-H "Authorization: Bearer $AN")
http GET "$WEB_URL/api/v1/clusters/$BIG?limit=25" "${H[@]}"
t_eq "cluster: 200" "$HTTP_STATUS" 200
echo "$HTTP_BODY" >"$T_TMP/cluster.json"
j() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
t_eq "cluster: the top streams, as run_stacks counts them" \
	"$(j "$T_TMP/cluster.json" "','.join(f'{s[\"stream_id\"]}:{s[\"cost_ns\"]}' for s in j['top_streams'])")" \
	"$(pg_q "SELECT string_agg(s.stream_id || ':' || a.cost, ',' ORDER BY a.cost DESC, a.stream_ref)
	  FROM (SELECT * FROM ($ALL) a ORDER BY cost DESC, stream_ref LIMIT 25) a JOIN streams s ON s.id = a.stream_ref")"
t_eq "cluster: by host, as run_stacks counts it" \
	"$(j "$T_TMP/cluster.json" "','.join(f'{r[\"value\"]}:{r[\"streams\"]}:{r[\"cost_ns\"]}' for r in j['by_host'])")" \
	"$(pg_q "SELECT string_agg(host || ':' || n || ':' || cost, ',' ORDER BY cost DESC, host) FROM
	  (SELECT s.host, count(*) AS n, sum(a.cost) AS cost FROM ($ALL) a JOIN streams s ON s.id = a.stream_ref
	   GROUP BY s.host ORDER BY 3 DESC, 1 LIMIT 25) x")"
t_eq "cluster: by label, as run_stacks counts it" \
	"$(j "$T_TMP/cluster.json" "','.join(f'{r[\"key\"]}={r[\"value\"]}:{r[\"streams\"]}:{r[\"cost_ns\"]}' for r in j['by_label'])")" \
	"$(pg_q "SELECT string_agg(k || '=' || v || ':' || n || ':' || cost, ',' ORDER BY cost DESC, k, v) FROM
	  (SELECT l.key AS k, l.value AS v, count(*) AS n, sum(a.cost) AS cost FROM ($ALL) a JOIN streams s ON s.id = a.stream_ref,
	   jsonb_each_text(s.labels) AS l(key, value) WHERE l.key NOT IN ('host', 'version')
	   GROUP BY 1, 2 ORDER BY 4 DESC, 1, 2 LIMIT 25) x")"
http GET "$WEB_URL/api/v1/clusters/$BIG/attribution?limit=1000" "${H[@]}"
echo "$HTTP_BODY" >"$T_TMP/attr.json"
# each value the answer lists, with the cluster's streams that have it (sorted lines, C locale)
j "$T_TMP/attr.json" "'\\n'.join(f'{v[\"key\"]}={v[\"value\"]}:{v[\"cluster_streams\"]}' for v in j['values'])" |
	LC_ALL=C sort >"$T_TMP/attr.got"
pg_q "SELECT k || '=' || v || ':' || n FROM
	  (SELECT x.key AS k, x.value AS v, count(*) AS n FROM ($ALL) a JOIN streams s ON s.id = a.stream_ref,
	   LATERAL (SELECT 'host' AS key, s.host AS value UNION ALL SELECT 'version', s.version
	            UNION ALL SELECT l.key, l.value FROM jsonb_each_text(s.labels) AS l(key, value)
	            WHERE l.key NOT IN ('host', 'version')) x
	   GROUP BY 1, 2) y" | LC_ALL=C sort >"$T_TMP/attr.all"
t_eq "attribution: values listed" "$(( $(wc -l <"$T_TMP/attr.got") > 10 ))" 1
t_eq "attribution: the cluster's streams per value, as run_stacks counts them" \
	"$(LC_ALL=C comm -23 "$T_TMP/attr.got" "$T_TMP/attr.all" | grep -v ':0$' | head -5)" ""
t_eq "attribution: the cluster's streams" "$(j "$T_TMP/attr.json" "j['cluster_streams']")" \
	"$(pg_q "SELECT count(*) FROM ($ALL) a")"
http GET "$WEB_URL/api/v1/clusters/$BIG/stacks" "${H[@]}"
echo "$HTTP_BODY" >"$T_TMP/stacks.json"
t_eq "stacks: the per-stack sums, as run_stacks has them" \
	"$(j "$T_TMP/stacks.json" "'\\n'.join(f'{c[\"cost_ns\"]}:{c[\"events\"]}' for c in j['costs'])" | LC_ALL=C sort | md5sum)" \
	"$(pg_q "SELECT c || ':' || e FROM
	  (SELECT rs.stack_id, sum(rs.cost_ns) AS c, sum(rs.events) AS e FROM clusters c JOIN run_stacks rs
	   ON rs.run_id = c.run_id AND rs.kind = c.kind AND rs.stack_id = ANY(c.stack_ids) WHERE c.id = $BIG GROUP BY 1) x" |
	  LC_ALL=C sort | md5sum)"
# the page's flame graph draws the 1,500 costliest stacks, the others summed in one frame
NST=$(pg_q "SELECT cardinality(stack_ids) FROM clusters WHERE id = $BIG")
http GET "$WEB_URL/clusters/$BIG" "${H[@]}"
t_eq "cluster page: 200" "$HTTP_STATUS" 200
t_eq "cluster page: the flame graph's other stacks in one frame" \
	"$(grep -o '([0-9,]* smaller stacks)' <<<"$HTTP_BODY" | head -n 1 | tr -d ',')" \
	"$( [ "$NST" -gt 1500 ] && echo "($((NST - 1500)) smaller stacks)" || echo "(more than 1500 stacks expected, $NST)")"
# a first view (the frame names' cache empty, nothing computed ahead): the names of its 1,500 stacks'
# frames in one query, not one per stack; the page the same
body=$HTTP_BODY
start_web --model-warm 0 || t_bail "sm-web starts again"
fq() { curl -s "$WEB_URL/metrics" | awk '$1 == "sm_web_frame_name_queries_total" { print $2 }'; }
q0=$(fq)
http GET "$WEB_URL/clusters/$BIG" "${H[@]}"
q1=$(fq)
t_eq "cluster page, first view: its frame names in at most 4 queries (one each for the flame graph, the common part, the members), the page the same" \
	"$q0 $((q1 - q0 <= 4)) $( [ "$HTTP_BODY" = "$body" ] && echo same || echo differs)" "0 1 same"
# its flame graph is kept as drawn (its run's stacks never change, its names are final): a later
# view is the same page; a search or a zoom is drawn for itself and not kept
fk() { curl -s "$WEB_URL/metrics" | awk '$1 == "sm_web_flames_kept" { print $2 }'; }
fs() { curl -s "$WEB_URL/metrics" | awk '$1 == "sm_web_flames_served_total" { print $2 }'; }
t_eq "cluster page: its flame graph kept once drawn" "$(fk) $(fs)" "1 0"
http GET "$WEB_URL/clusters/$BIG" "${H[@]}"
t_eq "cluster page, seen again: served the kept graph, the same page" \
	"$HTTP_STATUS $(fs) $( [ "$HTTP_BODY" = "$body" ] && echo same || echo differs)" "200 1 same"
# /clusters/0ID is the same cluster: its graph is kept under the id's value, and links by it
start_web --model-warm 0 || t_bail "sm-web starts a third time"
http GET "$WEB_URL/clusters/0$BIG" "${H[@]}"
t_eq "cluster page first seen as /clusters/0ID: kept, its profile linked by the id's value" \
	"$HTTP_STATUS $(fk) $(grep -c "/api/v1/clusters/0$BIG/profile" <<<"$HTTP_BODY") $(grep -c "/api/v1/clusters/$BIG/profile" <<<"$HTTP_BODY")" \
	"200 1 0 1"
http GET "$WEB_URL/clusters/$BIG" "${H[@]}"
t_eq "and /clusters/ID then, served that graph: the same page as drawn for it" \
	"$HTTP_STATUS $(fs) $( [ "$HTTP_BODY" = "$body" ] && echo same || echo differs)" "200 1 same"
start_web --model-warm 0 || t_bail "sm-web starts a fourth time"
http GET "$WEB_URL/clusters/$BIG?search=main" "${H[@]}"
t_eq "cluster page with a search: drawn for it (what matched), not kept" \
	"$HTTP_STATUS $(grep -c 'matched: ' <<<"$HTTP_BODY") $(fk)" "200 1 0"
http GET "$WEB_URL/clusters/$BIG?focus=2" "${H[@]}"
t_eq "cluster page zoomed in: drawn for it, not kept" \
	"$HTTP_STATUS $(grep -c 'Reset zoom' <<<"$HTTP_BODY") $(fk) $(fs)" "200 1 0 0"
start_web --flame-cache 0 || t_bail "sm-web starts with --flame-cache 0"
http GET "$WEB_URL/clusters/$BIG" "${H[@]}"
t_eq "--flame-cache 0: nothing kept, the same page" \
	"$HTTP_STATUS $(fk) $( [ "$HTTP_BODY" = "$body" ] && echo same || echo differs)" "200 0 same"
stop_web
t_done
