#!/usr/bin/env bash
# chaos: the whole backend spread over hosts, each a network namespace with its
# own address on a bridge - etcd x3 and PostgreSQL x3 under Patroni (db1-db3,
# deploy/patroni/stackmine.yml, synchronous replication), HAProxy (hap,
# deploy/haproxy/ingest.cfg), two sm-ingest (ing1, ing2), two miner workers
# (wk1, wk2) and three agent hosts (ag1-ag3) shipping a steady load through
# HAProxy with both ingest servers as fallbacks. During the load:
#   - the PostgreSQL primary's host is lost (SIGKILL to its etcd, Patroni and
#     PostgreSQL at once), and Patroni promotes the synchronous standby;
#   - one agent host's link is cut (SM_CHAOS_CUT_S, 60 s for `make chaos`);
#   - an ingest server is killed (SIGKILL);
#   - a mining run cut into parts is started, and the worker coordinating it
#     is killed (SIGKILL) in the middle: the other worker takes it after the
#     lease.
# Afterwards every stream an agent produced is stored exactly once, the run is
# done, and no spool holds anything. Prints the failover time, the longest
# ingest outage agents saw, the peak spool backlog, streams lost and duplicates.
# `make test` runs it short (links cut for 20 s); `make chaos` the full length.
: "${SM_TEST_FRESH_DB:=0}"   # its own PostgreSQL cluster, not the runner's
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || t_bail "root" "network namespaces need root"
for c in ip unshare runuser patroni etcd etcdctl haproxy psql curl; do
	command -v "$c" >/dev/null || t_bail "$c" "$c is missing: deploy/deps.sh test installs it"
done
genfleet=${SM_GENFLEET:-$SM_BIN_DIR/../tests/genfleet}
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"
CUT_S=${SM_CHAOS_CUT_S:-20}
LEASE=5
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

# ---- hosts ----
BR=smcbr$$
NET=10.$((200 + $$ % 50)).$(($$ / 50 % 250))
declare -A IP=([db1]=11 [db2]=12 [db3]=13 [hap]=20 [ing1]=21 [ing2]=22 [wk1]=31 [wk2]=32
	[ag1]=41 [ag2]=42 [ag3]=43)
HOSTS=(db1 db2 db3 hap ing1 ing2 wk1 wk2 ag1 ag2 ag3)
ns() { echo "smc$$-$1"; }
ip_of() { echo "$NET.${IP[$1]}"; }
on() { local h=$1; shift; ip netns exec "$(ns "$h")" "$@"; }
kill_host() { ip netns pids "$(ns "$1")" 2>/dev/null | xargs -r kill -9 2>/dev/null; }
cleanup_hosts() {
	local h
	for h in "${HOSTS[@]}"; do kill_host "$h"; done
	sleep 0.5
	for h in "${HOSTS[@]}"; do ip netns del "$(ns "$h")" 2>/dev/null; done
	ip link del "$BR" 2>/dev/null
	true
}
t_cleanup cleanup_hosts
# the servers' logs outlive the run, for a failure's post-mortem
LOGS=${SM_CHAOS_LOGS:-$SM_REPO/build/chaos-logs}
t_cleanup 'rm -rf "$LOGS"; mkdir -p "$LOGS"; cp "$T_TMP"/*.log "$LOGS"/ 2>/dev/null; for h in ag1 ag2 ag3; do cp "$T_TMP/$h/log" "$LOGS/$h.rounds" 2>/dev/null; cp "$T_TMP/$h/agent.log" "$LOGS/$h.log" 2>/dev/null; done; true'
chmod 755 "$T_TMP"
ip link add "$BR" type bridge && ip addr add "$NET.1/24" dev "$BR" && ip link set "$BR" up || t_bail "bridge"
for h in "${HOSTS[@]}"; do
	ip netns add "$(ns "$h")" && ip link add "smc$$v${IP[$h]}" type veth peer name eth0 netns "$(ns "$h")" &&
		ip link set "smc$$v${IP[$h]}" master "$BR" up &&
		on "$h" ip addr add "$(ip_of "$h")/24" dev eth0 && on "$h" ip link set eth0 up &&
		on "$h" ip link set lo up || t_bail "host $h network"
