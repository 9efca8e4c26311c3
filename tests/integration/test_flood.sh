#!/usr/bin/env bash
# flood: sm-ingest and sm-web under connection floods and slow clients from
# loopback (tests/tools/flood.c): thousands of half-open requests from several
# addresses and from the legitimate client's own address, requests that
# trickle a header byte a second, bodies that trickle a byte a second. A
# legitimate client asks /healthz (and, for sm-ingest, stores a stream) every
# 100 ms throughout: every one of its requests must succeed within 2 s; the
# servers' memory and descriptors stay bounded; /metrics counts what was shed
# by reason; both servers stop cleanly afterwards. SM_FLOOD_S sets each phase's
# length (make bench runs it longer with more connections, SM_FLOOD_CONNS).
. "$(dirname "$0")/../lib.sh"

flood=${SM_FLOOD:-$SM_BIN_DIR/../tests/flood}
[ -x "$flood" ] || t_bail "flood" "$flood is missing (build first)"
S=${SM_FLOOD_S:-6}
N=${SM_FLOOD_CONNS:-2000}
# ten addresses: more than --max-connections / --max-connections-per-ip, so the total limit binds
FROM10=127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8,127.0.0.9,127.0.0.10,127.0.0.11

sm_admin migrate >/dev/null || t_bail "migrate"
INGEST=$(mk_token ingest 2>/dev/null)
ANALYST=$(mk_token analyst 2>/dev/null)
t_ndjson "$T_TMP/one.ndjson" 1
tr -d '\n' <"$T_TMP/one.ndjson" >"$T_TMP/one.json"

