#!/usr/bin/env bash
# fleet: the guard agent rolled out with Ansible (deploy/ansible) to a simulated
# fleet of 5 hosts. Each host is a network namespace with its own address on a
# bridge, its own root file system (an overlay over this machine's, so that
# dpkg -i on one host is not seen by another), its own sshd, and a real redis
# under load; the backend (sm-ingest, sm-web) runs on the bridge's address.
# systemd is not PID 1 here: the hosts start services with tests/fleet/systemctl,
# which reads the same units and drop-ins (docs/fleet.md, "Test hosts").
# Shows: rollout in batches (packages, per-host tokens made through the API,
# configuration, guarded and healthy redis, the agents reporting); a second run
# changes nothing but a newer fleet profile; removal; a batch whose guarded service fails its health check
# rolled back whole, the rollout stopped; an upgrade to a new package version.
# sm-test-timeout: 1800
# (five hosts booted and rolled out over ssh: 800 to 900 s on a slow machine)
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || t_bail "root" "network namespaces and overlay roots need root"
for c in ansible-playbook ip unshare redis-server redis-benchmark; do
	command -v "$c" >/dev/null || t_bail "$c" "$c is missing: deploy/deps.sh test installs it"
done
[ -x /usr/sbin/sshd ] || t_bail "sshd" "openssh-server is missing: deploy/deps.sh test installs it"

NH=5
BR=smfbr$$
NET=10.$((77 + $$ % 100)).0   # one /24 per test run
FLEET=$SM_REPO/tests/fleet
build_debs 1.0.0 1.0.1

# ---- the hosts ----
cleanup_fleet() {
	local i
	for i in $(seq 1 $NH); do
		ip netns pids "smf$$-$i" 2>/dev/null | xargs -r kill -9 2>/dev/null
	done
	sleep 0.3
	for i in $(seq 1 $NH); do
		ip netns del "smf$$-$i" 2>/dev/null
	done
	ip link del "$BR" 2>/dev/null
	true
}
t_cleanup cleanup_fleet
ip link add "$BR" type bridge && ip addr add "$NET.1/24" dev "$BR" && ip link set "$BR" up || t_bail "bridge"
ssh-keygen -q -t ed25519 -N '' -f "$T_TMP/key"
for i in $(seq 1 $NH); do
	ns=smf$$-$i
	ip netns add "$ns" && ip link add "smf$$v$i" type veth peer name eth0 netns "$ns" &&
		ip link set "smf$$v$i" master "$BR" up &&
		ip netns exec "$ns" ip addr add "$NET.$((10 + i))/24" dev eth0 &&
		ip netns exec "$ns" ip link set eth0 up && ip netns exec "$ns" ip link set lo up || t_bail "host $i network"
	mkdir -p "$T_TMP/host$i"
	ip netns exec "$ns" unshare --mount --uts --propagation private --fork \
		"$FLEET/boot.sh" "$T_TMP/host$i" "fleet-$i" "$T_TMP/key.pub" "$FLEET/systemctl" >"$T_TMP/host$i.log" 2>&1 &
done
on() { # on I CMD: CMD (sh) on host I as root, over ssh
	ssh -i "$T_TMP/key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
		-o ConnectTimeout=5 "root@$NET.$((10 + $1))" "$2"
}
for i in $(seq 1 $NH); do
	for _ in $(seq 50); do on "$i" true 2>/dev/null && break; sleep 0.2; done
done
t_eq "5 hosts, each its own name and address" \
	"$(for i in $(seq 1 $NH); do on "$i" 'echo $(hostname) $(ip -4 -br addr show eth0 | awk "{print \$3}")'; done)" \
	"$(for i in $(seq 1 $NH); do echo "fleet-$i $NET.$((10 + i))/24"; done)"
