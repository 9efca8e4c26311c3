# bench/analysis.sh, sourced by bench/run.sh (SM_BENCH_ONLY=analysis): differential analysis
# (docs/analysis.md) at scale.
#   - the baseline measurement in memory (tests/tools/analysisbench): 30,000 patterns matched
#     against 50,000 baseline stacks, and the excess cost with 200 bootstrap replicates of
#     10,000 clusters over 100,000 streams (half of them baseline);
#   - an end-to-end run over a generated fleet of 1,000 slow units and 1,000 normal ones, with
#     and without its baseline: what the measurement adds to a run;
#   - attribution through sm-web on a run of 10,000 clusters over 100,000 streams (50,000 of
#     them baseline, 9 labels each) written straight into the tables: the API's latency for
#     clusters of 10 to 5,000 streams.
echo
echo "== analysis: the baseline measurement, excess cost and attribution (docs/analysis.md)"
"$tools/analysisbench"

"$tools/genfleet" --apps shop,find --streams 1000 --baseline 1000 --regression-conf --seed 7 \
	--out "$work/afleet.ndjson" 2>/dev/null
send_fleet "$work/afleet.ndjson" 10 4
n=$(psql -XAtc "SELECT count(*) FROM streams WHERE app = 'shop' AND role = 'violation'")
nb=$(psql -XAtc "SELECT count(*) FROM streams WHERE app = 'shop' AND role = 'baseline'")
# a first run folds the frame statistics (not measured); then without the baseline and with it
"$bin/sm-miner" run --quiet --app shop --kind run --threshold-ns $((n * 300 * 100000)) --no-baseline >/dev/null 2>&1
for opt in --no-baseline --bootstrap=200; do
	id=$("$bin/sm-miner" run --quiet --app shop --kind run --threshold-ns $((n * 300 * 100000)) "$opt" 2>/dev/null)
	psql -XAtc "SELECT format('run over %s slow units%s: %s clusters, total %s ms (reading and AOI %s ms,'
		' clustering and measuring %s ms, storing %s ms)',
		counts->>'streams', CASE WHEN (counts->>'baseline_streams')::int > 0
		THEN ' and ' || (counts->>'baseline_streams') || ' normal ones' ELSE ' (no baseline)' END,
		counts->>'clusters', timings_ms->>'total', timings_ms->>'read_aoi', timings_ms->>'cluster',
		timings_ms->>'store') FROM runs WHERE id = $id"
done
echo "(the fleet: $n slow and $nb normal units of app shop, 2,000 events each)"

# 100,000 streams on 200 hosts, 6 versions, 9 labels; a done run whose 10,000 clusters own
# run_stacks over the 50,000 violating ones; the 50,000 others are its baseline
t0=$(now)
psql -XAtq -v ON_ERROR_STOP=1 >"$work/arun" <<-'SQL'
SELECT setseed(0.17) \g /dev/null
INSERT INTO streams (stream_id, host, app, version, labels, symptom_kind, symptom_tid, symptom_start_ns,
		     symptom_end_ns, n_events, role)
	SELECT md5('abench-' || i)::uuid, 'ah-' || lpad((i % 200)::text, 3, '0'), 'abench', '7.' || (i % 6) || '.0',
	       jsonb_build_object('region', (ARRAY['eu-west', 'us-east', 'us-west', 'ap-south'])[1 + i % 4],
		'kernel', '6.1.' || (i % 9), 'tier', CASE WHEN i % 10 = 0 THEN 'canary' ELSE 'prod' END,
		'conf.pool', (8 << (i % 3))::text, 'conf.workers', (2 + i % 5)::text, 'arch', 'x86_64',
		'unit.type', 'u' || (i % 12), 'unit.duration_ns', (i * 7919 % 1000003)::text, 'os', 'debian-12'),
	       'unit_violation', 1, 0, 1000000000, 100, CASE WHEN i % 2 = 0 THEN 'violation' ELSE 'baseline' END
	FROM generate_series(0, 99999) i;
CREATE TEMP TABLE ast AS SELECT i, s.id FROM generate_series(0, 99999) i
	JOIN streams s ON s.stream_id = md5('abench-' || i)::uuid;
