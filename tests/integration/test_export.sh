#!/usr/bin/env bash
# export: a run, a cluster, a stream and a comparison of two runs exported by sm-web as
# pprof, speedscope and collapsed stacks. Each file follows its format's rules as an
# independent reader sees them (export_check.py: Python's protobuf library for pprof);
# the costs are the ones stored (run_stacks, the cluster's stacks, the stream's events),
# per kind and stack; pprof and folded exports imported again with sm-agent give the same
# costs per stack (and, for a stream, per thread); speedscope itself (the npm package's
# release, in headless Chromium) opens the pprof, speedscope and folded files and reads the
# same totals and names; frame names with ';', quotes, markup and non-ASCII come back
# exactly (folded: ';' becomes ':'); bad requests get their status and error.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3
AGENT=$SM_BIN_DIR/sm-agent
CHECK=$SM_REPO/tests/integration/export_check.py
command -v protoc >/dev/null || t_bail "protoc" "protoc is missing (Debian: protobuf-compiler)"
mkdir -p "$T_TMP/py"
protoc -I"$SM_REPO/common/proto" --python_out="$T_TMP/py" "$SM_REPO/common/proto/profile.proto" ||
	t_bail "protoc" "cannot generate Python code for profile.proto"
chk() { "$PY" "$CHECK" "$T_TMP/py" "$@"; }
# norm: JSON on stdin printed with sorted keys, as export_check.py prints
norm() { "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin) or {}, sort_keys=True, ensure_ascii=False))'; }

sm_admin migrate >/dev/null || t_bail "migrate"
INGEST=$(mk_token ingest 2>/dev/null)
ANALYST=$(mk_token analyst 2>/dev/null)
AN=(-H "Authorization: Bearer $ANALYST")
start_ingest || t_bail "sm-ingest starts"
for f in pprof/parca-profile-with-labels.pb.gz pprof/pprof-cppbench.contention bcc/bcc-offwaketime_example.txt \
	pprof/parca-fgprof.pb.gz; do
	http POST "$INGEST_URL/api/v1/import?host=h-$(basename "$f" | cut -c1-12)&app=exp" \
		-H "Authorization: Bearer $INGEST" --data-binary "@$SM_DATA/$f"
	[ "$HTTP_STATUS" = 200 ] || t_bail "import $f" "$HTTP_STATUS $HTTP_BODY"
done
# a stream whose frame names need escaping everywhere, on two threads, run and wait
SID=5a5a5a5a-0000-4000-8000-000000000001
cat >"$T_TMP/hostile.json" <<'EOF'
{"v": 1, "stream_id": "5a5a5a5a-0000-4000-8000-000000000001", "host": "h-hostile", "app": "exp",
 "symptom": {"kind": "unit_violation", "tid": 7, "start_ns": 1000, "end_ns": 900000000},
 "frames": ["app!main", "app!a;b \"q\" <x> & y", "app!überprüfe ✓", "libc.so.6!read"],
 "stacks": [[0, 1, 3], [0, 2]],
 "events": [{"kind": "wait", "tid": 7, "ts_ns": 1000, "dur_ns": 400000000, "stack": 0, "readier_tid": 8},
            {"kind": "run", "tid": 8, "ts_ns": 2000, "dur_ns": 300000000, "stack": 1},
            {"kind": "run", "tid": 7, "ts_ns": 400002000, "dur_ns": 100000000, "stack": 1}]}
EOF
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/json' \
	--data-binary "@$T_TMP/hostile.json"
[ "$HTTP_STATUS" = 200 ] || t_bail "the hostile stream" "$HTTP_STATUS $HTTP_BODY"
stop_ingest
start_web || t_bail "sm-web starts"

run() { # run JSON: a run mined by sm-web's worker; RUN its id
	local i st
	http POST "$WEB_URL/api/v1/runs" "${AN[@]}" -H 'Content-Type: application/json' --data-binary "$1"
	RUN=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$HTTP_BODY")
	for i in $(seq 1 600); do
		http GET "$WEB_URL/api/v1/runs/$RUN" "${AN[@]}"
		st=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["status"])' "$HTTP_BODY")
		[ "$st" = done ] || [ "$st" = failed ] && break
		sleep 0.1
	done
	[ "$st" = done ] || t_bail "run $1" "$st: $HTTP_BODY"
}
get() { # get PATH FILE: the body of an export into FILE; HTTP_STATUS
	curl -sS --max-time 60 -o "$2" -D "$T_TMP/h" -w '%{http_code}' "${AN[@]}" "$WEB_URL$1" >"$T_TMP/code"
	HTTP_STATUS=$(cat "$T_TMP/code")
}
# stored SQL: per "KIND STACK" cost, from the database (the truth the exports must give)
stored() {
	pg_q "SELECT coalesce(json_object_agg(k, c), '{}') FROM ($1) q" | norm
}
stack_sql() { # the frames of stack s.frame_ids as one string, outermost first
	echo "(SELECT string_agg(f.name, ';' ORDER BY u.o) FROM unnest($1) WITH ORDINALITY u(fid, o) JOIN frames f ON f.id = u.fid)"
}