on 1 'touch /etc/only-on-fleet-1'
t_eq "each host its own root file system" "$(on 2 'ls /etc/only-on-fleet-1 2>&1 | grep -c "No such"')$(ls /etc/only-on-fleet-1 2>/dev/null)" 1
# redis on every host, under load for the whole test
for i in $(seq 1 $NH); do
	on "$i" 'systemctl start redis-server && redis-cli ping >/dev/null &&
		(setsid redis-benchmark -q -l -c 2 -n 100000 -t get,set >/dev/null 2>&1 </dev/null &)' ||
		t_bail "redis on host $i"
done

# ---- the backend, on the bridge's address ----
sm_admin migrate >/dev/null || t_bail "migrate"
ADMIN=$(mk_token admin 2>/dev/null)
start_ingest --listen 0.0.0.0:0 --profile-merge-ms 0 || t_bail "sm-ingest starts"
start_web --listen 0.0.0.0:0 --no-worker || t_bail "sm-web starts"
IURL=http://$NET.1:${INGEST_URL##*:}
WURL=http://$NET.1:${WEB_URL##*:}

# ---- the playbook ----
guarded_pid() { on "$1" 'p=$(systemctl show -p MainPID --value redis-server); grep -q libsmguard /proc/$p/maps && echo "guarded $p" || echo "unguarded $p"'; }
cat >"$T_TMP/inventory" <<INV
[stackmine_agents]
$(for i in $(seq 1 $NH); do echo "fleet-$i ansible_host=$NET.$((10 + i))"; done)

[stackmine_agents:vars]
ansible_user=root
ansible_ssh_private_key_file=$T_TMP/key
ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'
ansible_python_interpreter=/usr/bin/python3
INV
# the service to guard and its health check (the role checks that the agent is loaded too)
cat >"$T_TMP/vars.json" <<JSON
{"stackmine_agent_deb": "$T_TMP/deb/stackmine-agent_1.0.0_$arch.deb",
 "stackmine_ingest_url": "$IURL", "stackmine_web_url": "$WURL", "stackmine_admin_token": "$ADMIN",
 "stackmine_health_retries": 5,
 "stackmine_guarded": [{"unit": "redis-server", "app": "redis", "labels": ["tier=cache"], "exe": "/usr/bin/redis-server",
   "health": "redis-cli ping | grep -q PONG"}]}
JSON
play() { # play LOGNAME [ARGS...]: runs site.yml; PLAY_RC, the log in $T_TMP/LOGNAME
	local log=$1
	shift
	ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_FORKS=5 ANSIBLE_PIPELINING=1 \
		ansible-playbook -i "$T_TMP/inventory" "$SM_REPO/deploy/ansible/site.yml" -e "@$T_TMP/vars.json" "$@" \
		>"$T_TMP/$log" 2>&1
	PLAY_RC=$?
}
recap() { # the PLAY RECAP as "host ok changed failed" lines
	awk '/^PLAY RECAP/ { r = 1; next } r && /ok=/ { h = $1; o = c = f = ""
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "ok") o = kv[2]; if (kv[1] == "changed") c = kv[2]
			if (kv[1] == "failed") f = kv[2] }
		print h, "changed=" c, "failed=" f }' "$T_TMP/$1" | sort
}

t0=$(date +%s%N)
play rollout.log
t1=$(date +%s%N)
echo "rollout of $NH hosts in batches of 2: $(( (t1 - t0) / 1000000 )) ms"
[ "$PLAY_RC" = 0 ] || tail -n 40 "$T_TMP/rollout.log"
t_eq "rollout: the playbook succeeds" "$PLAY_RC" 0
t_eq "rollout: batches of 2" "$(grep -c '^PLAY \[stackmine guard agents\]' "$T_TMP/rollout.log")" 3
t_eq "rollout: every host has the package, its configuration and a guarded, healthy redis" \
	"$(for i in $(seq 1 $NH); do on "$i" 'echo $(dpkg-query -W -f="\${Version}" stackmine-agent) $(grep "^SM_GUARD_URL=" /etc/stackmine/agent.conf) $(stat -c "%a %G" /etc/stackmine/agent.token) $(redis-cli ping)'; guarded_pid "$i" | cut -d" " -f1; done)" \
	"$(for i in $(seq 1 $NH); do echo "1.0.0 SM_GUARD_URL=$IURL 640 stackmine PONG"; echo guarded; done)"
