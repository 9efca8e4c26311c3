#!/usr/bin/env bash
# db outage: PostgreSQL stopped under sm-web and sm-ingest (a cluster of this script's own, made
# by deploy/pg.sh, so that it may be stopped). Past the token cache's time a valid token must
# not become "unknown": both servers answer 503 with Retry-After (JSON for the API, a page that
# says so for the dashboard, the login form says the database is unavailable), never 401 or 500,
# and 200 again once the database is back. sm-web's statements are prepared on each new session
# (after the restart too) without one executed unprepared: the server's log has no "prepared
# statement ... does not exist". A connection lost in the middle of a batch's COPY is a 503 too,
# and stores nothing of the batch.
. "$(dirname "$0")/../lib.sh"

PG=$SM_REPO/deploy/pg.sh
P1=$T_TMP/p1
t_cleanup '"$PG" destroy "$P1" >/dev/null 2>&1'
SM_PGPORT=$(free_port) "$PG" start "$P1" >"$T_TMP/pg1.log" 2>&1 || { cat "$T_TMP/pg1.log"; t_bail "cluster starts"; }
CONN="$("$PG" url "$P1") connect_timeout=2"

"$SM_BIN_DIR/sm-admin" --db "$CONN" migrate >/dev/null 2>&1 || t_bail "migrate"
ANALYST=$("$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role analyst --name outage 2>/dev/null)
INGEST=$("$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role ingest --name outage-ingest 2>/dev/null)
[ -n "$ANALYST" ] && [ -n "$INGEST" ] || t_bail "tokens"
# a short token cache: the outage outlasts it
start_web --db "$CONN" --no-worker --auth-cache-ms 300 || t_bail "sm-web starts"
start_ingest --db "$CONN" --auth-cache-ms 300 || t_bail "sm-ingest starts"

header() { # header NAME: the value of a header of the last answer
	local h=${HTTP_HEADERS//$'\r'/}
	grep -i "^$1: " <<<"$h" | head -n 1 | cut -d' ' -f2-
}
login() { # login TOKEN: POST /login; sets COOKIE (name=value) when one was set
	http POST "$WEB_URL/login" -H 'Content-Type: application/x-www-form-urlencoded' --data-urlencode "token=$1" \
		--data-urlencode 'next=/runs'
	COOKIE=$(header Set-Cookie | cut -d';' -f1)
}

http GET "$WEB_URL/api/v1/streams?limit=1" -H "Authorization: Bearer $ANALYST"
t_eq "database up: the API answers" "$HTTP_STATUS" 200
login "$ANALYST"
t_eq "database up: login" "$HTTP_STATUS" 303
SESSION=$COOKIE
http GET "$WEB_URL/runs" -H "Cookie: $SESSION"
t_eq "database up: a page with the session" "$HTTP_STATUS" 200
http GET "$WEB_URL/api/v1/runs/1" -H "Authorization: Bearer $ANALYST"
t_eq "database up: a prepared statement's query (no such run)" "$HTTP_STATUS" 404

"$PG" stop "$P1" >/dev/null 2>&1 || t_bail "stop PostgreSQL"
sleep 1   # past the token cache

http GET "$WEB_URL/api/v1/streams?limit=1" -H "Authorization: Bearer $ANALYST"
t_eq "database down: the API answers 503 database unavailable" "$HTTP_STATUS $HTTP_BODY" \
	'503 {"error": "database unavailable"}'$'\n'
t_match "database down: the API's 503 says when to retry" "$(header Retry-After)" '^[0-9]+$'
http GET "$WEB_URL/api/v1/streams?limit=1" -H "Authorization: Bearer $ANALYST"
t_eq "database down: and again (no cached 'unknown token')" "$HTTP_STATUS" 503
http GET "$WEB_URL/runs" -H "Authorization: Bearer $ANALYST"
t_eq "database down: a page answers 503, no redirect to /login" "$HTTP_STATUS $(header Location)" "503 "
t_match "database down: the page says so" "$HTTP_BODY" 'database is unavailable'
t_match "database down: the page says when to retry" "$(header Retry-After)" '^[0-9]+$'
http GET "$WEB_URL/runs" -H "Cookie: $SESSION"
t_eq "database down: a page with the session cookie answers 503" "$HTTP_STATUS $(header Location)" "503 "
login "$ANALYST"
t_eq "database down: login answers 503 without a cookie" "$HTTP_STATUS $COOKIE" "503 "
t_match "database down: the login form says the database is unavailable" "$HTTP_BODY" 'database is unavailable'
t_eq "database down: ... not that the token is wrong" "$(grep -c 'not valid' <<<"$HTTP_BODY")" 0
t_match "database down: the login's 503 says when to retry" "$(header Retry-After)" '^[0-9]+$'
http GET "$WEB_URL/api/v1/streams?limit=1"
t_eq "database down: no token is still 401" "$HTTP_STATUS" 401
# one stream's answer, page and profile (the events' reading, web/model.c), by token and by session
for path in /api/v1/streams/00000000-0000-4000-8000-0000000000a1 /streams/00000000-0000-4000-8000-0000000000a1 \
	/api/v1/streams/00000000-0000-4000-8000-0000000000a1/profile; do
	http GET "$WEB_URL$path" -H "Authorization: Bearer $ANALYST"
	t_eq "database down: GET $path answers 503" "$HTTP_STATUS" 503
	http GET "$WEB_URL$path" -H "Cookie: $SESSION"
	t_eq "database down: GET $path with the session answers 503" "$HTTP_STATUS" 503
done

t_ndjson "$T_TMP/s.ndjson" 1
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$T_TMP/s.ndjson"
t_match "database down: sm-ingest answers 503" "$HTTP_STATUS $HTTP_BODY" '^503 .*database unavailable'
t_match "database down: sm-ingest's 503 says when to retry" "$(header Retry-After)" '^[0-9]+$'
http GET "$INGEST_URL/api/v1/profiles/0123456789abcdef" -H "Authorization: Bearer $INGEST"
t_match "database down: sm-ingest's profiles answer 503" "$HTTP_STATUS $(header Retry-After)" '^503 [0-9]+$'
# an upload: parsed and checked without the database, then refused for it (not for the token)
printf '{"v":1,"host":"outage","pid":7,"started_ns":1,"profile":%s}' "$(tr -d '\n' <"$SM_REPO/tests/guard/profile-seed.json")" \
	>"$T_TMP/upload.json"
http POST "$INGEST_URL/api/v1/profiles" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/json' \
	--data-binary @"$T_TMP/upload.json"
t_match "database down: a profile upload answers 503" "$HTTP_STATUS $(header Retry-After)" '^503 [0-9]+$'

"$PG" start "$P1" >/dev/null 2>&1 || t_bail "start PostgreSQL again"
ok=
for _ in $(seq 50); do
	http GET "$WEB_URL/api/v1/streams?limit=1" -H "Authorization: Bearer $ANALYST"
	[ "$HTTP_STATUS" = 200 ] && { ok=1; break; }
	sleep 0.2
done
t_eq "database back: the API answers 200" "${ok:-$HTTP_STATUS}" 1
http GET "$WEB_URL/runs" -H "Cookie: $SESSION"
t_eq "database back: the session works again" "$HTTP_STATUS" 200
login "$ANALYST"
t_eq "database back: login" "$HTTP_STATUS" 303
for _ in 1 2 3; do
	http GET "$WEB_URL/api/v1/runs/1" -H "Authorization: Bearer $ANALYST"
done
t_eq "database back: the prepared statement on the new session" "$HTTP_STATUS" 404
t_eq "no prepared statement executed before it was prepared (server.log)" \
	"$(grep 'prepared statement .* does not exist' "$P1/server.log" | head -n 3)" ""
for _ in $(seq 50); do
	http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/x-ndjson' \
		--data-binary @"$T_TMP/s.ndjson"
	[ "$HTTP_STATUS" = 200 ] && break
	sleep 0.2
done
t_eq "database back: sm-ingest stores the stream" "$HTTP_STATUS" 200

# the connection lost in the middle of a batch's COPY (ingest/store.c copy_streams): a trigger ends
# its own backend at one stream of the batch. The batch is answered 503, nothing of it is stored,
# and once the database lets it through, the same batch is stored whole.
psql -X -q -v ON_ERROR_STOP=1 -d "$CONN" >/dev/null 2>&1 <<'SQL' || t_bail "the cutting trigger"
CREATE FUNCTION cut_in_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.host = 'cut-in-copy' THEN
		PERFORM pg_terminate_backend(pg_backend_pid());
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER cut_in_copy BEFORE INSERT ON streams FOR EACH ROW EXECUTE FUNCTION cut_in_copy();
SQL
t_ndjson "$T_TMP/cut.ndjson" 3
sed -i '2s/"host": *"[^"]*"/"host":"cut-in-copy"/' "$T_TMP/cut.ndjson"
ids=$(sed "s/.*/'&'/" "$T_TMP/cut.ndjson.ids" | paste -sd,)
stored() { psql -X -At -d "$CONN" -c "SELECT count(*) || ' ' || coalesce(sum(n_events), 0) FROM streams WHERE stream_id IN ($ids)"; }
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$T_TMP/cut.ndjson"
t_match "the connection lost in a batch's COPY: 503, database unavailable" "$HTTP_STATUS $HTTP_BODY" \
	'^503 .*database unavailable'
t_match "and it says when to retry" "$(header Retry-After)" '^[0-9]+$'
t_eq "nothing of the batch is stored" "$(stored)" "0 0"
t_match "the backend was ended in the COPY, at the batch's second stream (server.log)" \
	"$(grep -A3 'terminating connection due to administrator command' "$P1/server.log")" 'cut_in_copy.*|COPY streams, line'
psql -X -q -d "$CONN" -c "DROP TRIGGER cut_in_copy ON streams" >/dev/null || t_fail "drop the trigger"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$T_TMP/cut.ndjson"
t_eq "the same batch again: stored whole" "$HTTP_STATUS $HTTP_BODY $(stored)" \
	'200 {"accepted":3,"duplicates":0,"rejected":[]} 3 9'

stop_web
stop_ingest
t_done