run '{"app": "exp"}'
RUN1=$RUN
RUN_TRUTH=$(stored "SELECT CASE x.kind WHEN 'w' THEN 'wait' ELSE 'run' END || ' ' || $(stack_sql s.frame_ids) AS k,
	sum(x.cost_ns) AS c FROM run_stacks x JOIN stacks s ON s.id = x.stack_id WHERE x.run_id = $RUN1 GROUP BY 1
	HAVING sum(x.cost_ns) > 0")
echo "$RUN_TRUTH" >"$T_TMP/run.truth"
t_match "the run has run and wait stacks" "$RUN_TRUTH" '"run .*"wait |"wait .*"run '

# ---- a run ----
get "/api/v1/runs/$RUN1/profile" "$T_TMP/run.pb.gz"
t_eq "run as pprof: 200, a download" "$HTTP_STATUS $(grep -i '^content-disposition' "$T_TMP/h" | tr -d '\r')" \
	"200 Content-Disposition: attachment; filename=\"run-$RUN1.pb.gz\""
t_eq "run as pprof: every stack's cost, by kind, as stored" "$(chk pprof "$T_TMP/run.pb.gz")" "$RUN_TRUTH"
"$AGENT" import --host back --app back -o "$T_TMP/run.ndjson" "$T_TMP/run.pb.gz" 2>"$T_TMP/err"
t_eq "run as pprof, imported again: the same costs per kind and stack" "$(chk ndjson "$T_TMP/run.ndjson")" "$RUN_TRUTH"
get "/api/v1/runs/$RUN1/profile?format=speedscope" "$T_TMP/run.speedscope.json"
t_eq "run as speedscope: valid, a profile per kind with its total" "$(chk speedscope "$T_TMP/run.speedscope.json")" \
	"$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); r={"run (CPU)":0,"wait":0}
for k,v in d.items(): r["wait" if k.startswith("wait ") else "run (CPU)"] += v
print(json.dumps({k:v for k,v in r.items() if v}, sort_keys=True))' "$T_TMP/run.truth")"
get "/api/v1/runs/$RUN1/profile?format=folded&kind=wait" "$T_TMP/run.folded"
t_eq "run as folded (kind=wait): its stacks and costs, ';' in names as ':'" "$(chk folded "$T_TMP/run.folded")" \
	"$(stored "SELECT (SELECT string_agg(replace(f.name, ';', ':'), ';' ORDER BY u.o) FROM unnest(s.frame_ids)
	WITH ORDINALITY u(fid, o) JOIN frames f ON f.id = u.fid) AS k, sum(x.cost_ns) AS c
	FROM run_stacks x JOIN stacks s ON s.id = x.stack_id WHERE x.run_id = $RUN1 AND x.kind = 'w' GROUP BY 1
	HAVING sum(x.cost_ns) > 0")"
"$AGENT" import --host back --app folded --format folded --sample-period-ns 1 -o "$T_TMP/folded.ndjson" "$T_TMP/run.folded" 2>/dev/null
t_eq "run as folded, imported again (1 ns a count): the same costs per stack" \
	"$(chk ndjson "$T_TMP/folded.ndjson" | "$PY" -c 'import json,sys; print(json.dumps({k[4:]: v for k,v in json.load(sys.stdin).items()}, sort_keys=True, ensure_ascii=False))')" \
	"$(chk folded "$T_TMP/run.folded")"
t_match "folded: the hostile name with ':' for ';', quotes and markup as they are" "$(cat "$T_TMP/run.folded")" \
	'app!a:b "q" <x> & y'

# ---- a cluster ----
CL=$(pg_q "SELECT id FROM clusters WHERE run_id = $RUN1 ORDER BY total_cost_ns DESC LIMIT 1")
KIND=$(pg_q "SELECT CASE kind WHEN 'w' THEN 'wait' ELSE 'run' END FROM clusters WHERE id = $CL")
http GET "$WEB_URL/api/v1/clusters/$CL/stacks" "${AN[@]}"
printf '%s' "$HTTP_BODY" >"$T_TMP/cl.stacks.json"
CL_TRUTH=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); r={}
for c in d["costs"]:
    k=sys.argv[2]+" "+";".join(d["stacks"][c["stack"]])
    if c["cost_ns"]: r[k]=r.get(k,0)+c["cost_ns"]