t_eq "rollout: a token per host, made through the API and bound to it" \
	"$(pg_q "SELECT string_agg(host || ':' || role, ',' ORDER BY host) FROM tokens WHERE host IS NOT NULL AND revoked_at IS NULL")" \
	"$(seq -f 'fleet-%g:ingest' 1 $NH | paste -sd,)"
for _ in $(seq 50); do
	[ "$(pg_q "SELECT count(DISTINCT host) FROM agent_procs WHERE mode IN ('train', 'guard') AND app = 'redis'")" = $NH ] && break
	sleep 0.2
done
t_eq "rollout: every host's agent reports (the Fleet page)" \
	"$(curl -s -H "Authorization: Bearer $ADMIN" "$WURL/api/v1/hosts" | python3 -c 'import json, sys
print(" ".join("%s:%s:%s" % (h["host"], h["status"], ",".join(h["apps"])) for h in sorted(json.load(sys.stdin)["hosts"], key=lambda h: h["host"])))')" \
	"$(for i in $(seq 1 $NH); do printf 'fleet-%d:live:redis ' "$i"; done | sed 's/ $//')"

# ---- a second run changes nothing ----
pids=$(for i in $(seq 1 $NH); do guarded_pid "$i"; done)
play again.log
# nothing changes but the fleet's profile, which the hosts fetch again when the fleet learnt more
# meanwhile (each training agent uploads what it learnt every 300 s, and the rollout may take longer)
t_eq "idempotent: a second run succeeds and changes nothing but a newer fleet profile" \
	"$PLAY_RC|$(awk '/^TASK \[/ { t = $0 } /^changed: \[/ && t !~ /The fleet.s profile/ { print t " " $0 }' "$T_TMP/again.log")" "0|"
t_eq "idempotent: no service was restarted" "$(for i in $(seq 1 $NH); do guarded_pid "$i"; done)" "$pids"

# ---- removal: hosts 3 to 5 ----
play remove.log -e stackmine_state=absent --limit fleet-3,fleet-4,fleet-5
[ "$PLAY_RC" = 0 ] || tail -n 30 "$T_TMP/remove.log"
t_eq "removal: the playbook succeeds" "$PLAY_RC" 0
t_eq "removal: package purged, redis running unguarded" \
	"$(for i in 3 4 5; do on "$i" 'echo $(dpkg -l stackmine-agent 2>/dev/null | grep -c "^ii") $(ls /etc/systemd/system/redis-server.service.d 2>/dev/null | wc -l) $(redis-cli ping)'; guarded_pid "$i" | cut -d" " -f1; done)" \
	"$(for i in 3 4 5; do echo "0 0 PONG"; echo unguarded; done)"
t_eq "removal: their tokens revoked, the others kept" \
	"$(pg_q "SELECT string_agg(host || ':' || (revoked_at IS NOT NULL)::text, ',' ORDER BY host) FROM tokens WHERE host IS NOT NULL")" \
	"fleet-1:false,fleet-2:false,fleet-3:true,fleet-4:true,fleet-5:true"

# ---- a batch whose guarded service fails its health check is rolled back whole ----
# on fleet-3 the check fails once the agent is loaded (standing for a service the guard breaks)
cat >>"$T_TMP/inventory" <<'INV'
[broken]
fleet-3
INV
python3 - "$T_TMP/vars.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
g = v["stackmine_guarded"][0]
g["health"] = "{% if inventory_hostname in groups['broken'] %}redis-cli ping | grep -q PONG && ! grep -q libsmguard /proc/$(systemctl show -p MainPID --value redis-server)/maps{% else %}" + g["health"] + "{% endif %}"
json.dump(v, open(sys.argv[1], "w"))
PY
play broken.log --limit fleet-3,fleet-4,fleet-5 -e stackmine_health_retries=2
t_eq "failed batch: the playbook fails" "$([ "$PLAY_RC" != 0 ] && echo failed)" failed
t_match "failed batch: it says which batch was rolled back" "$(cat "$T_TMP/broken.log")" \
	'failed its health check; the batch was rolled back'
