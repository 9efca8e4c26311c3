#!/usr/bin/env bash
# smoke: the programs work together on a real database. Migrations apply once
# and are a no-op the second time, status reports the schema version, a token
# can be created and is stored only as its hash, sm-ingest answers /healthz and
# /metrics, refuses a request without a token, and stops cleanly on SIGTERM.
. "$(dirname "$0")/../lib.sh"

out=$(sm_admin migrate 2>&1)
rc=$?
t_eq "migrate exits 0" "$rc" 0
[ "$rc" -eq 0 ] || t_bail "migrate" "$out"
version=$(pg_q "SELECT max(version) FROM schema_migrations")
t_match "migrate records a version" "$version" '^[1-9][0-9]*$'
t_eq "migrate reports it" "$out" "schema at version $version ($version migration$([ "$version" = 1 ] || echo s) applied)"

tables_before=$(pg_q "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace")
out=$(sm_admin migrate 2>&1)
t_eq "second migrate exits 0" "$?" 0
t_eq "second migrate applies nothing" "$out" "schema at version $version (0 migrations applied)"
t_eq "second migrate keeps the version" "$(pg_q "SELECT count(*), max(version) FROM schema_migrations")" \
	"$version|$version"
t_eq "second migrate creates no relation" \
	"$(pg_q "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace")" "$tables_before"

out=$(sm_admin status 2>&1)
t_eq "status exits 0" "$?" 0
t_eq "status shows the schema version" "$(head -n 1 <<<"$out")" "schema: version $version, this build needs $version"

tok=$(mk_token ingest 2>/dev/null)
t_eq "token create exits 0" "$?" 0
t_match "token is sm_ and 64 hex digits" "$tok" '^sm_[0-9a-f]{64}$'
t_eq "the token's hash is stored" \
	"$(pg_q "SELECT count(*) FROM tokens WHERE role = 'ingest' AND token_hash = sha256(convert_to(:'t', 'UTF8'))" \
		-v t="$tok")" 1
t_eq "the token itself is not" \
	"$(pg_q "SELECT count(*) FROM tokens t WHERE strpos(t::text, :'t') > 0" -v t="${tok#sm_}")" 0

if ! start_ingest; then
	t_bail "sm-ingest starts"
fi
t_ok "sm-ingest starts"
http GET "$INGEST_URL/healthz"
t_eq "healthz status" "$HTTP_STATUS" 200
t_match "healthz body" "$HTTP_BODY" '^\{"status":"ok"[,}]'
http GET "$INGEST_URL/metrics"
t_eq "metrics status" "$HTTP_STATUS" 200
t_match "metrics are Prometheus text" "$HTTP_BODY" $'(^|\n)sm_ingest_[a-z_]+(\\{[^}]*\\})? [0-9]'
http POST "$INGEST_URL/api/v1/streams" -H 'Content-Type: application/json' --data '{}'
t_eq "a request without a token gets 401" "$HTTP_STATUS" 401
stop_ingest && t_ok "sm-ingest exits 0 on SIGTERM"
t_done