print(json.dumps(r, sort_keys=True, ensure_ascii=False))' "$T_TMP/cl.stacks.json" "$KIND")
echo "$CL_TRUTH" >"$T_TMP/cl.truth"
get "/api/v1/clusters/$CL/profile?format=pprof" "$T_TMP/cl.pb.gz"
t_eq "cluster as pprof: the cluster's stacks and costs" "$HTTP_STATUS $(chk pprof "$T_TMP/cl.pb.gz")" "200 $CL_TRUTH"
get "/api/v1/clusters/$CL/profile?format=folded" "$T_TMP/cl.folded"
t_eq "cluster as folded: the same total" \
	"$("$PY" -c 'import sys; print(sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[1])))' "$T_TMP/cl.folded")" \
	"$("$PY" -c 'import json,sys; print(sum(json.load(open(sys.argv[1])).values()))' "$T_TMP/cl.truth")"

# ---- a stream: its events, per thread ----
ST_TRUTH=$(stored "SELECT CASE e.kind WHEN 'w' THEN 'wait' ELSE 'run' END || ' ' || e.tid || ' ' || $(stack_sql s.frame_ids) AS k,
	sum(e.dur_ns) AS c FROM events e JOIN streams t ON t.id = e.stream_ref JOIN stacks s ON s.id = e.stack_id
	WHERE t.stream_id = '$SID' GROUP BY 1")
get "/api/v1/streams/$SID/profile" "$T_TMP/st.pb.gz"
t_eq "stream as pprof: its events per thread, kind and stack" "$(chk pprof-threads "$T_TMP/st.pb.gz")" "$ST_TRUTH"
"$AGENT" import --host back --app stream -o "$T_TMP/st.ndjson" "$T_TMP/st.pb.gz" 2>/dev/null
t_eq "stream as pprof, imported again: the same threads, kinds, stacks and costs" \
	"$(chk ndjson-threads "$T_TMP/st.ndjson")" "$ST_TRUTH"
t_match "stream: names come back exactly" "$ST_TRUTH" '"run 8 app!main;app!überprüfe ✓": 300000000, "wait 7 app!main;app!a;b \\"q\\" <x> & y;libc.so.6!read": 400000000'
get "/api/v1/streams/$SID/profile?format=speedscope" "$T_TMP/st.json"
t_eq "stream as speedscope: a profile per thread and kind" "$(chk speedscope "$T_TMP/st.json")" \
	'{"run (CPU), thread 7": 100000000, "run (CPU), thread 8": 300000000, "wait, thread 7": 400000000}'

# ---- a comparison ----
run '{"app": "exp", "filter": {"host": "h-parca-fgprof"}}'
RUN2=$RUN
get "/api/v1/runs/$RUN1/compare/$RUN2/profile?format=folded&kind=run" "$T_TMP/cmp.folded"
chk folded "$T_TMP/cmp.folded" >"$T_TMP/cmp.sum"
t_eq "comparison as folded: A and B side by side, each run's totals" \
	"$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(v for k,v in d.items() if k[0]=="a"), sum(v for k,v in d.items() if k[0]=="b"))' "$T_TMP/cmp.sum")" \
	"$(pg_q "SELECT (SELECT sum(cost_ns) FROM run_stacks WHERE run_id = $RUN1 AND kind = 'r') || ' ' ||
		(SELECT sum(cost_ns) FROM run_stacks WHERE run_id = $RUN2 AND kind = 'r')")"
get "/api/v1/runs/$RUN1/compare/$RUN2/profile" "$T_TMP/cmp.pb.gz"
t_eq "comparison as pprof: a, b and diff = b - a x (B's streams / A's)" "$HTTP_STATUS $(chk pprof "$T_TMP/cmp.pb.gz" | "$PY" -c '
import json, sys
d = json.load(sys.stdin); na, nb = int(sys.argv[1]), int(sys.argv[2]); bad = 0
stacks = {k.split(" ", 1)[1] for k in d}
for s in stacks:
    a, b, diff = d.get("a " + s, 0), d.get("b " + s, 0), d.get("diff " + s, 0)
    bad += diff != b - int(a * nb / na + 0.5)
print("bad", bad, "of", len(stacks) > 0)' \
	"$(pg_q "SELECT counts->>'streams' FROM runs WHERE id = $RUN1")" "$(pg_q "SELECT counts->>'streams' FROM runs WHERE id = $RUN2")")" \
	"200 bad 0 of True"

# ---- speedscope, the viewer, opens them ----
browser_dir=$SM_REPO/tests/browser
command -v node >/dev/null || t_bail "node" "node is not installed (deploy/deps.sh test)"
[ -x "${SM_CHROMIUM:-/usr/bin/chromium}" ] || t_bail "chromium" "chromium is missing (deploy/deps.sh test)"
if [ ! -f "$browser_dir/node_modules/speedscope/package.json" ] ||
	[ ! -f "$browser_dir/node_modules/playwright-core/package.json" ]; then
	(cd "$browser_dir" && npm ci --no-audit --no-fund) >"$T_TMP/npm.log" 2>&1 || {
		sed 's/^/  | /' "$T_TMP/npm.log"
		t_bail "npm ci" "cannot install speedscope and playwright-core into $browser_dir/node_modules"
	}
fi
mkdir -p "$T_TMP/site"
cp -r "$browser_dir/node_modules/speedscope/dist/release/." "$T_TMP/site/"
cp "$T_TMP/run.pb.gz" "$T_TMP/run.speedscope.json" "$T_TMP/run.folded" "$T_TMP/st.pb.gz" "$T_TMP/st.json" "$T_TMP/site/"
port=$(free_port)
"$PY" -m http.server "$port" --bind 127.0.0.1 --directory "$T_TMP/site" >"$T_TMP/http.log" 2>&1 &
http_pid=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/index.html" && break; sleep 0.1; done
(cd "$browser_dir" && node speedscope.mjs "http://127.0.0.1:$port" run.pb.gz run.speedscope.json run.folded \
	st.pb.gz st.json) >"$T_TMP/speedscope.out" 2>"$T_TMP/speedscope.err"
kill "$http_pid" 2>/dev/null
wait "$http_pid" 2>/dev/null
[ -s "$T_TMP/speedscope.out" ] || { sed 's/^/  | /' "$T_TMP/speedscope.err"; t_bail "speedscope" "no answer from the viewer"; }
sv() { # sv FILE EXPR: EXPR (Python) of speedscope's reading of FILE (d)
	"$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["file"] == sys.argv[2]: print(eval(sys.argv[3]))' "$T_TMP/speedscope.out" "$1" "$2"
}
RUN_CPU=$("$PY" -c 'import json,sys; print(sum(v for k,v in json.load(open(sys.argv[1])).items() if k.startswith("run ")))' "$T_TMP/run.truth")
t_eq "speedscope opens the run's pprof: no error, the default type (cpu) in full" \
	"$(sv run.pb.gz '[d["errors"], [p["total"] for p in d["profiles"]]]')" "[[], [$RUN_CPU]]"
t_eq "speedscope opens the run's speedscope file: its profiles and totals" \
	"$(sv run.speedscope.json 'json.dumps({p["name"]: p["total"] for p in d["profiles"]}, sort_keys=True)')" \
	"$(chk speedscope "$T_TMP/run.speedscope.json")"
t_eq "speedscope opens the run's folded file (kind=wait): its total" \
	"$(sv run.folded '[d["errors"], [p["total"] for p in d["profiles"]]]')" \
	"[[], [$("$PY" -c 'import json,sys; print(sum(json.load(open(sys.argv[1])).values()))' <(chk folded "$T_TMP/run.folded"))]]"
t_eq "speedscope opens a stream's pprof: the names exactly, the run time of both threads" \
	"$(sv st.pb.gz '[d["errors"], [p["total"] for p in d["profiles"]], sorted(set(d["frames"]))]')" \
	"[[], [400000000], ['app!main', 'app!überprüfe ✓']]"
t_eq "speedscope opens a stream's speedscope file: a profile per thread and kind, the names exactly" \
	"$(sv st.json '[d["errors"], sorted((p["name"], p["total"]) for p in d["profiles"]), sorted(set(d["frames"]))]')" \
	"[[], [('run (CPU), thread 7', 100000000), ('run (CPU), thread 8', 300000000), ('wait, thread 7', 400000000)], ['app!a;b \"q\" <x> & y', 'app!main', 'app!überprüfe ✓', 'libc.so.6!read']]"

# ---- the pages link to them ----
for page in "/runs/$RUN1|/api/v1/runs/$RUN1/profile" "/clusters/$CL|/api/v1/clusters/$CL/profile" \
	"/streams/$SID|/api/v1/streams/$SID/profile" "/compare?a=$RUN1&b=$RUN2|/api/v1/runs/$RUN1/compare/$RUN2/profile"; do
	http GET "$WEB_URL${page%%|*}" "${AN[@]}"
	t_eq "page ${page%%|*}: links to its profile in the three formats" "$HTTP_STATUS $(grep -oE 'href="[^"]*/profile\?format=[a-z]+" download' <<<"$HTTP_BODY" | tr '\n' ' ')" \
		"200 href=\"${page#*|}?format=pprof\" download href=\"${page#*|}?format=speedscope\" download href=\"${page#*|}?format=folded\" download "
done

# ---- refusals ----
http GET "$WEB_URL/api/v1/runs/$RUN1/profile?format=svg" "${AN[@]}"
t_eq "format=svg: 400" "$HTTP_STATUS $HTTP_BODY" '400 {"error": "format: must be pprof, speedscope or folded"}'$'\n'
http GET "$WEB_URL/api/v1/runs/$RUN1/profile?kind=both" "${AN[@]}"
t_eq "kind=both: 400" "$HTTP_STATUS $HTTP_BODY" '400 {"error": "kind: must be run or wait"}'$'\n'
http GET "$WEB_URL/api/v1/clusters/$CL/profile?colour=red" "${AN[@]}"
t_eq "an unknown parameter: 400" "$HTTP_STATUS $HTTP_BODY" '400 {"error": "colour: unknown parameter"}'$'\n'
http GET "$WEB_URL/api/v1/clusters/999999/profile" "${AN[@]}"
t_eq "no such cluster: 404" "$HTTP_STATUS $HTTP_BODY" '404 {"error": "cluster 999999: no such cluster"}'$'\n'
http GET "$WEB_URL/api/v1/streams/00000000-0000-4000-8000-000000000000/profile" "${AN[@]}"
t_eq "no such stream: 404" "$HTTP_STATUS" 404
http GET "$WEB_URL/api/v1/runs/$RUN1/profile"
t_eq "no token: 401" "$HTTP_STATUS" 401

t_done
