#!/usr/bin/env bash
# web_browser: the dashboard in a real browser. Headless Chromium (Debian's,
# driven by playwright-core from tests/browser/) logs in, starts a run with the
# run form and waits for sm-web's embedded worker to mine it, sorts and filters
# the clusters, opens a cluster (common part, alignment, breakdowns, flame graph
# and its zoom), creates a signature and edits it, shows coverage and triage,
# opens a stream's timeline and logs out. Frames, host and labels of an app of
# their own ("xssapp") carry markup and quotes, and are checked to be shown as
# text and never run, under the Content-Security-Policy (no violation allowed).
#
# The data: a generated fleet (genfleet, 60 streams, apps checkout and search)
# and three hand-built xssapp streams, mined by sm-miner before sm-web starts.
# The browser scenario is tests/browser/dashboard.test.mjs: it prints
# "ok NAME" or "FAIL NAME: WHY" per check, each becomes a check here, and the
# number of checks is asserted (a scenario cut short is a failure). Full-page
# screenshots of each step go to BUILD_DIR/test-logs/screens/ (SM_SCREENS: elsewhere).
#
# Needs node (18 or later: Debian 12 has 18) and npm, and Chromium (SM_CHROMIUM, default
# /usr/bin/chromium; deploy/deps.sh test installs them); playwright-core is
# installed into tests/browser/node_modules with `npm ci` when it is missing.
. "$(dirname "$0")/../lib.sh"

# the number of checks the browser scenario makes when it runs to the end
BROWSER_CHECKS=64

browser_dir=$SM_REPO/tests/browser
chromium=${SM_CHROMIUM:-/usr/bin/chromium}
genfleet=$SM_BIN_DIR/../tests/genfleet
screens=${SM_SCREENS:-$SM_BIN_DIR/../test-logs/screens}

# --- the tools: node, npm, chromium, playwright-core ---
command -v node >/dev/null || t_bail "node" "node is not installed (deploy/deps.sh test, or apt-get install nodejs npm)"
command -v npm >/dev/null || t_bail "npm" "npm is not installed (deploy/deps.sh test, or apt-get install npm)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] 2>/dev/null || t_bail "node" "node $(node --version) is too old: playwright-core needs 18 or later"
[ -x "$chromium" ] || t_bail "chromium" "$chromium is missing (deploy/deps.sh test, or apt-get install chromium; SM_CHROMIUM names another)"
if [ ! -f "$browser_dir/node_modules/playwright-core/package.json" ]; then
	(cd "$browser_dir" && npm ci --no-audit --no-fund) >"$T_TMP/npm.log" 2>&1 || {
		sed 's/^/  | /' "$T_TMP/npm.log"
		t_bail "npm ci" "cannot install playwright-core into $browser_dir/node_modules"
	}
fi
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"

# --- the data ---
sm_admin migrate >/dev/null || t_bail "migrate"
INGEST_TOKEN=$(mk_token ingest 2>/dev/null)
ANALYST_TOKEN=$(mk_token analyst 2>/dev/null)
ADMIN_TOKEN=$(mk_token admin 2>/dev/null)
[ -n "$ANALYST_TOKEN" ] && [ -n "$ADMIN_TOKEN" ] || t_bail "tokens"
start_ingest || t_bail "sm-ingest starts"

"$genfleet" --streams 60 --seed 3 --out "$T_TMP/fleet.ndjson" || t_bail "genfleet"
SM_TOKEN=$INGEST_TOKEN "$SM_BIN_DIR/sm-agent" ship --url "$INGEST_URL" --spool "$T_TMP/spool" "$T_TMP/fleet.ndjson" \
	>"$T_TMP/ship.out" 2>&1 || { sed 's/^/  | /' "$T_TMP/ship.out"; t_bail "sm-agent ship"; }
t_eq "fleet stored" "$(pg_q 'SELECT count(*) FROM streams')" 60

