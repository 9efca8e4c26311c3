#!/usr/bin/env bash
# haproxy: two sm-ingest behind Debian's HAProxy with deploy/haproxy/ingest.cfg as it is
# shipped. Streams sent through the proxy reach both servers; after one server is killed
# (SIGKILL) HAProxy's health checks take it out, every stream an agent sends is still stored
# exactly once, and sm-agent given the proxy and a dead second proxy fails over by itself;
# a client flooding the proxy with half-open connections holds 64 at most while others are
# answered. Prints how long HAProxy took to take the dead server out.
. "$(dirname "$0")/../lib.sh"

HAPROXY=${SM_HAPROXY:-/usr/sbin/haproxy}
PY=/usr/bin/python3
[ -x "$HAPROXY" ] || t_bail "haproxy" "$HAPROXY is missing (deploy/deps.sh test installs Debian's haproxy)"

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"

srv_start ingest --auth-cache-ms 0 || t_bail "sm-ingest 1 starts"
A_PID=$SRV_PID A_URL=$SRV_URL A_LOG=$SRV_LOG
srv_start ingest --auth-cache-ms 0 || t_bail "sm-ingest 2 starts"
B_PID=$SRV_PID B_URL=$SRV_URL B_LOG=$SRV_LOG
t_cleanup '[ -z "$A_PID" ] || kill -KILL "$A_PID" 2>/dev/null; [ -z "$B_PID" ] || kill -TERM "$B_PID" 2>/dev/null'

