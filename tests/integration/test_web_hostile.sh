#!/usr/bin/env bash
# web hostile input: seeded random malformed requests (web_hostile.py: bad paths,
# escapes of every byte, invalid UTF-8, NULs, huge numbers, SQL and markup,
# 5 KB values, nested JSON, broken framing, cookie writes without or with wrong
# CSRF tokens and Origins) against the sanitizer build of sm-web over a
# database with data. The server answers each (no 5xx but 503, no hang), stays
# up, reports no sanitizer error, and the data it holds is unchanged.
. "$(dirname "$0")/../lib.sh"

py=/usr/bin/python3
[ -x "$py" ] || py=python3
sm_admin migrate >/dev/null || t_bail "migrate"
ANALYST=$(mk_token analyst 2>/dev/null)
INGEST=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"
for i in 1 2 3; do
	printf '{"v":1,"stream_id":"%s","host":"h","app":"hostile","version":"1",' "$(cat /proc/sys/kernel/random/uuid)"
	printf '"symptom":{"kind":"unit_violation","tid":1,"start_ns":1000,"end_ns":2000},'
	printf '"frames":["app!main","app!<b>x</b>","libc!wait"],"stacks":[[0,1,2],[0,1]],"events":['
	printf '{"kind":"wait","tid":1,"ts_ns":1000,"dur_ns":500,"stack":0,"readier_tid":2},'
	printf '{"kind":"run","tid":2,"ts_ns":1100,"dur_ns":300,"stack":1}]}\n'
done >"$T_TMP/fleet.ndjson"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/x-ndjson' \
	--data-binary "@$T_TMP/fleet.ndjson"
t_eq "streams stored" "$HTTP_STATUS" 200
stop_ingest
"$SM_BIN_DIR/sm-miner" run --quiet --app hostile --threshold-ns 100 >/dev/null 2>&1 || t_bail "mining"
before=$(pg_q "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM signatures), (SELECT count(*) FROM clusters)")