# xss_stream ID: thread 1 waits 0.5 ms on a lock (inside the frames with markup)
# that thread 2 holds while it computes in one of them; thread 3 idles. The
# host, version and a label carry markup too.
xss_stream() {
	printf '{"v":1,"stream_id":"%s","host":"h<svg onload=window.__xss=3>","app":"xssapp",' "$1"
	printf '"version":"1.0 \\"v\\" <b>&amp;</b>","labels":{"note":"<img src=x onerror=window.__xss=2>"},'
	printf '"symptom":{"kind":"unit_violation","tid":1,"start_ns":1000000,"end_ns":2000000},'
	printf '"frames":["xssapp!main","xssapp!<script>window.__xss=1</script>",'
	printf '"xssapp!\\"quoted\\" & '"'"'single'"'"'","libstdc++.so.6!std::map<K, V>::find",'
	printf '"xssapp!worker","xssapp!idle","libc.so.6!epoll_wait"],'
	printf '"stacks":[[0,1,2,3],[0,4,1],[0,5,6]],"events":['
	printf '{"kind":"wait","tid":1,"ts_ns":1000000,"dur_ns":500000,"stack":0,"readier_tid":2},'
	printf '{"kind":"run","tid":2,"ts_ns":1100000,"dur_ns":300000,"stack":1},'
	printf '{"kind":"wait","tid":3,"ts_ns":1000000,"dur_ns":900000,"stack":2,"readier_tid":0}]}\n'
}
# the fourth: bidirectional controls in host and version (U+202E would show "evil" + "txt.exe"
# reversed), a label value of 255 characters (the most a label may have) and a key of 200, no
# space in either
bidi_stream() {
	local long key
	long=$(printf 'x%.0s' {1..255})
	key=$(printf 'k%.0s' {1..200})
	xss_stream "$1" | sed -e 's/"host":"h<svg onload=window.__xss=3>"/"host":"evil\\u202eexe.txt"/' \
		-e 's/"version":"1.0 \\"v\\" <b>&amp;<\/b>"/"version":"2.0\\u2067"/' \
		-e "s/\"labels\":{[^}]*}/\"labels\":{\"long\":\"$long\",\"$key\":\"v\"}/"
}
for id in 5ec0de00-0000-4000-8000-000000000001 5ec0de00-0000-4000-8000-000000000002 \
	5ec0de00-0000-4000-8000-000000000003; do
	xss_stream "$id"
done >"$T_TMP/xss.ndjson"
bidi_stream 5ec0de00-0000-4000-8000-000000000004 >>"$T_TMP/xss.ndjson"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST_TOKEN" \
	-H 'Content-Type: application/x-ndjson' --data-binary "@$T_TMP/xss.ndjson"
t_eq "xssapp streams stored" "$HTTP_BODY" '{"accepted":4,"duplicates":0,"rejected":[]}'
t_eq "the bidi stream's host" "$(pg_q "SELECT host = 'evil' || U&'\\202E' || 'exe.txt' FROM streams WHERE app = 'xssapp'
	AND stream_id = '5ec0de00-0000-4000-8000-000000000004'")" t
# app bi, whose cost has two modes and steps with a numeric label (costmodel_streams.py)
python3 "$(dirname "$0")/costmodel_streams.py" "$T_TMP/bi.ndjson" bi || t_bail "costmodel_streams.py"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST_TOKEN" \
	-H 'Content-Type: application/x-ndjson' --data-binary "@$T_TMP/bi.ndjson"
t_eq "bi streams stored" "$HTTP_BODY" '{"accepted":50,"duplicates":0,"rejected":[]}'
stop_ingest
BI_RUN=$("$SM_BIN_DIR/sm-miner" run --quiet --app bi --kind run --aoi thread --threshold-ns 10000000 2>"$T_TMP/miner.err") ||
	{ sed 's/^/  | /' "$T_TMP/miner.err"; t_bail "sm-miner run --app bi"; }
BI_CLUSTER=$(pg_q "SELECT id FROM clusters WHERE run_id = $BI_RUN ORDER BY rank_total_cost LIMIT 1")