t_eq "failed batch: both hosts of the batch unguarded again, their redis healthy; the next batch never started" \
	"$(for i in 3 4 5; do on "$i" 'echo $(ls /etc/systemd/system/redis-server.service.d 2>/dev/null | wc -l) $(redis-cli ping) $(dpkg-query -W -f="\${Version}" stackmine-agent 2>/dev/null || echo none)'; guarded_pid "$i" | cut -d" " -f1; done)" \
	"0 PONG 1.0.0
unguarded
0 PONG 1.0.0
unguarded
0 PONG none
unguarded"

# ---- upgrade: hosts 1 and 2 to 1.0.1 ----
python3 - "$T_TMP/vars.json" "$T_TMP/deb/stackmine-agent_1.0.1_$arch.deb" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
v["stackmine_agent_deb"] = sys.argv[2]
json.dump(v, open(sys.argv[1], "w"))
PY
before=$(for i in 1 2; do guarded_pid "$i"; done)
play upgrade.log --limit fleet-1,fleet-2
[ "$PLAY_RC" = 0 ] || tail -n 30 "$T_TMP/upgrade.log"
t_eq "upgrade: the playbook succeeds" "$PLAY_RC" 0
after=$(for i in 1 2; do guarded_pid "$i"; done)
t_eq "upgrade: version 1.0.1, redis restarted and guarded by the new library" \
	"$(for i in 1 2; do on "$i" 'dpkg-query -W -f="\${Version}\n" stackmine-agent'; done) $(paste -d' ' <(cut -d' ' -f1 <<<"$after") <(paste -d' ' <(cut -d' ' -f2 <<<"$before") <(cut -d' ' -f2 <<<"$after") | awk '{print ($1 != $2) ? "restarted" : "same"}') | tr '\n' ' ')" \
	"1.0.1
1.0.1 guarded restarted guarded restarted "

# ---- a new host guards at once with what the fleet learnt ----
# the training processes that the removal and the upgrade stopped uploaded what they learnt as they exited
t_eq "fleet profile: learnt on every host" "$(pg_q "SELECT string_agg(DISTINCT host, ',' ORDER BY host) FROM profile_uploads")" \
	"fleet-1,fleet-2,fleet-3,fleet-4,fleet-5"
play newhost.log --limit fleet-5
[ "$PLAY_RC" = 0 ] || tail -n 30 "$T_TMP/newhost.log"
# every host's upload is weighed; on a loaded machine one host may learn thresholds far off the others'
# and be held back, with its reason (the rule itself is test_guard's)
echo "merged: $(pg_q "SELECT hosts, held_back FROM profiles_merged")"
t_eq "new host: the playbook fetched the fleet's profile, weighed from every host's" \
	"$PLAY_RC|$(grep -A2 "The fleet's profile" "$T_TMP/newhost.log" | grep -c 'changed: \[fleet-5\]')|$(pg_q "SELECT hosts + jsonb_array_length(held_back), hosts >= 3, stale, (SELECT count(*) FROM jsonb_array_elements(held_back) h WHERE h->>'reason' NOT LIKE 'loop %: threshold %') FROM profiles_merged")" \
	"0|1|5|t|f|0"
for _ in $(seq 50); do
	[ -n "$(pg_q "SELECT 1 FROM agent_procs WHERE host = 'fleet-5' AND NOT exited AND last_seen > now() - interval '1 minute'")" ] && break
	sleep 0.2
done
t_eq "new host: its redis guards from the start, with the fleet's thresholds" \
	"$(pg_q "SELECT mode FROM agent_procs WHERE host = 'fleet-5' ORDER BY started_at DESC LIMIT 1")" guard
play newhost2.log --limit fleet-5
t_eq "new host: a second run changes nothing (the same profile is not written again)" "$PLAY_RC|$(recap newhost2.log)" \
	"0|fleet-5 changed=0 failed=0"

t_done