start_web --no-worker --max-body 64k || t_bail "sm-web starts"
port=${WEB_URL##*:}
http GET "$WEB_URL/api/v1/streams?host=%ff" -H "Authorization: Bearer $ANALYST"
t_eq "a query parameter that is not UTF-8" "$HTTP_STATUS $HTTP_BODY" $'400 {"error": "host: a query parameter must be UTF-8"}\n'
http GET "$WEB_URL/streams?host=%C3%28" -H "Authorization: Bearer $ANALYST"
t_eq "the same on a page" "$HTTP_STATUS" 400
http POST "$WEB_URL/login" -H 'Content-Type: application/x-www-form-urlencoded' --data-urlencode "token=$ANALYST"
SESSION=$(grep -i '^Set-Cookie: ' <<<"${HTTP_HEADERS//$'\r'/}" | cut -d' ' -f2 | cut -d';' -f1)
t_match "a browser session for the cookie requests" "$SESSION" '^sm_session=sms_'
IDS=$(pg_q "SELECT string_agg(stream_id::text, ',') FROM streams")
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$WEB_PID/status"; }
"$py" "$SM_REPO/tests/integration/web_hostile.py" 127.0.0.1 "$port" "$ANALYST" 400 7 "$SESSION" "$IDS" >"$T_TMP/hostile.out" 2>&1
sed 's/^/  /' "$T_TMP/hostile.out"
t_match "every hostile request answered, none 5xx but 503" "$(head -n 1 "$T_TMP/hostile.out")" \
	'^requests 400, .* problems 0$'
# the same battery twice more: what the server holds must not grow with the requests it answered
rss1=$(rss_kb)
for seed in 8 9; do
	"$py" "$SM_REPO/tests/integration/web_hostile.py" 127.0.0.1 "$port" "$ANALYST" 400 "$seed" "$SESSION" "$IDS" \
		>"$T_TMP/hostile.$seed.out" 2>&1
	t_match "seed $seed: every hostile request answered, none 5xx but 503" "$(head -n 1 "$T_TMP/hostile.$seed.out")" \
		'^requests 400, .* problems 0$'
done
rss2=$(rss_kb)
echo "  sm-web resident: ${rss1} kB after the first 400 requests, ${rss2} kB after 800 more"
t_eq "sm-web's memory after 800 more hostile requests: under 32 MB more" "$(( rss2 - rss1 < 32768 ))" 1
t_ok_alive=$(t_alive "$WEB_PID" && echo yes)
t_eq "sm-web is still running" "$t_ok_alive" yes
http GET "$WEB_URL/healthz"
t_eq "and healthy" "$HTTP_STATUS $HTTP_BODY" $'200 ok\n'
# strict framing (RFC 9112): refused with 400 and the connection closed before any body is read,
# so that a request smuggled behind the body never runs
raw() { "$SM_REPO/tests/integration/raw_http.py" 127.0.0.1 "$port" 3; }
run_req() { # run_req APP [FRAMING-HEADERS]: POST /api/v1/runs of app APP (framed by its length by default)
	local body="{\"app\": \"$1\"}"
	printf 'POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n%s' \
		"$port" "$ANALYST" "${2:-Content-Length: ${#body}$'\r\n'}" "$body"
}
inner=$(run_req smuggled)
first='{"app": "first"}'
got=$( { run_req first "Content-Length: ${#first}"$'\r\n'"Content-Length: $((${#first} + ${#inner}))"$'\r\n'
	printf '%s' "$inner"; } | raw)
t_eq "framing: two different Content-Length: 400, closed" "$got" \
	$'400 closed\n{"error": "Content-Length: more than one"}'
got=$( { run_req first "Content-Length: ${#first}"$'\r\n'"Transfer-Encoding: chunked"$'\r\n'
	printf '%s' "$inner"; } | raw)
t_eq "framing: Content-Length with Transfer-Encoding: 400, closed" "$got" \
	$'400 closed\n{"error": "Content-Length: not allowed with Transfer-Encoding"}'
got=$(printf 'GET /healthz HTTP/1.1\r\n\r\n' | raw)
t_eq "framing: HTTP/1.1 without Host: 400, closed" "$got" \
	$'400 closed\n{"error": "Host: missing (HTTP/1.1 requires it)"}'
got=$(printf 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n' | raw)
t_eq "framing: two Host headers: 400, closed" "$got" $'400 closed\n{"error": "Host: more than one"}'
# fields read as one value, sent twice: the server and a proxy in front could each use another
got=$(run_req first "Authorization: Bearer sm_not_a_token"$'\r\n'"Content-Length: ${#first}"$'\r\n' | raw)
t_eq "framing: two Authorization headers: 400, closed" "$got" \
	$'400 closed\n{"error": "Authorization: more than one"}'
got=$(run_req first "Content-Type: text/plain"$'\r\n'"Content-Length: ${#first}"$'\r\n' | raw)
t_eq "framing: two Content-Type headers: 400, closed" "$got" \
	$'400 closed\n{"error": "Content-Type: more than one"}'
got=$(run_req framed | raw)
t_eq "framing: a run framed once is taken" "${got%%$'\n'*}" "202 open"
t_eq "framing: the refused and the smuggled runs were never queued" \
	"$(pg_q "SELECT string_agg(params->>'app', ',' ORDER BY id) FROM runs WHERE params->>'app' IN ('first', 'smuggled', 'framed')")" framed
# /healthz and /metrics take GET and HEAD; OPTIONS is answered 204, other methods 405, with Allow
t_probe_methods "$WEB_URL" -H "Authorization: Bearer $ANALYST"
# after a login, only a path of this origin as browsers parse it (WHATWG URL): "/\t/evil.example"
# is "//evil.example" to them; anything else goes to "/". The query of the page asked for is kept.
location() { grep -i '^location: ' <<<"$HTTP_HEADERS" | sed 's/^[Ll]ocation: //' | tr -d '\r'; }
for n in %2F%09%2Fevil.example %2F%0B%2Fevil.example %2F%0C%2Fevil.example %2F%1F%2Fevil.example \
	%2F%7F%2Fevil.example %2F%2Fevil.example %2F%5Cevil.example %2F%20%2Fevil.example %2Fruns%5C..%5C%5Cevil.example \
	https%3A%2F%2Fevil.example %09%2F%2Fevil.example; do
	http POST "$WEB_URL/login" -H 'Content-Type: application/x-www-form-urlencoded' --data-binary "token=$ANALYST&next=$n"
	t_eq "login: next=$n goes to /" "$HTTP_STATUS $(location)" "303 /"
done
http GET "$WEB_URL/runs/2?sort=streams&q=a%20b"
t_eq "login: a page asked for without a token keeps its query in next" "$HTTP_STATUS $(location)" \
	"303 /login?next=/runs/2%3Fsort%3Dstreams%26q%3Da%2520b"
http GET "$WEB_URL$(location)"
t_match "login: the form carries it" "$HTTP_BODY" 'name="next" value="/runs/2\?sort=streams&amp;q=a%20b"'
http POST "$WEB_URL/login" -H 'Content-Type: application/x-www-form-urlencoded' \
	--data-binary "token=$ANALYST&next=%2Fruns%2F2%3Fsort%3Dstreams%26q%3Da%2520b"
t_eq "login: back to the page with its query" "$HTTP_STATUS $(location)" "303 /runs/2?sort=streams&q=a%20b"
# log injection: a run's app and a failed request's path are values, escaped: one line each, no
# forged key or line
FORGE=$'x" level=error msg="forged\r\nlevel=error msg="forged2'
http POST "$WEB_URL/api/v1/runs" -H "Authorization: Bearer $ANALYST" -H 'Content-Type: application/json' \
	--data-binary "$(FORGE=$FORGE "$py" -c 'import json, os; print(json.dumps({"app": os.environ["FORGE"]}))')"
t_eq "log: a run with a forged app is queued" "$HTTP_STATUS" 202
"$SM_BIN_DIR/sm-miner" worker --once >"$T_TMP/worker.log" 2>&1
t_eq "log: the worker logs the app as one escaped value, on one line" "$(grep -c forged "$T_TMP/worker.log")|$(grep -F 'msg="run taken"' "$T_TMP/worker.log" | grep forged | grep -o ' app=.*$')" \
	'1| app="x\" level=error msg=\"forged\r\nlevel=error msg=\"forged2"'
http GET "$WEB_URL/api/v1/runs" -H "Authorization: Bearer $ANALYST"
pg_q "ALTER DATABASE \"$PGDATABASE\" WITH ALLOW_CONNECTIONS false" -d postgres
pg_q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = :'d'" -d postgres -v d="$PGDATABASE" >/dev/null
http GET "$WEB_URL/api/v1/hosts/h%22%20level=error%20msg=%22forged%0D%0Alevel=error%20msg=%22forged2" \
	-H "Authorization: Bearer $ANALYST"
failed=$HTTP_STATUS
pg_q "ALTER DATABASE \"$PGDATABASE\" WITH ALLOW_CONNECTIONS true" -d postgres
t_match "log: a request failing with the database gone: 5xx" "$failed" '^5'
t_eq "log: its path is one escaped value, with the route's pattern, on one line" "$(grep -c forged "$WEB_LOG")|$(grep -F 'msg="request failed"' "$WEB_LOG" | grep forged | grep -o ' route=.*$')" \
	"1| route=/api/v1/hosts/** path=\"/api/v1/hosts/h\\\" level=error msg=\\\"forged\\r\\nlevel=error msg=\\\"forged2\" status=$failed"
t_eq "no sanitizer report" "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$WEB_LOG")" 0
# cookie writes without a valid CSRF token were refused; a POST of a run with a bearer token may
# have been accepted (that is a legitimate request), so only signatures and clusters must be unchanged
after=$(pg_q "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM signatures), (SELECT count(*) FROM clusters)")
t_eq "no signature or cluster changed by hostile requests" "${after#*|}" "${before#*|}"
stop_web
t_eq "sm-web stops cleanly afterwards" "$WEB_RC" 0
t_done