# metric NAME_WITH_LABELS URL: its value in /metrics (empty when absent)
metric() {
	curl -s --max-time 5 -H 'Connection: close' "$2/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}
# figures LINE KEY: a key's value in flood's output line
fig() { sed -n "s/.* $2=\([^ ]*\).*/\1/p; s/^$2=\([^ ]*\).*/\1/p" <<<"$1" | head -n 1; }
# check_flood NAME LINE MEM_MB MAX_FDS: the probes all succeeded within 2 s, memory and descriptors bounded
check_flood() {
	local name=$1 line=$2 mem=$3 fds=$4 grow
	echo "# $name: $line"
	t_match "$name: the legitimate client's requests all succeeded" "$line" '^probes=[1-9][0-9]* failed=0 '
	t_eq "$name: each within 1 s" "$(awk -v m="$(fig "$line" max_ms)" 'BEGIN { print (m < 1000) ? "yes" : "no (" m " ms)" }')" yes
	grow=$(( ($(fig "$line" rss_peak_kb) - $(fig "$line" rss_start_kb)) / 1024 ))
	t_eq "$name: memory grew by less than $mem MB" "$([ "$grow" -lt "$mem" ] && echo yes || echo "no ($grow MB)")" yes
	t_eq "$name: at most $fds descriptors" "$([ "$(fig "$line" fds_peak)" -le "$fds" ] && echo yes || echo "no ($(fig "$line" fds_peak))")" yes
	t_match "$name: the server closed attack connections" "$(fig "$line" closed_by_server)" '^[1-9]'
}

# ---- the options refused with their reason ----
"$SM_BIN_DIR/sm-ingest" --header-timeout 0 >/dev/null 2>"$T_TMP/o1.err"
t_eq "ingest: --header-timeout 0 refused" "$?|$(cat "$T_TMP/o1.err")" \
	"2|sm-ingest: --header-timeout and --idle-timeout: must be at least 1 second"
"$SM_BIN_DIR/sm-web" --max-connections-per-ip -1 >/dev/null 2>"$T_TMP/o2.err"
t_match "web: a negative --max-connections-per-ip refused" "$?|$(cat "$T_TMP/o2.err")" '^2\|sm-web: --max-connections-per-ip'
"$SM_BIN_DIR/sm-ingest" --listen 127.0.0.1:0 --max-connections 200000 >/dev/null 2>"$T_TMP/o3.err"
t_eq "ingest: --max-connections beyond 100,000 refused" "$?|$(cat "$T_TMP/o3.err")" \
	"2|sm-ingest: --max-connections: at most 100000"

# ---- sm-ingest: the reserve ----
# two requests held by a database that does not answer (streams locked) fill --max-connections 2:
# none can give way, so a new connection gets a reserve place, good for /healthz and /metrics only
start_ingest --max-connections 2 --workers 1 --queue 4 || t_bail "sm-ingest starts"
pg_q "BEGIN; LOCK TABLE streams IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(120); COMMIT" >/dev/null 2>&1 &
lockpid=$!
locked=
for _ in $(seq 100); do
	locked=$(pg_q "SELECT pid FROM pg_locks WHERE relation = 'streams'::regclass AND granted
		AND mode = 'AccessExclusiveLock'")
	[ -n "$locked" ] && break
	sleep 0.1
done
[ -n "$locked" ] || t_bail "reserve" "the lock on streams never showed"
held=()
for i in 1 2; do
	t_ndjson "$T_TMP/held$i.ndjson" 1
	curl -s --max-time 60 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $INGEST" \
		-H 'Content-Type: application/x-ndjson' --data-binary "@$T_TMP/held$i.ndjson" \
		"$INGEST_URL/api/v1/streams" >"$T_TMP/held$i.code" &
	held+=($!)
	sleep 0.5
done
for _ in $(seq 100); do   # both held: in the worker and in the queue (the /metrics request counts itself)
	[ "$(pg_q "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")" -ge 1 ] &&
		[ "$(metric sm_ingest_inflight_requests "$INGEST_URL")" -ge 3 ] && break
	sleep 0.1
done
http GET "$INGEST_URL/healthz" -H 'Connection: close'
t_eq "reserve: /healthz answered while every connection is held" "$HTTP_STATUS" 200
http GET "$INGEST_URL/metrics" -H 'Connection: close'
t_match "reserve: so is /metrics, which shows both held" "$HTTP_BODY" 'sm_ingest_connections_open 3'

code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $INGEST" \
	-H 'Content-Type: application/x-ndjson' --data-binary "@$T_TMP/one.ndjson" "$INGEST_URL/api/v1/streams")
t_eq "reserve: any other request in the reserve is closed unanswered" "$code" 000
t_match "reserve: counted" "$(metric 'sm_ingest_connections_shed_total{reason="reserve_other_path"}' "$INGEST_URL")" '^[1-9]'
pg_q "SELECT pg_cancel_backend($locked)" >/dev/null
wait "$lockpid" "${held[@]}"
t_eq "reserve: the held requests were stored once the database answered" "$(cat "$T_TMP/held1.code" "$T_TMP/held2.code")" 200200
t_eq "reserve: and nothing of the refused request" "$(pg_q "SELECT count(*) FROM streams")" 2
stop_ingest
t_eq "reserve: sm-ingest stops cleanly" "$INGEST_RC" 0
pg_q "DELETE FROM streams" >/dev/null

# ---- sm-ingest: floods ----
start_ingest --max-connections 512 --header-timeout 3 || t_bail "sm-ingest starts"
IP=${INGEST_URL#http://}
http GET "$INGEST_URL/metrics"
t_match "ingest: /metrics shows the limits" "$HTTP_BODY" 'sm_ingest_connections_limit\{kind="per_ip"\} 64'

line=$("$flood" --target "$IP" --conns "$N" --mode half --from "$FROM10" --duration "$S" --pid "$INGEST_PID" \
	--probe /healthz --probe-post "$T_TMP/one.json" --token "$INGEST" 2>"$T_TMP/f1.err")
cat "$T_TMP/f1.err"
check_flood "ingest, $N half-open from 10 addresses" "$line" 128 600
t_match "ingest: full, the oldest gave way to new ones" \
	"$(metric 'sm_ingest_connections_shed_total{reason="gave_way_full"}' "$INGEST_URL")" '^[1-9]'
t_eq "ingest: the probe's stream stored" "$(pg_q "SELECT count(*) FROM streams")" 1

"$flood" --target "$IP" --conns 1200 --mode half --from 127.0.0.1 --duration "$S" --pid "$INGEST_PID" \
	--probe /healthz >"$T_TMP/f2.out" 2>"$T_TMP/f2.err" &
fpid=$!
sleep "$((S / 2))"
# the connections from the flooded address that the server holds: 64 at most (the probe's
# included), plus the few accepted an instant ago and being shut. Only sockets owned by sm-ingest
# count: the kernel's accept queue holds established connections the server has not taken yet.
# The most of ten looks over two seconds; new connections keep pushing the oldest out.
TOP=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
	n=$(ss -Htnp state established "( sport = :${IP##*:} and dst 127.0.0.1 )" | grep -c "pid=$INGEST_PID,")
	[ "$n" -gt "$TOP" ] && TOP=$n
	sleep 0.2
done
wait "$fpid"
line=$(cat "$T_TMP/f2.out")
cat "$T_TMP/f2.err"
check_flood "ingest, 1200 half-open from the client's own address" "$line" 128 600
t_match "ingest: connections gave way to new ones from the same address" \
	"$(metric 'sm_ingest_connections_shed_total{reason="gave_way_per_ip"}' "$INGEST_URL")" '^[1-9]'
echo "# ingest: the server held $TOP connections from the flooded address"
t_eq "ingest: one address held about 64 connections at most, and was let fill them" \
	"$([ "$TOP" -ge 32 ] && [ "$TOP" -le 72 ] && echo yes || echo "no ($TOP)")" yes

line=$("$flood" --target "$IP" --conns 300 --mode trickle --from 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7 \
	--duration "$((S > 5 ? S : 5))" --pid "$INGEST_PID" --probe /metrics 2>"$T_TMP/f3.err")
cat "$T_TMP/f3.err"
check_flood "ingest, 300 trickling headers (a byte a second)" "$line" 128 600
t_match "ingest: trickling headers closed at the header deadline (3 s)" \
	"$(metric 'sm_ingest_connections_shed_total{reason="header_timeout"}' "$INGEST_URL")" '^[1-9]'

line=$("$flood" --target "$IP" --conns 100 --mode body --token "$INGEST" --from 127.0.0.2,127.0.0.3 \
	--duration 15 --pid "$INGEST_PID" --probe /healthz 2>"$T_TMP/f4.err")
cat "$T_TMP/f4.err"
check_flood "ingest, 100 bodies at a byte a second" "$line" 128 600
t_match "ingest: bodies slower than 1 KB/s over 10 s closed" \
	"$(metric 'sm_ingest_connections_shed_total{reason="body_too_slow"}' "$INGEST_URL")" '^[1-9]'
for _ in $(seq 50); do
	[ "$(metric sm_ingest_connections_open "$INGEST_URL")" = 1 ] && break
	sleep 0.1
done
t_eq "ingest: no connection counted after the floods (but this request's)" "$(metric sm_ingest_connections_open "$INGEST_URL")" 1
http GET "$INGEST_URL/healthz"
t_eq "ingest: healthy afterwards" "$HTTP_STATUS" 200
t_eq "ingest: no sanitizer report" "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$INGEST_LOG")" 0
t_match "ingest: what was shed is logged by reason, at once then once a minute, not per connection" \
	"$(grep -c 'connections shed' "$INGEST_LOG")" '^[1-3]$'
stop_ingest
t_eq "ingest: stops cleanly after the floods" "$INGEST_RC" 0

# ---- sm-web (bare, as on a laptop) ----
# of connections from one address in their headers, the first accepted gives way, though several
# were accepted in the same millisecond and the slots they took are reused in another order (8
# connections opened, then closed oldest first): 32 (--max-connections-per-ip's default) each with
# a request line and a header, then a 33rd; which of them the server closed. One HTTP thread, so
# that the server takes them in the order they were opened.
start_web --no-worker --threads 1 --header-timeout 3 || t_bail "sm-web starts (one thread)"
WP=${WEB_URL#http://}
order=$(python3 - "${WP%:*}" "${WP##*:}" 32 <<'PY'
import socket, sys, time
host, port, per_ip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
head = b"GET /healthz HTTP/1.1\r\nHost: t\r\n"
def dial():
    s = socket.socket()
    s.bind(("127.0.0.20", 0))
    s.connect((host, port))
    s.sendall(head)
    return s
warm = [dial() for _ in range(8)]
time.sleep(0.2)
for s in warm:
    s.close()
    time.sleep(0.02)
time.sleep(0.3)
held = [dial() for _ in range(per_ip)]
time.sleep(0.3)
held.append(dial())
time.sleep(0.3)
closed = []
for i, s in enumerate(held):
    s.setblocking(False)
    try:
        s.recv(1)
        closed.append(str(i))
    except BlockingIOError:
        pass
    except OSError:
        closed.append(str(i))
print(" ".join(closed) or "none")
PY
)
t_eq "web: per address, the connection accepted first gave way to the 33rd" "$order" 0
start_web --no-worker --max-connections 256 --header-timeout 3 || t_bail "sm-web starts"
WP=${WEB_URL#http://}
line=$("$flood" --target "$WP" --conns 300 --mode half --from 127.0.0.1 --duration "$S" --pid "$WEB_PID" \
	--probe /healthz 2>"$T_TMP/w1.err")
cat "$T_TMP/w1.err"
check_flood "web, 300 half-open from the client's own address" "$line" 128 400
t_match "web: connections gave way per address" \
	"$(metric 'sm_web_connections_shed_total{reason="gave_way_per_ip"}' "$WEB_URL")" '^[1-9]'

line=$("$flood" --target "$WP" --conns "$N" --mode half --from "$FROM10" --duration "$S" --pid "$WEB_PID" \
	--probe /metrics 2>"$T_TMP/w2.err")
cat "$T_TMP/w2.err"
check_flood "web, $N half-open from 10 addresses" "$line" 128 400
t_match "web: full, the oldest gave way to new connections" \
	"$(metric 'sm_web_connections_shed_total{reason="gave_way_full"}' "$WEB_URL")" '^[1-9]'

line=$("$flood" --target "$WP" --conns 200 --mode trickle --from 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8 \
	--duration "$((S > 5 ? S : 5))" --pid "$WEB_PID" --probe /healthz 2>"$T_TMP/w3.err")
cat "$T_TMP/w3.err"
check_flood "web, 200 trickling headers" "$line" 128 400
t_match "web: trickling headers closed at the deadline" \
	"$(metric 'sm_web_connections_shed_total{reason="header_timeout"}' "$WEB_URL")" '^[1-9]'
http GET "$WEB_URL/api/v1/runs" -H "Authorization: Bearer $ANALYST"
t_eq "web: the API answers afterwards" "$HTTP_STATUS" 200
stop_web

# a thread busy in a slow query serves none of its connections meanwhile: a request complete on
# the wire must not be shed as if its client were slow. With one thread: a connection accepted
# first, then a query that waits 3 s for a lock, and meanwhile the first connection's request
start_web --no-worker --threads 1 --header-timeout 1 || t_bail "sm-web starts"
WPORT=${WEB_URL##*:}
pg_q "BEGIN; LOCK TABLE runs IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT" >/dev/null 2>&1 &
lockpid=$!
exec 3<>"/dev/tcp/127.0.0.1/$WPORT"
sleep 0.5
curl -s --max-time 20 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ANALYST" "$WEB_URL/api/v1/runs" >"$T_TMP/slow.code" &
slowpid=$!
sleep 0.3
printf 'GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' >&3
first=$(timeout 20 head -n 1 <&3 | tr -d '\r')
exec 3<&-
wait "$slowpid"
t_eq "web: a request waiting 2.5 s behind a busy thread is served, not shed at --header-timeout 1" \
	"$first|$(cat "$T_TMP/slow.code")" "HTTP/1.1 200 OK|200"
wait "$lockpid"
t_eq "web: no sanitizer report" "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$WEB_LOG")" 0
stop_web
t_eq "web: stops cleanly after the floods" "$WEB_RC" 0
t_done
