# bench/signatures.sh, sourced by bench/run.sh (SM_BENCH_ONLY=signatures): coverage and triage at
# 60,000 signatures (docs/web.md, Signatures). A done run of 2,000 streams over 4,900 stacks of 20
# frames (20,000 run_stacks rows) and 60,000 signatures of 2 frames each, written straight into the
# tables; then triage with sm-cluster (no HTTP), the API's coverage and triage, the signature page
# with ?run=N and the API's list (a page of 1,000). Figures, best of 3 (the first run of each too).
echo
echo "== signatures: coverage and triage over 60,000 signatures (a stack is compared with the signatures of its frames)"
t0=$(now)
psql -XAtq -v ON_ERROR_STOP=1 >"$work/srun" <<-'SQL'
INSERT INTO frames (name) SELECT 'sbench!f' || i FROM generate_series(0, 4999) i ON CONFLICT (name) DO NOTHING;
CREATE TEMP TABLE sf AS SELECT i, f.id FROM generate_series(0, 4999) i JOIN frames f ON f.name = 'sbench!f' || i;
ALTER TABLE sf ADD PRIMARY KEY (i);
INSERT INTO stacks (frame_ids)
	SELECT ARRAY[(SELECT id FROM sf WHERE i = 0), (SELECT id FROM sf WHERE i = 1 + s % 50)] ||
	       ARRAY(SELECT (SELECT id FROM sf WHERE i = 100 + (s * 31 + k * 97) % 4900) FROM generate_series(0, 17) k
		     ORDER BY k)
	FROM generate_series(0, 4899) s ON CONFLICT (hash, frame_ids) DO NOTHING;
CREATE TEMP TABLE sst AS SELECT row_number() OVER (ORDER BY id) - 1 AS s, id FROM stacks
	WHERE frame_ids[1] = (SELECT id FROM sf WHERE i = 0) AND cardinality(frame_ids) = 20;
INSERT INTO streams (stream_id, host, app, version, symptom_kind, symptom_tid, symptom_start_ns, symptom_end_ns, n_events)
	SELECT md5('sbench-' || i)::uuid, 'sh-' || (i % 50), 'sbench', '1', 'unit_violation', 1, 0,
	       1000000 + i * 1000, 10
	FROM generate_series(0, 1999) i;
INSERT INTO runs (status, params, counts, created_at, started_at, finished_at)
	VALUES ('done', '{"app": "sbench", "kind": "wait", "aoi": "waitgraph", "threshold_fraction": 0.01,
		"linkage": "average", "cut": 0.5, "filter": {}}', '{"streams": 2000}', now(), now(), now())
	RETURNING id AS run \gset
INSERT INTO run_stacks (run_id, kind, stack_id, stream_ref, cost_ns, events)
	SELECT DISTINCT ON (st.id, k.s) :run, 'w', k.id, st.id, 1000 + (hashint4(st.id::int * 10 + j) & 65535), 1
	FROM streams st CROSS JOIN generate_series(0, 9) j
	JOIN sst k ON k.s = (hashint4(st.id::int * 17 + j) & 2147483647) % (SELECT count(*) FROM sst)
	WHERE st.app = 'sbench';
INSERT INTO signatures (name, frames)
	SELECT 'sbench-' || lpad(n::text, 5, '0'),
	       ARRAY['sbench!f' || (1 + n % 50), 'sbench!f' || (100 + (n * 13) % 4900)]
	FROM generate_series(0, 59999) n ON CONFLICT (name) DO NOTHING;
ANALYZE frames; ANALYZE stacks; ANALYZE streams; ANALYZE run_stacks; ANALYZE signatures;
SELECT count(*) FROM run_stacks WHERE run_id = :run \g
SELECT :run \g
SQL
srun=$(tail -n 1 "$work/srun")
echo "data: 60,000 signatures, $(sed -n 1p "$work/srun") run_stacks rows of 2,000 streams, written in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
TIMEFORMAT='%R s wall, %U s user, %S s system'
{ time "$bin/sm-cluster" triage --db "$(deploy/pg.sh url "$work/pg")" "$srun" >"$work/striage.txt" 2>&1; } 2>"$work/stime"
unset TIMEFORMAT
echo "triage (sm-cluster triage, no HTTP): $(cat "$work/stime"); $(head -n 1 "$work/striage.txt")"
token=$("$bin/sm-admin" token create --role analyst --name sbench 2>/dev/null)
rm -f "$work/sport"
"$bin/sm-web" --db "$(deploy/pg.sh url "$work/pg")" --listen 127.0.0.1:0 --port-file "$work/sport" --no-worker \
	--log-level warn 2>"$work/sweb.log" &
web_pid=$!
for _ in $(seq 100); do [ -s "$work/sport" ] && break; sleep 0.1; done
surl=http://127.0.0.1:$(cat "$work/sport")
for path in "/api/v1/runs/$srun/triage" "/api/v1/runs/$srun/coverage" "/signatures?run=$srun" \
	"/signatures?run=$srun&offset=59950" "/api/v1/signatures?limit=1000&offset=30000"; do
	best= first= code=
	for _ in 1 2 3; do
		out=$(curl -s -o "$work/sresp" -w '%{time_total} %{http_code}' -H "Authorization: Bearer $token" "$surl$path")
		t=${out% *} code=${out#* }
		first=${first:-$t}
		best=$(awk -v a="${best:-1e9}" -v b="$t" 'BEGIN { print (b < a ? b : a) }')
	done
	echo "GET $path: $code in $(awk -v t="$best" 'BEGIN { printf "%.0f", t * 1000 }') ms (best of 3; first $(awk -v t="$first" 'BEGIN { printf "%.0f", t * 1000 }') ms), $(wc -c <"$work/sresp") bytes"
done
kill "$web_pid"
wait "$web_pid" || true
web_pid=