done
t_eq "hosts: 11, each its own address" "$(for h in "${HOSTS[@]}"; do on "$h" ip -4 -br addr show eth0 | awk '{print $3}'; done | sort -u | wc -l)" 11

# ---- etcd x3 and PostgreSQL x3 under Patroni ----
ETCD_CLUSTER= ETCD_HOSTS=
for i in 1 2 3; do
	ETCD_CLUSTER+="${ETCD_CLUSTER:+,}e$i=http://$(ip_of db$i):2380"
	ETCD_HOSTS+="${ETCD_HOSTS:+,}$(ip_of db$i):2379"
done
SUPER_PW=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
SM_PW=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
for i in 1 2 3; do
	a=$(ip_of db$i)
	mkdir -p "$T_TMP/db$i"
	chown postgres:postgres "$T_TMP/db$i"
	on db$i etcd --name e$i --data-dir "$T_TMP/db$i/etcd" --initial-cluster-token "smc$$" \
		--listen-client-urls "http://$a:2379" --advertise-client-urls "http://$a:2379" \
		--listen-peer-urls "http://$a:2380" --initial-advertise-peer-urls "http://$a:2380" \
		--initial-cluster "$ETCD_CLUSTER" --initial-cluster-state new >"$T_TMP/etcd$i.log" 2>&1 &
done
for _ in $(seq 100); do
	ETCDCTL_API=3 etcdctl --endpoints "$ETCD_HOSTS" endpoint health >/dev/null 2>&1 && break
	sleep 0.2
done
t_eq "etcd: 3 healthy members" "$(ETCDCTL_API=3 etcdctl --endpoints "$ETCD_HOSTS" endpoint health 2>&1 | grep -c 'is healthy')" 3
# patroni_start I: Patroni (as postgres) on host dbI, with a private socket directory and none of
# the runner's PG* variables (PGPASSWORD would beat the passwords Patroni gives libpq in its pgpass)
patroni_start() {
	local a
	a=$(ip_of "db$1")
	on "db$1" unshare --mount --propagation private sh -c '
		mount -t tmpfs -o mode=0775 tmpfs /var/run/postgresql && chown postgres:postgres /var/run/postgresql &&
		cd / && exec runuser -u postgres -- env -i "$@"' sh PATH=/usr/bin:/bin LANG=C.UTF-8 \
		PATRONI_NAME="db$1" PATRONI_SCOPE="smc$$" \
		PATRONI_RESTAPI_LISTEN="$a:8008" PATRONI_RESTAPI_CONNECT_ADDRESS="$a:8008" \
		PATRONI_POSTGRESQL_LISTEN="$a:5432" PATRONI_POSTGRESQL_CONNECT_ADDRESS="$a:5432" \
		PATRONI_POSTGRESQL_DATA_DIR="$T_TMP/db$1/data" PATRONI_POSTGRESQL_BIN_DIR="$PGBIN" \
		PATRONI_POSTGRESQL_PGPASS="$T_TMP/db$1/pgpass" PATRONI_ETCD3_HOSTS="$ETCD_HOSTS" \
		PATRONI_SUPERUSER_PASSWORD="$SUPER_PW" PATRONI_REPLICATION_PASSWORD="$SUPER_PW" \
		PATRONI_REWIND_PASSWORD="$SUPER_PW" PATRONI_LOG_LEVEL=${SM_CHAOS_PATRONI_LOG:-WARNING} \
		patroni "$T_TMP/patroni.yml" >>"$T_TMP/patroni$1.log" 2>&1 &
}
# the postgres user may not be able to enter the repository (a clone in a mode-0700 directory)
cp "$SM_REPO/deploy/patroni/stackmine.yml" "$T_TMP/patroni.yml"
chmod 644 "$T_TMP/patroni.yml"
for i in 1 2 3; do patroni_start $i; done
role() { curl -s --max-time 1 "http://$(ip_of "$1"):8008/patroni" | sed -n 's/.*"role": *"\([a-z_]*\)".*/\1/p'; }
leader() { local h; for h in db1 db2 db3; do [ "$(role $h)" = master ] || [ "$(role $h)" = primary ] && echo $h; done; }
streaming() { # how many standbys stream from the leader, and how many of them are synchronous
	PGPASSWORD=$SUPER_PW psql -XAt -h "$(ip_of "$1")" -U postgres -d postgres \
		-c "SELECT count(*) || ' ' || count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication" 2>/dev/null
}
deadline=$((SECONDS + 120))
while [ $SECONDS -lt $deadline ]; do
	L=$(leader)
	[ -n "$L" ] && [ "$(streaming "$L")" = "2 1" ] && break
	sleep 0.2