ALTER TABLE ast ADD PRIMARY KEY (i);
INSERT INTO runs (status, params, counts, created_at, started_at, finished_at)
	VALUES ('done', '{"app": "abench", "kind": "run", "aoi": "waitgraph", "threshold_fraction": 0.01,
		"linkage": "average", "cut": 0.5, "baseline": true, "bootstrap": 200, "filter": {}}',
		'{"streams": 50000, "baseline_streams": 50000}', now(), now(), now())
	RETURNING id AS run \gset
INSERT INTO run_baseline (run_id, stream_ref) SELECT :run, id FROM ast WHERE i % 2 = 1;
-- cluster c owns stack 1000000 + c; its streams: a heavy-tailed count (10 to 5,000) of violating ones
CREATE TEMP TABLE acl AS
	SELECT c, least(5000, 10 + floor(exp(random() * 7.5))::int) AS m, (random() * 50000)::int AS at
	FROM generate_series(0, 9999) c;
INSERT INTO run_stacks (run_id, kind, stack_id, stream_ref, cost_ns, events)
	SELECT :run, 'r', 1000000 + c, s.id, 1000000 + (hashint4(c * 7 + k) & 65535) * 100, 1
	FROM acl CROSS JOIN LATERAL generate_series(0, acl.m - 1) k JOIN ast s ON s.i = 2 * ((acl.at + k * 37) % 50000);
SELECT count(*) FROM run_stacks WHERE run_id = :run \g
INSERT INTO patterns (run_id, kind, rank, frame_ids, cost_ns, events, streams, stack_ids)
	SELECT :run, 'r', c + 1, ARRAY[1, 2, 3], 1, 1, 1, ARRAY[1000000 + c] FROM acl;
INSERT INTO clusters (run_id, kind, total_cost_ns, streams, events, avg_cost_ns, rank_total_cost, rank_streams,
		      rank_events, rank_avg_cost, medoid, common_frame_ids, members, stack_ids, alignment)
	SELECT :run, 'r', m * 1000000, m, m, 1000000, c + 1, c + 1, c + 1, c + 1, p.id, ARRAY[1, 2, 3], ARRAY[p.id],
	       ARRAY[1000000 + c], '[]'
	FROM acl JOIN patterns p ON p.run_id = :run AND p.rank = c + 1;
ANALYZE streams; ANALYZE run_stacks; ANALYZE run_baseline; ANALYZE clusters;
SELECT sm_run_values(:run) \g /dev/null
SELECT sm_match_streams(:run) \g /dev/null
SELECT :run \g
SQL
arun=$(tail -n 1 "$work/arun")
echo "attribution data: 100,000 streams, $(sed -n 1p "$work/arun") run_stacks rows of 10,000 clusters, written in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
t0=$(now)
psql -XAtqc "SELECT sm_run_values($arun)" >/dev/null
echo "the run's value counts for attribution (sm_run_values, part of storing a run): $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", (b - a) * 1000 }') ms for 100,000 streams, $(psql -XAtc "SELECT count(*) FROM run_values WHERE run_id = $arun") values"
token=$("$bin/sm-admin" token create --role analyst --name abench 2>/dev/null)
rm -f "$work/aport"
# the first views fit their models (nothing fitted ahead: --model-warm 0)
"$bin/sm-web" --db "$(deploy/pg.sh url "$work/pg")" --listen 127.0.0.1:0 --port-file "$work/aport" --no-worker --model-warm 0 \
	--log-level warn 2>"$work/aweb.log" &