XSS_RUN=$("$SM_BIN_DIR/sm-miner" run --quiet --app xssapp --threshold-ns 800000 2>"$T_TMP/miner.err") ||
	{ sed 's/^/  | /' "$T_TMP/miner.err"; t_bail "sm-miner run --app xssapp"; }
# the lock wait and the holder's CPU, each in the frames with markup
t_eq "xssapp: two clusters" "$(pg_q "SELECT counts->>'clusters' FROM runs WHERE id = $XSS_RUN")" 2
# for the Compare picker: a second run of xssapp's kind, and one of its wait events only
xss_copy() { pg_q "INSERT INTO runs (params, status, counts, finished_at) SELECT params || :'p'::jsonb, 'done', counts, now()
	FROM runs WHERE id = $XSS_RUN RETURNING id" -v p="$1" | head -n 1; }
XSS_RUN2=$(xss_copy '{}')
XSS_WAIT=$(xss_copy '{"kind": "wait"}')

# the run the browser starts: bugs that hit 10% of checkout's streams for 0.15 s
napp=$(pg_q "SELECT count(*) FROM streams WHERE app = 'checkout'")
THRESHOLD_NS=$((napp * 150 * 100000))

# a run being mined for the whole scenario: its heartbeat (in the future, so that no worker takes it
# over) and the progress it wrote
LIVE_RUN=$(pg_q "INSERT INTO runs (status, params, started_at, heartbeat_at, worker, progress) VALUES ('running',
	'{\"app\": \"xssapp\"}', now(), now() + interval '1 hour', 'browser-test:1', '{\"phase\": \"reading events and extracting the AOI\",
	\"streams_read\": 412, \"streams\": 689, \"aoi_events\": 0, \"distinct_stacks\": 0, \"patterns\": 0}') RETURNING id")

# the streams page's time range: the xssapp streams came two days ago
pg_q "UPDATE streams SET received_at = received_at - interval '2 days' WHERE app = 'xssapp'" >/dev/null

# --- the browser ---
start_web --threads 4 || t_bail "sm-web starts"
rm -rf "$screens"
mkdir -p "$screens"
SM_WEB_URL=$WEB_URL SM_ANALYST_TOKEN=$ANALYST_TOKEN SM_ADMIN_TOKEN=$ADMIN_TOKEN SM_APP=checkout SM_THRESHOLD_NS=$THRESHOLD_NS \
	SM_XSS_RUN=$XSS_RUN SM_XSS_RUN2=$XSS_RUN2 SM_XSS_WAIT=$XSS_WAIT SM_LIVE_RUN=$LIVE_RUN SM_BI_CLUSTER=$BI_CLUSTER SM_SCREENS=$screens \
	SM_CHROMIUM=$chromium \
	node "$browser_dir/dashboard.test.mjs" >"$T_TMP/browser.out" 2>"$T_TMP/browser.err"
rc=$?
n=0
nfail=0
while IFS= read -r line; do
	case $line in
	"ok "*) t_ok "browser: ${line#ok }"; n=$((n + 1)) ;;
	"FAIL "*) line=${line#FAIL }; t_fail "browser: ${line%%: *}" "${line#*: }"; n=$((n + 1)); nfail=$((nfail + 1)) ;;
	*) echo "  | $line" ;;
	esac
done <"$T_TMP/browser.out"
if [ -s "$T_TMP/browser.err" ]; then
	echo "browser scenario's standard error:"
	sed 's/^/  | /' "$T_TMP/browser.err"
fi
t_eq "browser: scenario exit status" "$rc" "$([ "$nfail" -eq 0 ] && echo 0 || echo 1)"
t_eq "browser: number of checks" "$n" "$BROWSER_CHECKS"
t_eq "browser: screenshots taken" "$(find "$screens" -name '*.png' -size +1k | wc -l)" 27

stop_web
t_eq "sm-web: no 5xx answered" "$(grep -c 'status=5' "$WEB_LOG")" 0
t_done
