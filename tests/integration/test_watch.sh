#!/usr/bin/env bash
# watch: scheduled runs and alert rules (docs/analysis.md, "Watching"). A schedule
# made through the API is taken by `sm-miner worker --once` when due: the run has
# the schedule's window; the rules on it (a signature's cost per hour over a limit,
# a cluster new since the previous run) make alerts that go to a webhook (a real
# HTTP server on loopback that refuses the first delivery: retried with backoff);
# refusals name the field; the Alerts page lists them.
. "$(dirname "$0")/../lib.sh"

genfleet=${SM_GENFLEET:-$SM_BIN_DIR/../tests/genfleet}
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
ADMIN=$(mk_token admin 2>/dev/null)
AN=$(mk_token analyst 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"
"$genfleet" --streams 300 --regression-conf --seed 1 --out "$T_TMP/fleet.ndjson" --truth "$T_TMP/truth.json" ||
	t_bail "genfleet"
SM_TOKEN=$TOKEN "$SM_BIN_DIR/sm-agent" ship --url "$INGEST_URL" --spool "$T_TMP/spool" "$T_TMP/fleet.ndjson" \
	>"$T_TMP/ship.out" 2>&1 || t_bail "sm-agent ship" "$(cat "$T_TMP/ship.out")"
stop_ingest
# the webhook below listens on 127.0.0.1: allowed by the servers' --webhook-allow, else refused
start_web --no-worker --webhook-allow 127.0.0.1/32 || t_bail "sm-web starts"

# the webhook: records every body; refuses the first request with a 503
cat >"$T_TMP/hook.py" <<'PY'
import http.server, sys
seen = []
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        seen.append(body)
        code = 503 if len(seen) == 1 else 200
        with open(sys.argv[2], "ab") as f:
            f.write(b"%d %s\n" % (code, body))
        self.send_response(code)
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
"$py" "$T_TMP/hook.py" "$T_TMP/hook.port" "$T_TMP/hook.log" &
HOOK_PID=$!
t_cleanup "kill $HOOK_PID"
for _ in $(seq 50); do [ -s "$T_TMP/hook.port" ] && break; sleep 0.1; done
HOOK=http://127.0.0.1:$(cat "$T_TMP/hook.port")/hook

api() { # api METHOD PATH TOKEN [BODY]
	if [ $# -ge 4 ]; then
		http "$1" "$WEB_URL$2" -H "Authorization: Bearer $3" -H "Content-Type: application/json" --data-binary "$4"
	else
		http "$1" "$WEB_URL$2" -H "Authorization: Bearer $3"
	fi
}
j() { printf '%s' "$HTTP_BODY" | "$py" -c "import json, sys; j = json.load(sys.stdin); print($1)"; }

# ---- refusals ----
api POST /api/v1/schedules "$AN" '{"app": "checkout", "kind": "run", "every_s": 600, "window_s": 3600}'
t_eq "schedules: an admin's" "$HTTP_STATUS $(j 'j["error"]')" "403 schedules are an admin's"
api POST /api/v1/schedules "$ADMIN" '{"app": "checkout", "kind": "run", "every_s": 10, "window_s": 3600}'
t_eq "schedules: every_s in range" "$HTTP_STATUS $(j 'j["error"]')" \
	"400 every_s: a whole number from 60 to 604800"
api POST /api/v1/schedules "$ADMIN" '{"app": "checkout", "kind": "run", "every_s": 600, "window_s": 3600, "params": {"cut": 7}}'
t_eq "schedules: the run parameters are checked" "$HTTP_STATUS $(j 'j["error"]')" "400 params: cut: must be from 0 to 1"
api POST /api/v1/schedules "$ADMIN" '{"app": "checkout", "kind": "run", "every_s": 600, "window_s": 3600, "params": {"filter": {"since": "2026-01-01T00:00:00Z"}}}'
t_eq "schedules: the window is the schedule's" "$HTTP_STATUS $(j 'j["error"]')" "400 params.filter: since and until come from window_s"
api POST /api/v1/alert-rules "$ADMIN" "{\"name\": \"x\", \"type\": \"signature_cost\", \"limit_ns_per_hour\": 1, \"webhook\": \"$HOOK\"}"
t_eq "alert rules: a signature for signature_cost" "$HTTP_STATUS $(j 'j["error"]')" "400 signature_id: required for signature_cost"
api POST /api/v1/alert-rules "$ADMIN" '{"name": "x", "type": "new_cluster", "min_share": 0.1, "webhook": "ftp://x"}'
t_eq "alert rules: an http(s) webhook" "$HTTP_STATUS $(j 'j["error"]')" "400 webhook: required, an http:// or https:// URL of at most 2048 bytes"
api POST /api/v1/alert-rules "$ADMIN" "{\"name\": \"x\", \"type\": \"signature_cost\", \"signature_id\": 999, \"limit_ns_per_hour\": 1, \"webhook\": \"$HOOK\"}"
t_eq "alert rules: an existing signature" "$HTTP_STATUS $(j 'j["error"]')" "400 signature_id: no such signature"
# internal targets: refused when the rule is made, naming the field (only 127.0.0.1 is allowed here)
WH_REFUSED="400 webhook: a loopback, link-local, private or otherwise internal address is not allowed (the server's --webhook-allow lists the exceptions)"
for hook in http://169.254.169.254/latest/meta-data/ http://10.0.0.1/hook "http://127.0.0.2:$(cat "$T_TMP/hook.port")/" \
	http://[::1]:5432/ http://[::ffff:127.0.0.2]:5432/ http://2130706434:5432/ "http://x:y@192.168.0.1/"; do
	api POST /api/v1/alert-rules "$ADMIN" "{\"name\": \"internal\", \"type\": \"new_cluster\", \"min_share\": 0.1, \"webhook\": \"$hook\"}"
	t_eq "alert rules: an internal webhook $hook: refused" "$HTTP_STATUS $(j 'j["error"]')" "$WH_REFUSED"
done
t_eq "alert rules: none of them made" "$(pg_q "SELECT count(*) FROM alert_rules")" 0
# credentials in a webhook: shown to admins, redacted for analysts (API and page)
api POST /api/v1/alert-rules "$ADMIN" "{\"name\": \"with credentials\", \"app\": \"none-such\", \"type\": \"new_cluster\", \"min_share\": 0.5, \"webhook\": \"https://bob:s3cr3t@hooks.example.com/x?api_key=k3y&channel=ops&Token=t0k\"}"
t_eq "alert rules: one with credentials made" "$HTTP_STATUS" 201
CRED_ID=$(j 'j["rule_id"]')
api GET /api/v1/alert-rules "$ADMIN"
t_eq "alert rules: an admin reads the webhook whole" "$(j 'j["rules"][0]["webhook"]')" \
	"https://bob:s3cr3t@hooks.example.com/x?api_key=k3y&channel=ops&Token=t0k"
api GET /api/v1/alert-rules "$AN"
t_eq "alert rules: an analyst reads it redacted" "$HTTP_STATUS $(j 'j["rules"][0]["webhook"]')" \
	"200 https://***@hooks.example.com/x?api_key=***&channel=ops&Token=***"
api GET /alerts "$AN"
t_eq "alert rules: the Alerts page redacts it for an analyst" \
	"$HTTP_STATUS $(grep -c 's3cr3t\|k3y\|t0k\|bob' <<<"$HTTP_BODY") $(grep -c 'https://\*\*\*@hooks.example.com' <<<"$HTTP_BODY")" "200 0 1"
api DELETE "/api/v1/alert-rules/$CRED_ID" "$ADMIN"

# ---- a signature of the regression, the rules, a schedule over checkout 2.4.0 ----
sig_frames=$("$py" -c 'import json, sys; t = json.load(open(sys.argv[1]))
print(json.dumps(next(b for b in t["bugs"] if b["version"] == "2.4.0")["frames"]))' "$T_TMP/truth.json")
api POST /api/v1/signatures "$ADMIN" "{\"name\": \"product cache rebuild\", \"frames\": $sig_frames}"
SIG=$(j 'j["signature_id"]')
api POST /api/v1/alert-rules "$ADMIN" "{\"name\": \"cache rebuild over 1 s/h\", \"app\": \"checkout\", \"type\": \"signature_cost\", \"signature_id\": $SIG, \"limit_ns_per_hour\": 1000000000, \"webhook\": \"$HOOK\"}"
t_eq "alert rules: made" "$HTTP_STATUS" 201
api POST /api/v1/alert-rules "$ADMIN" "{\"name\": \"new clusters\", \"app\": \"checkout\", \"type\": \"new_cluster\", \"min_share\": 0.05, \"webhook\": \"$HOOK\"}"
# the previous run: checkout 2.3.1, mined by hand
n=$(pg_q "SELECT count(*) FROM streams WHERE app = 'checkout' AND version = '2.3.1'")
prev=$("$SM_BIN_DIR/sm-miner" run --quiet --app checkout --kind run --version 2.3.1 --threshold-ns $((n * 300 * 100000)) 2>/dev/null)
n=$(pg_q "SELECT count(*) FROM streams WHERE app = 'checkout' AND version = '2.4.0'")
api POST /api/v1/schedules "$ADMIN" "{\"app\": \"checkout\", \"kind\": \"run\", \"every_s\": 600, \"window_s\": 3600, \"params\": {\"threshold_ns\": $((n * 300 * 100000)), \"filter\": {\"version\": \"2.4.0\"}}}"
t_eq "schedules: made" "$HTTP_STATUS" 201
SCHED=$(j 'j["schedule_id"]')
"$SM_BIN_DIR/sm-miner" worker --once --webhook-allow 127.0.0.0/8 >"$T_TMP/worker.log" 2>&1 || t_fail "sm-miner worker --once" "$(cat "$T_TMP/worker.log")"
t_eq "schedules: a due schedule's run, over its window, done" \
	"$(pg_q "SELECT r.status, r.params->'filter'->>'version', (r.params->'filter'->>'until')::timestamptz
	          - (r.params->'filter'->>'since')::timestamptz, s.last_run = r.id, s.next_at > now() + interval '9 minutes'
	         FROM runs r JOIN schedules s ON s.id = r.schedule_id WHERE s.id = $SCHED")" "done|2.4.0|01:00:00|t|t"
run=$(pg_q "SELECT last_run FROM schedules WHERE id = $SCHED")
t_eq "alerts: the signature's cost per hour over its limit (its first delivery refused)" \
	"$(pg_q "SELECT a.delivery, a.attempts, a.last_error, a.next_attempt_at BETWEEN now() + interval '20 s' AND now() + interval '40 s',
	         a.payload->>'value' > '1000000000', a.message ~ '^signature product cache rebuild costs [0-9.]+ s per hour in run [0-9]+'
	        FROM alerts a JOIN alert_rules r ON r.id = a.rule_id WHERE a.run_id = $run AND r.type = 'signature_cost'")" \
	"pending|1|HTTP 503|t|t|t"
t_eq "alerts: the regression's cluster is new since 2.3.1, and delivered" \
	"$(pg_q "SELECT bool_and(a.delivery = 'delivered' AND a.attempts = 1), bool_or(EXISTS (SELECT 1 FROM clusters c
	          JOIN patterns p ON p.id = ANY(c.members), unnest(p.frame_ids) x JOIN frames f ON f.id = x
	          WHERE c.id = a.cluster_id AND f.name LIKE '%ProductCache::rebuild_index'))
	        FROM alerts a JOIN alert_rules r ON r.id = a.rule_id WHERE a.run_id = $run AND r.type = 'new_cluster'")" "t|t"
# the retry: due now, delivered on the second attempt; nothing twice
pg_q "UPDATE alerts SET next_attempt_at = now() WHERE delivery = 'pending'" >/dev/null
nalerts=$(pg_q "SELECT count(*) FROM alerts")
"$SM_BIN_DIR/sm-miner" worker --once --webhook-allow 127.0.0.0/8 >>"$T_TMP/worker.log" 2>&1 || t_fail "sm-miner worker --once (again)"
t_eq "alerts: retried and delivered, none made twice, no run queued before the schedule is due" \
	"$(pg_q "SELECT count(*) = $nalerts, bool_and(delivery = 'delivered'), max(attempts) FROM alerts")|$(pg_q "SELECT count(*) FROM runs")" \
	"t|t|2|2"
t_eq "webhook: every body as JSON, the refused one again" \
	"$("$py" - "$T_TMP/hook.log" <<-'PY'
	import json, sys
	lines = [l.split(" ", 1) for l in open(sys.argv[1]).read().splitlines()]
	bodies = [json.loads(b) for _, b in lines]
	print([c for c, _ in lines][0], sorted(set(k for b in bodies for k in b)), bodies[0] == bodies[-1], len(lines))
	PY
	)" "503 ['app', 'cluster_id', 'limit', 'message', 'rule', 'run_id', 'type', 'value'] True $((nalerts + 1))"
api GET "/api/v1/alerts?limit=1" "$AN"
t_eq "alerts: listed by the API, newest first" "$HTTP_STATUS $(j 'len(j["alerts"]), j["alerts"][0]["delivery"]')" "200 1 delivered"
api GET /alerts "$AN"
t_match "alerts: the Alerts page lists alerts, rules and schedules" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<h1>Alerts</h1>.*<table id="alerts">.*signature product cache rebuild costs.*<table id="rules">.*cache rebuild over 1 s/h.*<table id="schedules">.*checkout'
t_eq "alerts: a new cluster's value and limit are shares of the run's cost" \
	"$(pg_q "SELECT bool_and((payload->>'value')::float8 BETWEEN 0.05 AND 1 AND (payload->>'limit')::float8 = 0.05)
	        FROM alerts WHERE cluster_id IS NOT NULL")" t
# two signature alerts of one rule outlive their runs (runs expire, or are deleted)
pg_q "INSERT INTO alerts (rule_id, run_id, message, payload, delivery) SELECT rule_id, $prev, 'earlier', '{}', 'delivered'
	FROM alerts WHERE run_id = $run AND cluster_id IS NULL" >/dev/null
api DELETE "/api/v1/runs/$prev" "$ADMIN"
s1=$HTTP_STATUS
api DELETE "/api/v1/runs/$run" "$ADMIN"
t_eq "alerts: their runs can be deleted, the alerts stay" "$s1 $HTTP_STATUS $(pg_q "SELECT count(*) FROM alerts WHERE run_id IS NULL AND cluster_id IS NULL")" "200 200 2"
api DELETE "/api/v1/schedules/$SCHED" "$ADMIN"
t_eq "schedules: deleted" "$HTTP_STATUS $(j 'j["deleted"]')" "200 True"
api DELETE "/api/v1/schedules/$SCHED" "$ADMIN"
t_eq "schedules: deleted once" "$HTTP_STATUS $(j 'j["error"]')" "404 schedule $SCHED: none"

# ---- delivery: refused addresses are never connected to, whatever the rule says ----
# rules made before the check existed (straight into the table): the webhook that listens, a name
# that resolves to it, and a port where nothing listens; alerts due for each
HP=$(cat "$T_TMP/hook.port")
pg_q "INSERT INTO alert_rules (name, type, min_share, webhook) VALUES
	('listening', 'new_cluster', 0.5, 'http://127.0.0.1:$HP/hook'), ('by name', 'new_cluster', 0.5, 'http://localhost:$HP/hook'),
	('closed', 'new_cluster', 0.5, 'http://127.0.0.1:1/hook');
	INSERT INTO alerts (rule_id, message, payload) SELECT id, name, '{}' FROM alert_rules
	WHERE name IN ('listening', 'by name', 'closed')" >/dev/null
hooked=$(wc -l <"$T_TMP/hook.log")
"$SM_BIN_DIR/sm-miner" worker --once >>"$T_TMP/worker.log" 2>&1 || t_fail "sm-miner worker --once (no --webhook-allow)"
t_eq "delivery: without --webhook-allow nothing reaches 127.0.0.1 (a literal or a name resolving to it)" \
	"$(wc -l <"$T_TMP/hook.log")" "$hooked"
t_eq "delivery: the same error whether something listens there or not (no oracle)" \
	"$(pg_q "SELECT string_agg(r.name || ': ' || a.delivery || ', ' || a.last_error, '; ' ORDER BY r.name)
	         FROM alerts a JOIN alert_rules r ON r.id = a.rule_id WHERE r.name IN ('listening', 'by name', 'closed')")" \
	"by name: pending, not delivered: the webhook's address is not allowed (--webhook-allow); closed: pending, not delivered: the webhook's address is not allowed (--webhook-allow); listening: pending, not delivered: the webhook's address is not allowed (--webhook-allow)"
pg_q "UPDATE alerts SET next_attempt_at = now() WHERE delivery = 'pending'" >/dev/null
"$SM_BIN_DIR/sm-miner" worker --once --webhook-allow 127.0.0.0/8 >>"$T_TMP/worker.log" 2>&1 ||
	t_fail "sm-miner worker --once (--webhook-allow 127.0.0.0/8)"
t_eq "delivery: allowed, the listening webhook and the name get theirs; a closed port a generic error" \
	"$(pg_q "SELECT string_agg(r.name || ': ' || a.delivery || ', ' || coalesce(a.last_error, '-'), '; ' ORDER BY r.name)
	         FROM alerts a JOIN alert_rules r ON r.id = a.rule_id WHERE r.name IN ('listening', 'by name', 'closed')")|$(( $(wc -l <"$T_TMP/hook.log") - hooked ))" \
	"by name: delivered, -; closed: pending, not delivered: no answer from the webhook; listening: delivered, -|2"
t_done
