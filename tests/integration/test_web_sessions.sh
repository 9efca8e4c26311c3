#!/usr/bin/env bash
# web sessions: a browser login starts a session of its own (random, stored hashed, bound to the
# token), never the token in the cookie: its cookie's name and attributes (__Host- with
# --cookie-secure), the cross-site request token derived from the session, logout, revocation of
# the token (at once in this process, even through the cache), idle and absolute expiry, expired
# sessions deleted, old cookies holding a raw token refused.
. "$(dirname "$0")/../lib.sh"

sm_admin migrate >/dev/null || t_bail "migrate"
ANALYST=$(mk_token analyst 2>/dev/null)
ADMIN=$(mk_token admin 2>/dev/null)
OTHER=$(sm_admin token create --role analyst --name other 2>/dev/null)
[ -n "$ANALYST" ] && [ -n "$ADMIN" ] && [ -n "$OTHER" ] || t_bail "tokens"
tid() { pg_q "SELECT id FROM tokens WHERE token_hash = sha256('$1'::bytea)"; }

header() { # header NAME: the value of a header of the last answer
	local h=${HTTP_HEADERS//$'\r'/}
	grep -i "^$1: " <<<"$h" | head -n 1 | cut -d' ' -f2-
}
login() { # login TOKEN: POST /login; SETCK the Set-Cookie header, CK its name=value
	http POST "$WEB_URL/login" -H 'Content-Type: application/x-www-form-urlencoded' --data-urlencode "token=$1" \
		--data-urlencode 'next=/runs'
	SETCK=$(header Set-Cookie)
	CK=${SETCK%%;*}
}
page() { # page COOKIE PATH: GET with the cookie; "STATUS LOCATION" (the location without its query)
	local loc
	http GET "$WEB_URL$2" -H "Cookie: $1"
	loc=$(header Location)
	echo "$HTTP_STATUS ${loc%%\?*}"
}
csrf() { # csrf COOKIE: the cross-site request token a page holds for this session
	http GET "$WEB_URL/runs" -H "Cookie: $1"
	grep -o 'data-csrf="[0-9a-f]*"' <<<"$HTTP_BODY" | head -n 1 | cut -d'"' -f2
}

# the default cache (10 s): logout and revocation must not wait for it
start_web --no-worker || t_bail "sm-web starts"

login "$ANALYST"
t_eq "login: 303 to the page asked for" "$HTTP_STATUS $(header Location)" "303 /runs"
VALUE=${CK#sm_session=}
t_match "login: the cookie is sm_session, a session of 256 random bits" "$CK" '^sm_session=sms_[0-9a-f]{64}$'
t_eq "login: the cookie does not hold the token" "$(grep -c -- "$ANALYST" <<<"$SETCK")" 0
t_eq "login: HttpOnly, SameSite=Strict, Path=/, 7 days, not Secure without --cookie-secure, no Domain" \
	"${SETCK#*; }" "Path=/; HttpOnly; SameSite=Strict; Max-Age=604800"
t_eq "login: only the session's SHA-256 is stored, bound to the token" \
	"$(pg_q "SELECT count(*) FROM sessions WHERE session_hash = sha256('$VALUE'::bytea) AND token_id = $(tid "$ANALYST")")|$(pg_q "SELECT count(*) FROM sessions WHERE position('$VALUE'::bytea IN session_hash) > 0")" "1|0"
S1=$CK
t_eq "the session works for pages" "$(page "$S1" /runs)" "200 "
http GET "$WEB_URL/api/v1/streams?limit=1" -H "Cookie: $S1"
t_eq "the session works for the API" "$HTTP_STATUS" 200
t_eq "the token itself as the cookie: no session" "$(page "sm_session=$ANALYST" /runs)" "303 /login"
t_eq "an old cookie sm_token holding the token: no session" "$(page "sm_token=$ANALYST" /runs)" "303 /login"
t_eq "a made-up session: none" "$(page "sm_session=sms_$(printf '%064d' 0)" /runs)" "303 /login"

# the cross-site request token is the session's: another session of the same token has another
login "$ANALYST"
S2=$CK
C1=$(csrf "$S1")
C2=$(csrf "$S2")
t_match "each session has a cross-site request token" "$C1 $C2" '^[0-9a-f]{32} [0-9a-f]{32}$'
t_eq "... of its own (not the token's): two sessions of one token differ" "$([ "$C1" != "$C2" ] && echo differ)" differ
http POST "$WEB_URL/api/v1/runs" -H "Cookie: $S2" -H 'Content-Type: application/json' -H "X-CSRF-Token: $C1" \
	--data-binary '{"app": "nosuchapp"}'
t_eq "one session's cross-site token does not serve another" "$HTTP_STATUS" 403
http POST "$WEB_URL/api/v1/runs" -H "Cookie: $S2" -H 'Content-Type: application/json' -H "X-CSRF-Token: $C2" \
	--data-binary '{"app": "nosuchapp"}'
t_eq "its own does" "$HTTP_STATUS" 202

# logout ends the session at once, though it is cached
http POST "$WEB_URL/logout" -H "Cookie: $S1" -H 'Content-Type: application/x-www-form-urlencoded' --data "csrf=$C1"
t_eq "logout: 303 to /login, the cookie cleared" "$HTTP_STATUS $(header Location) $(header Set-Cookie)" \
	"303 /login sm_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
t_eq "logout: the same cookie again is no session (page: to /login)" "$(page "$S1" /runs)" "303 /login"
http GET "$WEB_URL/api/v1/streams?limit=1" -H "Cookie: $S1"
t_eq "logout: the same cookie again is no session (API: 401)" "$HTTP_STATUS" 401
t_eq "logout: its row is gone" "$(pg_q "SELECT count(*) FROM sessions WHERE session_hash = sha256('${S1#sm_session=}'::bytea)")" 0
t_eq "logout: the other session of the token still works" "$(page "$S2" /runs)" "200 "

# revoking the token ends its sessions, at once in this process
login "$OTHER"
S3=$CK
t_eq "a session of the other token" "$(page "$S3" /runs)" "200 "
http DELETE "$WEB_URL/api/v1/tokens/$(tid "$OTHER")" -H "Authorization: Bearer $ADMIN"
t_eq "the token is revoked" "$HTTP_STATUS" 200
t_eq "token revoked: its session stops working at once" "$(page "$S3" /runs)" "303 /login"
t_eq "token revoked: its sessions are deleted" "$(pg_q "SELECT count(*) FROM sessions WHERE token_id = $(tid "$OTHER")")" 0
t_eq "token revoked: other tokens' sessions still work" "$(page "$S2" /runs)" "200 "
# revoked by another process (sm-admin): the session's check sees it once the cache has expired
login "$ADMIN"
S4=$CK
t_eq "an admin's session" "$(page "$S4" /runs)" "200 "
sm_admin token revoke "$(tid "$ADMIN")" >/dev/null 2>&1
stop_web
start_web --no-worker --auth-cache-ms 0 || t_bail "sm-web without a cache starts"
t_eq "token revoked by sm-admin: its session stops working" "$(page "$S4" /runs)" "303 /login"
t_eq "sessions survive a restart of sm-web" "$(page "$S2" /runs)" "200 "
stop_web

# idle expiry: a session unused for --session-idle ends; one in use lives on
start_web --no-worker --auth-cache-ms 0 --session-idle 2 || t_bail "sm-web --session-idle 2 starts"
login "$ANALYST"
IDLE=$CK
login "$ANALYST"
BUSY=$CK
ok=ok
for _ in 1 2 3 4; do
	sleep 1
	[ "$(page "$BUSY" /runs)" = "200 " ] || ok="failed at $(page "$BUSY" /runs)"
done
t_eq "idle expiry: a session in use every second lives past the idle limit" "$ok" ok
t_eq "idle expiry: one unused for 4 s is over" "$(page "$IDLE" /runs)" "303 /login"
http GET "$WEB_URL/api/v1/streams?limit=1" -H "Cookie: $IDLE"
t_eq "idle expiry: the API says 401" "$HTTP_STATUS" 401
sleep 3
login "$ANALYST"
t_eq "expired sessions are deleted at the next login" \
	"$(pg_q "SELECT count(*) FROM sessions WHERE session_hash IN (sha256('${IDLE#sm_session=}'::bytea), sha256('${BUSY#sm_session=}'::bytea))")" 0
stop_web

# absolute expiry: even a session in use ends --session-max after its login
start_web --no-worker --auth-cache-ms 0 --session-max 3 || t_bail "sm-web --session-max 3 starts"
login "$ANALYST"
t_eq "absolute expiry: the cookie's Max-Age is the limit" "$(grep -o 'Max-Age=[0-9]*' <<<"$SETCK")" "Max-Age=3"
MAXED=$CK
t_eq "absolute expiry: fresh" "$(page "$MAXED" /runs)" "200 "
sleep 1.5
t_eq "absolute expiry: in use" "$(page "$MAXED" /runs)" "200 "
sleep 2
t_eq "absolute expiry: over after 3 s although in use" "$(page "$MAXED" /runs)" "303 /login"
stop_web

# --cookie-secure: the __Host- prefix (Secure, Path=/, no Domain), and only that name counts
start_web --no-worker --cookie-secure || t_bail "sm-web --cookie-secure starts"
login "$ANALYST"
t_match "--cookie-secure: the cookie is __Host-sm_session" "$CK" '^__Host-sm_session=sms_[0-9a-f]{64}$'
t_eq "--cookie-secure: Secure, Path=/, no Domain" "${SETCK#*; }" "Path=/; HttpOnly; SameSite=Strict; Max-Age=604800; Secure"
t_eq "--cookie-secure: the session works" "$(page "$CK" /runs)" "200 "
t_eq "--cookie-secure: the same session under the name without the prefix does not" \
	"$(page "sm_session=${CK#__Host-sm_session=}" /runs)" "303 /login"
stop_web
t_done