done
t_match "patroni: one primary" "$L" '^db[123]$'
t_eq "patroni: two standbys streaming, one of them synchronous" "$(streaming "$L")" "2 1"
if [ -z "$L" ] || [ "$(streaming "$L")" != "2 1" ]; then
	for i in 1 2 3; do echo "-- patroni$i.log"; tail -n 20 "$T_TMP/patroni$i.log"; done
	t_bail "patroni" "no primary with two standbys"
fi

PGPASSWORD=$SUPER_PW psql -Xq -h "$(ip_of "$L")" -U postgres -d postgres \
	-c "CREATE ROLE stackmine LOGIN PASSWORD '$SM_PW'" -c "CREATE DATABASE stackmine OWNER stackmine" ||
	t_bail "database" "cannot create the stackmine role and database"
# libpq does not try the next host after a FATAL such as a database a standby has not replayed yet
for _ in $(seq 100); do
	n=0
	for i in 1 2 3; do
		PGPASSWORD=$SM_PW psql -XAt -h "$(ip_of db$i)" -U stackmine -d stackmine -c "SELECT 1" >/dev/null 2>&1 && n=$((n + 1))
	done
	[ $n = 3 ] && break
	sleep 0.1
done
CONN="host=$(ip_of db1),$(ip_of db2),$(ip_of db3) port=5432,5432,5432 dbname=stackmine user=stackmine password=$SM_PW target_session_attrs=read-write connect_timeout=2"
# the test's own queries go to the primary straight (after the failover the lost db1, first in
# CONN, would cost each of them the connect timeout and the polls below their pace)
QCONN=$CONN
cq() { psql -XAt "$QCONN" -c "$1"; }
"$SM_BIN_DIR/sm-admin" --db "$CONN" migrate >/dev/null || t_bail "migrate"
TOKEN=$("$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role ingest --name chaos 2>/dev/null)

# ---- ingest x2 behind HAProxy, workers x2 ----
for h in ing1 ing2; do
	on $h "$SM_BIN_DIR/sm-ingest" --db "$CONN" --listen "$(ip_of $h):8080" --log-level warn >"$T_TMP/$h.log" 2>&1 &
done
on hap env SM_HAPROXY_BIND="$(ip_of hap):8080" SM_HAPROXY_SOCKET="$T_TMP/haproxy.sock" \
	SM_INGEST_1="$(ip_of ing1):8080" SM_INGEST_2="$(ip_of ing2):8080" \
	haproxy -db -f "$SM_REPO/deploy/haproxy/ingest.cfg" >"$T_TMP/haproxy.log" 2>&1 &
deadline=$((SECONDS + 60))
# both servers up (HAProxy takes a server for up until its checks say otherwise: one that is still
# starting would answer the next request through it 503)
while [ $SECONDS -lt $deadline ]; do
	[ "$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "http://$(ip_of hap):8080/healthz")" = 200 ] &&
		[ "$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "http://$(ip_of ing1):8080/healthz")" = 200 ] &&
		[ "$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "http://$(ip_of ing2):8080/healthz")" = 200 ] && break
	sleep 0.1
done
if [ $SECONDS -ge $deadline ]; then
	# not ready within a minute: say which, and what each said (the servers' logs are kept below)
	for h in hap ing1 ing2; do
		echo "  | $h /healthz: $(curl -s --max-time 2 -w ' (%{http_code})' "http://$(ip_of $h):8080/healthz")"
	done
	sed 's/^/  | haproxy: /' "$T_TMP/haproxy.log" | tail -n 10
	for h in ing1 ing2; do sed "s/^/  | $h: /" "$T_TMP/$h.log" | tail -n 10; done
fi
# HAProxy takes its servers for up before its first checks: the wait above may end in that window,
# and the checks made while the servers were still starting then take both out until 2 good ones
# ("No server is available", seen in 2 runs of 3). So: until HAProxy answers from a server; each
# answer that is not one is printed
hap_status=
for _ in $(seq 50); do
	out=$(curl -s -i --max-time 2 "http://$(ip_of hap):8080/healthz")
	hap_status=$(head -n 1 <<<"$out" | cut -d' ' -f2)
	[ "$hap_status" = 200 ] && break
	echo "  | through HAProxy, not 200 yet: $(head -c 400 <<<"$out" | tr '\r\n' '  ')"
	sleep 0.1
done
t_eq "ingest through HAProxy answers" "$hap_status" 200
for h in wk1 wk2; do
	on $h "$SM_BIN_DIR/sm-miner" --db "$CONN" worker --quiet --threads 1 --lease "$LEASE" --part-streams 100 \
		>"$T_TMP/$h.log" 2>&1 &
done

# streams for the mining run, sent before the chaos
"$genfleet" --streams 1000 --events 300 --apps chaosmine --hosts 20 --seed 3 --out "$T_TMP/mine.ndjson" 2>/dev/null
split -l 100 "$T_TMP/mine.ndjson" "$T_TMP/mine."
for f in "$T_TMP"/mine.??; do
	curl -s --max-time 120 -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/x-ndjson' \
		--data-binary "@$f" "http://$(ip_of hap):8080/api/v1/streams"
done >"$T_TMP/mine.codes"
t_eq "mining fleet stored" "$(sort -u "$T_TMP/mine.codes")|$(cq "SELECT count(*) FROM streams WHERE app = 'chaosmine'")" "200|1000"

# ---- the agents: a stream every 0.25 s each, through HAProxy, the ingest servers as fallbacks ----
URLS="http://$(ip_of hap):8080,http://$(ip_of ing1):8080,http://$(ip_of ing2):8080"
cat >"$T_TMP/agent.sh" <<'EOF'
# agent.sh DIR: ships a new stream every 0.25 s until DIR/stop exists, then drains its spool;
# DIR/sent holds every stream id it produced, DIR/log "END-TIME DELIVERED BACKLOG" per round.
dir=$1
sp=$dir/spool
# one attempt per server and round: what fails is spooled at once and production goes on, as a
# guard agent's does
ship() { "$SM_BIN_DIR/sm-agent" "$@" --url "$URLS" --token "$TOKEN" --spool "$sp" --retries 0 --timeout 2 \
	>>"$dir/agent.log" 2>&1; }
while [ ! -e "$dir/stop" ]; do
	id=$(cat /proc/sys/kernel/random/uuid)
	sed -e "s/@ID@/$id/" -e "s/\"web-17\"/\"$(basename "$dir")\"/" "$SM_REPO/tests/integration/data/stream.json" |
		tr -d '\n' >"$dir/s.json"
	echo "$id" >>"$dir/sent"
	ship ship "$dir/s.json"
	rc=$?
	if [ $rc = 0 ] && [ -n "$(find "$sp" -maxdepth 1 -name '*.json' 2>/dev/null | head -n 1)" ]; then
		ship drain
		rc=$?
	fi
	echo "$(date +%s.%N) $((rc == 0)) $(find "$sp" -maxdepth 1 -name '*.json' 2>/dev/null | wc -l)" >>"$dir/log"
	sleep 0.25
done
for _ in $(seq 60); do
	[ -z "$(find "$sp" -maxdepth 1 -name '*.json' 2>/dev/null | head -n 1)" ] && break
	ship drain || sleep 1
done
touch "$dir/done"
EOF
for h in ag1 ag2 ag3; do
	mkdir -p "$T_TMP/$h"
	on $h env SM_BIN_DIR="$SM_BIN_DIR" SM_REPO="$SM_REPO" URLS="$URLS" TOKEN="$TOKEN" \
		bash "$T_TMP/agent.sh" "$T_TMP/$h" &
done
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T0=$(now)
sleep 6

# ---- the primary's machine lost, an agent's link cut ----
OLD=$L
cq "SELECT count(*) FROM streams" >/dev/null
T_KILL=$(now)
# a machine lost: its processes gone and its link silent (no resets for the others' connections)
kill_host "$OLD"
ip link set "smc$$v${IP[$OLD]}" down
ip link set "smc$$v${IP[ag1]}" down
T_CUT=$T_KILL
FAILOVER=
deadline=$((SECONDS + 90))
while [ $SECONDS -lt $deadline ]; do
	if timeout 3 psql -XAt "$CONN" -c "SELECT txid_current()" >/dev/null 2>&1; then
		FAILOVER=$(since "$T_KILL")
		break
	fi
	sleep 0.2
done
NEW=$(leader)
[ -n "$NEW" ] && QCONN="host=$(ip_of "$NEW") port=5432 dbname=stackmine user=stackmine password=$SM_PW target_session_attrs=read-write connect_timeout=2"
t_match "failover: a new primary" "$NEW" '^db[123]$'
[ "$NEW" != "$OLD" ] || t_fail "failover: the primary changed" "still $OLD"
t_match "failover: writes commit again" "$FAILOVER" '^[0-9]'

# ---- an ingest server killed ----
sleep 3
kill_host ing1
T_ING=$(now)

# ---- a mining run, its coordinator killed in the middle ----
R=$("$SM_BIN_DIR/sm-miner" --db "$CONN" run --queue --quiet --app chaosmine --threshold-fraction 0.01)
COORD=
deadline=$((SECONDS + 60))
while [ $SECONDS -lt $deadline ]; do
	COORD=$(cq "SELECT r.worker FROM runs r WHERE r.id = $R AND r.status = 'running'
		AND EXISTS (SELECT 1 FROM run_parts p WHERE p.run_id = r.id AND p.status <> 'queued')")
	[ -n "$COORD" ] && break
	sleep 0.02
done
t_match "run: taken and cut into parts" "$COORD" ':[0-9]+$'
kill -9 "${COORD##*:}" 2>/dev/null
T_WK=$(now)
deadline=$((SECONDS + 180))
while [ $SECONDS -lt $deadline ]; do
	case $(cq "SELECT status FROM runs WHERE id = $R") in done|failed) break ;; esac
	sleep 0.1
done
RUN_S=$(since "$T_WK")
t_eq "run: done after its coordinator was killed, by the other worker" \
	"$(cq "SELECT status, attempts, worker <> '$COORD' FROM runs WHERE id = $R")" "done|2|t"
R1=$("$SM_BIN_DIR/sm-miner" --db "$CONN" run --quiet --app chaosmine --threshold-fraction 0.01 --part-streams 0 2>/dev/null)
# (patterns and collapsed stacks: the clusters' distance weights follow the frame statistics,
# which the agents' streams keep changing meanwhile)
digest() {
	cq "SELECT md5(string_agg(concat_ws(':', kind, rank, cost_ns, events, streams, frame_ids::text), ','
		ORDER BY kind, rank)) || ' ' || (SELECT md5(string_agg(concat_ws(':', kind, stack_id, stream_ref, cost_ns,
		events), ',' ORDER BY kind, stack_id, stream_ref)) FROM run_stacks WHERE run_id = $1)
		FROM patterns WHERE run_id = $1"
}
t_eq "run: the same patterns and collapsed stacks as a run in one piece" "$(digest "$R")" "$(digest "${R1:-0}")"

# ---- the link back, some more load, then the agents stop ----
rest=$(awk -v c="$CUT_S" -v s="$(since "$T_CUT")" 'BEGIN { r = c - s; print (r > 0 ? r : 0) }')
sleep "$rest"
ip link set "smc$$v${IP[ag1]}" up
T_UP=$(now)
sleep 8
for h in ag1 ag2 ag3; do touch "$T_TMP/$h/stop"; done
for _ in $(seq 900); do
	[ -e "$T_TMP/ag1/done" ] && [ -e "$T_TMP/ag2/done" ] && [ -e "$T_TMP/ag3/done" ] && break
	sleep 0.1
done
LOAD_S=$(since "$T0")
# the longest time the database stored no agent stream, and when it ended
GAP=$(cq "SELECT round(g, 1) || ' s, until ' || round(e - $T_KILL, 1) FROM (
	SELECT extract(epoch FROM received_at - lag(received_at) OVER (ORDER BY received_at)) AS g,
	       extract(epoch FROM received_at) AS e FROM streams WHERE app = 'nginx') x
	WHERE g IS NOT NULL ORDER BY g DESC LIMIT 1")

# ---- the count ----
cat "$T_TMP"/ag?/sent | sort >"$T_TMP/sent"
cq "SELECT stream_id FROM streams WHERE app = 'nginx'" | sort >"$T_TMP/stored"
SENT=$(wc -l <"$T_TMP/sent")
LOST=$(comm -23 "$T_TMP/sent" "$T_TMP/stored" | wc -l)
EXTRA=$(comm -13 "$T_TMP/sent" "$T_TMP/stored" | wc -l)
DUPS=$(cq "SELECT count(*) - count(DISTINCT stream_id) FROM streams")
SPOOLED=$(find "$T_TMP"/ag?/spool -type f 2>/dev/null | wc -l)
t_match "agents: streams produced" "$SENT" '^[1-9][0-9]+$'
t_eq "every stream stored: lost" "$LOST" 0
t_eq "no stream stored that no agent produced" "$EXTRA" 0
t_eq "duplicates" "$DUPS" 0
t_eq "nothing left in any spool (rejected included)" "$SPOOLED" 0
# the longest stretch an agent could not deliver: the longest time between two rounds that
# delivered everything (a round takes about 0.3 s when the servers answer)
outage() {
	awk '$2 == 1 && $3 == 0 { if (last != "" && $1 - last > m) m = $1 - last; last = $1 }
	     END { printf "%.1f", m }' "$1"
}
PEAK=$(cat "$T_TMP"/ag?/log | awk '$3 > m { m = $3 } END { print m + 0 }')
OUT_CUT=$(outage "$T_TMP/ag1/log")
OUT2=$(outage "$T_TMP/ag2/log")
OUT3=$(outage "$T_TMP/ag3/log")
OUT_UP=$(printf '%s\n%s\n' "$OUT2" "$OUT3" | sort -n | tail -n 1)
t_match "the cut agent's backlog was drained after its link came back" "$(tail -n 1 "$T_TMP/ag1/log" | awk '{print $3}')" '^0$'
t_eq "the cut agent saw an outage at least as long as the cut" \
	"$(awk -v o="$OUT_CUT" -v c="$CUT_S" 'BEGIN { print (o >= c - 1) ? "yes" : "no (" o " s)" }')" yes
t_eq "hosts with their link never saw an outage longer than the failover plus 10 s" \
	"$(awk -v o="$OUT_UP" -v f="${FAILOVER:-999}" 'BEGIN { print (o <= f + 10) ? "yes" : "no (" o " s)" }')" yes

echo "# chaos: $LOAD_S s of load from 3 agent hosts, $SENT streams produced; link of ag1 cut for ${CUT_S} s"
echo "# failover: primary $OLD lost, $NEW promoted; writes commit again ${FAILOVER:-?} s after the loss;" \
	"no stream stored for ${GAP:-?} s after the loss"
echo "# longest ingest outage seen by an agent: ${OUT_UP} s (link up), ${OUT_CUT} s (ag1, link cut ${CUT_S} s)"
echo "# peak spool backlog: $PEAK streams; streams lost: $LOST; duplicates: $DUPS"
echo "# mining run $R: coordinator killed, done by the other worker $RUN_S s later (lease ${LEASE} s)"
t_done