port=$(free_port)
export SM_HAPROXY_BIND=127.0.0.1:$port SM_HAPROXY_SOCKET=$T_TMP/haproxy.sock
export SM_INGEST_1=${A_URL#http://} SM_INGEST_2=${B_URL#http://}
"$HAPROXY" -c -q -f "$SM_REPO/deploy/haproxy/ingest.cfg" || t_bail "haproxy -c" "the shipped configuration is refused"
"$HAPROXY" -db -f "$SM_REPO/deploy/haproxy/ingest.cfg" >"$T_TMP/haproxy.log" 2>&1 &
HAP_PID=$!
t_cleanup '[ -z "$HAP_PID" ] || kill -TERM "$HAP_PID" 2>/dev/null'
HAP=http://127.0.0.1:$port
for _ in $(seq 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$HAP/healthz")" = 200 ] && break
	sleep 0.1
done
t_eq "haproxy answers /healthz from a server" "$(curl -s -o /dev/null -w '%{http_code}' "$HAP/healthz")" 200

# hap_cmd COMMAND: what HAProxy's admin socket answers to COMMAND
hap_cmd() {
	"$PY" - "$SM_HAPROXY_SOCKET" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
while True:
    b = s.recv(65536)
    if not b:
        break
    sys.stdout.write(b.decode())
EOF
}
# servers: "NAME OPERATIONAL-STATE" of each server (2 up, 0 down)
servers() {
	hap_cmd "show servers state ingest" | awk 'NF > 6 && $2 == "ingest" { print $4, $6 }'
}
t_eq "both servers up" "$(servers | tr '\n' ' ')" "ingest1 2 ingest2 2 "

stored() { # stored IDS-FILE: how many of these streams are stored, and in how many rows
	pg_q "SELECT count(DISTINCT stream_id) || '|' || count(*) FROM streams
		WHERE stream_id = ANY('{$(paste -sd, "$1")}'::uuid[])"
}
requests() { # requests URL: the streams requests a server answered 200
	curl -s "$1/metrics" | sed -n 's/^sm_ingest_requests_total{code="200"} //p'
}

t_ndjson "$T_TMP/one.ndjson" 20
"$SM_BIN_DIR/sm-agent" ship --url "$HAP" --token-file "$T_TMP/token" --spool "$T_TMP/spool1" --batch 1 \
	"$T_TMP/one.ndjson" 2>"$T_TMP/ship1.err"
t_eq "20 streams through haproxy: all accepted" "$?|$(tail -n 1 "$T_TMP/ship1.err")" \
	"0|sm-agent: ship: 20 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (20 requests)"
t_eq "... stored once each" "$(stored "$T_TMP/one.ndjson.ids")" "20|20"
t_eq "... spread over both servers" "$([ "$(requests "$A_URL")" -gt 0 ] && [ "$(requests "$B_URL")" -gt 0 ] && echo yes)" yes

# one server dies: the health checks take it out, the other takes every stream
kill -KILL "$A_PID"
wait "$A_PID" 2>/dev/null
A_PID=
t0=$(date +%s%N)
t_ndjson "$T_TMP/two.ndjson" 30
"$SM_BIN_DIR/sm-agent" ship --url "$HAP" --token-file "$T_TMP/token" --spool "$T_TMP/spool2" --batch 1 \
	"$T_TMP/two.ndjson" 2>"$T_TMP/ship2.err"
t_eq "30 streams while a server is dead: all accepted" "$?|$(tail -n 1 "$T_TMP/ship2.err" | sed 's/ ([0-9]* requests.*//')" \
	"0|sm-agent: ship: 30 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost"
t_eq "... stored once each" "$(stored "$T_TMP/two.ndjson.ids")" "30|30"
for _ in $(seq 100); do
	[ "$(servers | awk '$1 == "ingest1" { print $2 }')" = 0 ] && break
	sleep 0.1
done
t1=$(date +%s%N)
t_eq "the dead server is taken out" "$(servers | tr '\n' ' ')" "ingest1 0 ingest2 2 "
echo "haproxy took the killed server out within $(( (t1 - t0) / 1000000 )) ms of its death (checks every 1 s, 2 failures)"

# two proxies for the agent, the first one dead: it goes to the second by itself
t_ndjson "$T_TMP/three.ndjson" 5
"$SM_BIN_DIR/sm-agent" ship --url "http://127.0.0.1:$(free_port),$HAP" --token-file "$T_TMP/token" \
	--spool "$T_TMP/spool3" "$T_TMP/three.ndjson" 2>"$T_TMP/ship3.err"
t_eq "an agent given a dead proxy first: delivered through the second" "$?|$(tail -n 1 "$T_TMP/ship3.err")" \
	"0|sm-agent: ship: 5 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (2 requests, 1 switch to the next server)"
t_eq "... stored once each" "$(stored "$T_TMP/three.ndjson.ids")" "5|5"

# one client address holds 64 connections at most: 200 half-open ones from 127.0.0.2 while another
# client asks /healthz through the proxy every 100 ms
flood=$SM_BIN_DIR/../tests/flood
"$flood" --target "127.0.0.1:$port" --conns 200 --mode half --from 127.0.0.2 --duration 4 \
	--probe /healthz >"$T_TMP/flood.out" 2>"$T_TMP/flood.err" &
fpid=$!
sleep 2
# the most connections one client holds, as HAProxy's stick table counts them (the 65th is counted
# for the instant before it is refused)
NFROM=$(hap_cmd "show table ingest" | grep -o 'conn_cur=[0-9]*' | cut -d= -f2 | sort -n | tail -n 1)
NFROM=${NFROM:-0}
wait "$fpid"
cat "$T_TMP/flood.err"
t_match "a client flooding the proxy: every other client's request answered" "$(cat "$T_TMP/flood.out")" '^probes=[1-9][0-9]* failed=0 '
echo "# the flooding address held $NFROM connections (HAProxy's count)"
t_eq "... and the flooding address holds 64 connections at most" "$([ "$NFROM" -ge 60 ] && [ "$NFROM" -le 65 ] && echo yes || echo "no ($NFROM)")" yes

kill -TERM "$HAP_PID"
wait "$HAP_PID" 2>/dev/null
HAP_PID=
srv_stop ingest "$B_PID" "$B_LOG"
B_PID=
t_done