web_pid=$!
for _ in $(seq 100); do [ -s "$work/aport" ] && break; sleep 0.1; done
for m in 10 100 1000 5000; do
	cid=$(psql -XAtc "SELECT id FROM clusters WHERE run_id = $arun ORDER BY abs(streams - $m), id LIMIT 1")
	streams=$(psql -XAtc "SELECT streams FROM clusters WHERE id = $cid")
	# the first request fits the cost model, later ones copy it (sm-web --model-cache)
	first=$(curl -s -o "$work/attr.json" -w '%{time_total}' -H "Authorization: Bearer $token" \
		"http://127.0.0.1:$(cat "$work/aport")/api/v1/clusters/$cid/attribution")
	best=
	for _ in 1 2 3; do
		t=$(curl -s -o "$work/attr.json" -w '%{time_total}' -H "Authorization: Bearer $token" \
			"http://127.0.0.1:$(cat "$work/aport")/api/v1/clusters/$cid/attribution")
		best=$(awk -v a="${best:-1e9}" -v b="$t" 'BEGIN { print (b < a ? b : a) }')
	done
	echo "attribution of a cluster of $streams streams (of 50,000, against 50,000 baseline): $(awk -v t="$first" 'BEGIN { printf "%.0f", t * 1000 }') ms the first time, $(awk -v t="$best" 'BEGIN { printf "%.0f", t * 1000 }') ms after (best of 3, its cost model kept), $(grep -o '"tested": *[0-9]*' "$work/attr.json" | grep -o '[0-9]*$') values tested"
done
kill "$web_pid"
wait "$web_pid" || true
web_pid=
# fitted ahead (--model-warm 20, the default): the latest done run's 20 costliest clusters at start
rm -f "$work/aport"
t0=$(now)
"$bin/sm-web" --db "$(deploy/pg.sh url "$work/pg")" --listen 127.0.0.1:0 --port-file "$work/aport" --no-worker --threads 2 \
	--log-level warn 2>"$work/aweb.log" &
web_pid=$!
for _ in $(seq 100); do [ -s "$work/aport" ] && break; sleep 0.1; done
want=$(psql -XAtc "SELECT least(count(*), 20) + (SELECT least(count(*), 20) FROM problems WHERE run_id = $arun) FROM clusters WHERE run_id = $arun")
for _ in $(seq 600); do
	[ "$(curl -s "http://127.0.0.1:$(cat "$work/aport")/metrics" | awk '$1 == "sm_web_models_warmed_total" { print $2 }')" = "$want" ] && break
	sleep 0.1
done
warm=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
# first_answers RANK...: each cluster's first answer, in ms (its streams)
first_answers() {
	local rank cid t out=
	for rank in "$@"; do
		cid=$(psql -XAtc "SELECT id FROM clusters WHERE run_id = $arun ORDER BY total_cost_ns DESC, id OFFSET $((rank - 1)) LIMIT 1")
		t=$(curl -s -o "$work/attr.json" -w '%{time_total}' -H "Authorization: Bearer $token" \
			"http://127.0.0.1:$(cat "$work/aport")/api/v1/clusters/$cid/attribution")
		out="$out${out:+, }$(awk -v t="$t" 'BEGIN { printf "%.0f", t * 1000 }') ($(psql -XAtc "SELECT streams FROM clusters WHERE id = $cid"))"
	done
	echo "$out"
}
# on the same server (2 threads, each connection used first by the clusters fitted at their view):
# the first answers of clusters 21 to 24 by cost, fitted at their view, then of the 3 costliest
at_view=$(first_answers 21 22 23 24)
echo "fitted ahead: the run's $want costliest models $warm s after sm-web started (--threads 2); first answers in ms" \
	"(streams): clusters 21 to 24 by cost, fitted at their view, $at_view; the 3 costliest, fitted ahead, $(first_answers 1 2 3)"
kill "$web_pid"
wait "$web_pid" || true
web_pid=

# compare: two runs of 10,000 clusters each over the same 50,000 streams (run stacks with real frames):
# B has 1 % of A's clusters three times as costly, 1 % gone, 100 new ones
t0=$(now)
psql -XAtq -v ON_ERROR_STOP=1 >"$work/crun" <<-'SQL'
SELECT setseed(0.23) \g /dev/null
INSERT INTO frames (name) SELECT 'abench!f' || i FROM generate_series(0, 11099) i ON CONFLICT (name) DO NOTHING;
CREATE TEMP TABLE af AS SELECT i, f.id FROM generate_series(0, 11099) i JOIN frames f ON f.name = 'abench!f' || i;
ALTER TABLE af ADD PRIMARY KEY (i);
CREATE TEMP TABLE ast2 AS SELECT i, s.id FROM generate_series(0, 99999) i JOIN streams s ON s.stream_id = md5('abench-' || i)::uuid;
ALTER TABLE ast2 ADD PRIMARY KEY (i);
-- cluster c: the stack [f0, f1, f(2 + c % 500), f(1000 + c)] and the pattern [f0, f(2 + c % 500), f(1000 + c)]
CREATE TEMP TABLE ccl AS
	SELECT c, least(5000, 10 + floor(exp(random() * 7.5))::int) AS m, (random() * 50000)::int AS at,
	       ARRAY[f0.id, f1.id, f2.id, f3.id] AS sf, ARRAY[f0.id, f2.id, f3.id] AS pf
	FROM generate_series(0, 10099) c JOIN af f0 ON f0.i = 0 JOIN af f1 ON f1.i = 1
	JOIN af f2 ON f2.i = 2 + c % 500 JOIN af f3 ON f3.i = 1000 + c;
INSERT INTO stacks (frame_ids) SELECT sf FROM ccl ON CONFLICT (hash, frame_ids) DO NOTHING;
ALTER TABLE ccl ADD COLUMN stack integer;
UPDATE ccl SET stack = s.id FROM stacks s WHERE s.frame_ids = ccl.sf;
CREATE TEMP TABLE cr (side int, run bigint);
INSERT INTO runs (status, params, counts, created_at, started_at, finished_at) SELECT 'done',
	'{"app": "cbench", "kind": "run", "aoi": "waitgraph", "threshold_fraction": 0.01, "linkage": "average",
	  "cut": 0.5, "baseline": true, "bootstrap": 200, "filter": {}}', '{"streams": 50000}', now(), now(), now()
	FROM generate_series(1, 2) RETURNING id \g /dev/null
