#!/usr/bin/env bash
# JSON bodies (issue 25): json_bodies.py's battery (node and depth bombs, numbers at the limits,
# NUL, lone surrogates, bidi controls, keys given twice, unknown fields) against every JSON
# endpoint of sm-ingest (streams, reports, profiles) and sm-web (every POST and PATCH of
# web/api.c's route table). Each answer is the one expected, no bomb grows the server's peak RSS
# by more than 64 MB + 4x the body, and both servers stay up with no sanitizer report.
. "$(dirname "$0")/../lib.sh"

py=/usr/bin/python3
[ -x "$py" ] || py=python3
sm_admin migrate >/dev/null || t_bail "migrate"
ANALYST=$(mk_token analyst 2>/dev/null)
ADMIN=$(mk_token admin 2>/dev/null)
INGEST=$(mk_token ingest 2>/dev/null)

start_ingest || t_bail "sm-ingest starts"
"$py" "$SM_REPO/tests/integration/json_bodies.py" ingest "$INGEST_URL" "$INGEST_PID" "$INGEST" >"$T_TMP/ingest.out" 2>&1
sed 's/^/  /' "$T_TMP/ingest.out"
t_match "sm-ingest: every case answered as expected" "$(tail -n 1 "$T_TMP/ingest.out")" '^cases [0-9]+ problems 0$'
t_eq "sm-ingest is still running" "$(t_alive "$INGEST_PID" && echo yes)" yes
http POST "$INGEST_URL/api/v1/agents/report" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/json' \
	--data-binary '{"v":1,"host":"h","exe":"/bin/x","mode":"guard","agent_version":"1","pid":7,"started_ns":1000,"zz":{"a":[1,2]}}'
t_eq "a report with an unknown field is still taken" "$HTTP_STATUS" 200
t_eq "sm-ingest: no sanitizer report" "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$INGEST_LOG")" 0
stop_ingest
t_eq "sm-ingest stops cleanly" "$INGEST_RC" 0

start_web --no-worker --max-body 8M || t_bail "sm-web starts"
"$py" "$SM_REPO/tests/integration/json_bodies.py" web "$WEB_URL" "$WEB_PID" "$ANALYST" "$ADMIN" >"$T_TMP/web.out" 2>&1
sed 's/^/  /' "$T_TMP/web.out"
t_match "sm-web: every case answered as expected" "$(tail -n 1 "$T_TMP/web.out")" '^cases [0-9]+ problems 0$'
t_eq "sm-web is still running" "$(t_alive "$WEB_PID" && echo yes)" yes
# the cases of item 2 exactly: a NUL or a lone surrogate in an import, a NUL in filter.labels
http POST "$WEB_URL/api/v1/signatures/import" -H "Authorization: Bearer $ANALYST" -H 'Content-Type: application/json' \
	--data-binary '{"signatures":[{"name":"a\u0000b","frames":["x"]}]}'
t_eq "import: NUL refused, naming the field" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error": "not JSON: signatures[0].name: unexpected '"'"'\\'"'"' (NUL, \\u0000, is not allowed in a string) at byte 25"}'$'\n'
http POST "$WEB_URL/api/v1/signatures/import" -H "Authorization: Bearer $ANALYST" -H 'Content-Type: application/json' \
	--data-binary '{"signatures":[{"name":"a","frames":["x\ud800"]}]}'
t_eq "import: a lone surrogate refused, naming the field" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error": "not JSON: signatures[0].frames[0]: unexpected '"'"'\\'"'"' (a lone high surrogate) at byte 39"}'$'\n'
http POST "$WEB_URL/api/v1/runs" -H "Authorization: Bearer $ANALYST" -H 'Content-Type: application/json' \
	--data-binary '{"app":"x","filter":{"labels":{"os":"a\u0000"}}}'
t_eq "run: NUL in filter.labels refused, naming the field" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error": "filter.labels.os: unexpected '"'"'\\'"'"' (NUL, \\u0000, is not allowed in a string) at byte 38"}'$'\n'
t_eq "nothing imported, no run made" "$(pg_q "SELECT (SELECT count(*) FROM signatures WHERE name LIKE 'a%'), (SELECT count(*) FROM runs WHERE params->>'app' = 'x')")" "0|0"
t_eq "sm-web: no sanitizer report" "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$WEB_LOG")" 0
stop_web
t_eq "sm-web stops cleanly" "$WEB_RC" 0
t_done