INSERT INTO cr SELECT row_number() OVER (ORDER BY id) - 1, id FROM runs WHERE params->>'app' = 'cbench';
-- A: clusters 0..9999; B: the same but 1 % three times as costly and 1 % gone, and 10000..10099 new
CREATE TEMP TABLE cin AS SELECT cr.side, cr.run, ccl.* FROM cr, ccl
	WHERE (cr.side = 0 AND c < 10000) OR (cr.side = 1 AND c % 100 <> 1);
INSERT INTO run_stacks (run_id, kind, stack_id, stream_ref, cost_ns, events)
	SELECT run, 'r', stack, s.id, (1000000 + (hashint4(c * 7 + k) & 65535) * 100) *
	       CASE WHEN side = 1 AND c % 100 = 0 THEN 3 ELSE 1 END, 1
	FROM cin CROSS JOIN LATERAL generate_series(0, cin.m - 1) k JOIN ast2 s ON s.i = 2 * ((cin.at + k * 37) % 50000);
INSERT INTO patterns (run_id, kind, rank, frame_ids, cost_ns, events, streams, stack_ids)
	SELECT run, 'r', c + 1, pf, 1, 1, 1, ARRAY[stack] FROM cin;
INSERT INTO clusters (run_id, kind, total_cost_ns, streams, events, avg_cost_ns, rank_total_cost, rank_streams,
		      rank_events, rank_avg_cost, medoid, common_frame_ids, members, stack_ids, alignment)
	SELECT cin.run, 'r', m * 1000000, m, m, 1000000, c + 1, c + 1, c + 1, c + 1, p.id, pf, ARRAY[p.id],
	       ARRAY[stack], '[]'
	FROM cin JOIN patterns p ON p.run_id = cin.run AND p.rank = c + 1;
ANALYZE run_stacks; ANALYZE clusters; ANALYZE patterns;
SELECT (SELECT count(*) FROM run_stacks WHERE run_id IN (SELECT run FROM cr)) \g
SELECT string_agg(run::text, ' ' ORDER BY side) FROM cr \g
SQL
echo "compare data: two runs of about 10,000 clusters, $(sed -n 1p "$work/crun") run_stacks rows, written in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
read -r ca cb <<<"$(sed -n 2p "$work/crun")"
echo "sm-miner compare $ca $cb: $(timed "$bin/sm-miner" compare "$ca" "$cb" --limit 30000)"
echo "  $(grep -c '^new ' "$work/out") new, $(grep -c '^grown ' "$work/out") grown, $(grep -c '^gone ' "$work/out") gone, $(sed -n 1p "$work/out" | sed 's/.*: //') in all"
