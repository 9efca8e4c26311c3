#!/usr/bin/env bash
# Names for frames agents could not name (docs/symbols.md), end to end: a stripped server of our
# own (guardtest built here, its debug file split off) run under the guard through a link named
# x-server ships `x-server+0xOFFSET` frames with its build id; a run is mined; Debian's debuginfod
# on loopback serves the debug file and sm-miner's next run names the frames first: the frames
# are aliases of `x-server!function`, the earlier run shows the new names through the API, the
# later one has each function as one frame and the statistics count it once per stream.
# Then libc6-dbg's .build-id tree names a libc frame; `sm-admin debuginfo add` and
# POST /api/v1/debuginfo (admin only, hostile files refused with the reason) name uploaded ones.
# sm-test-timeout: 300
. "$(dirname "$0")/../lib.sh"

BIN=$SM_BIN_DIR
GUARD=$BIN/sm-guard
q() { pg_q "$@"; }
unset DEBUGINFOD_URLS

command -v debuginfod >/dev/null || t_bail "debuginfod is not installed (deploy/deps.sh test)"
sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
ADMIN=$(mk_token admin 2>/dev/null)
ANALYST=$(mk_token analyst 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
start_ingest || t_bail "sm-ingest starts"
start_web --no-worker || t_bail "sm-web starts"

# ---- a stripped server and its debug file ----

S=$T_TMP/srv
mkdir -p "$S" "$T_TMP/debug"
gcc -std=c11 -g -O2 -D_GNU_SOURCE -pthread -rdynamic -o "$S/symserver" "$SM_REPO/tests/guard/guardtest.c" ||
	t_bail "building the test server"
objcopy --only-keep-debug "$S/symserver" "$T_TMP/debug/symserver.debug"
objcopy --strip-all "$S/symserver"
objcopy --add-gnu-debuglink="$T_TMP/debug/symserver.debug" "$S/symserver"
ln -s symserver "$S/x-server"
bid=$(readelf -n "$S/symserver" | sed -n 's/.*Build ID: //p')
read -r sa ss < <(nm -S "$T_TMP/debug/symserver.debug" | awk '$4 == "spin_inner" {print $1, $2}')
t_eq "the server is stripped: spin_inner is in its debug file only" \
	"$(nm "$S/symserver" 2>&1 | grep -c spin_inner):$([ -n "$sa" ] && echo found)" "0:found"

PROF=$T_TMP/profiles
PORT=$(free_port)
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$S/x-server" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
GPID=$!
# (ready when it says so: a fixed pause lost the race on a loaded machine, and every check after it)
for _ in $(seq 1 200); do grep -q '^ready' "$T_TMP/server.out" 2>/dev/null && break; sleep 0.05; done
"$S/x-server" client "$PORT" 5000 4 fast:90,spin=5:10 >/dev/null || t_fail "training load" "$(cat "$T_TMP/server.out")"
"$S/x-server" client "$PORT" 1 1 quit:1 >/dev/null 2>&1
wait "$GPID"
SM_GUARD_REPORTS_PER_MIN=100000 "$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "$INGEST_URL" \
	--token-file "$T_TMP/token" --app symsrv -- "$S/x-server" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
GPID=$!
for _ in $(seq 1 200); do grep -q '^ready' "$T_TMP/server.out" 2>/dev/null && break; sleep 0.05; done
mix=$("$S/x-server" client "$PORT" 300 2 fast:80,spin=40:20) || t_fail "guarded load" "$(cat "$T_TMP/server.out")"
"$S/x-server" client "$PORT" 1 1 quit:1 >/dev/null 2>&1
wait "$GPID"
spins=$(awk '$1 == "spin" {print $3}' <<<"$mix")
echo "slow requests: $spins spins"

t_eq "the main module is named as the program was started (x-server, not symserver)" \
	"$(q "SELECT count(*) > 0, count(*) FILTER (WHERE name LIKE 'symserver%') FROM frames WHERE name LIKE 'x-server%'")" "t|0"
t_eq "guard.exe stays the executable's real path" \
	"$(q "SELECT DISTINCT labels->>'guard.exe' FROM streams WHERE app = 'symsrv'")" "$S/symserver"
t_eq "spin_inner ships as x-server+0xOFFSET" \
	"$(q "SELECT count(*) > 0 FROM frames f JOIN frame_addrs a ON a.frame_id = f.id
	       WHERE f.name LIKE 'x-server+0x%' AND a.addr >= x'$sa'::bigint AND a.addr < x'$sa'::bigint + x'$ss'::bigint")" t
t_eq "ingest stored each unnamed frame's build id and address (the name's own offset)" \
	"$(q "SELECT count(*) FROM frames f JOIN frame_addrs a ON a.frame_id = f.id WHERE f.name LIKE 'x-server+0x%'
	       AND (a.build_id <> '$bid' OR f.name <> 'x-server+0x' || to_hex(a.addr))")|$(q "SELECT count(*) > 0 FROM frame_addrs WHERE build_id = '$bid'")" "0|t"
t_eq "and of no named frame" "$(q "SELECT count(*) FROM frame_addrs a JOIN frames f ON f.id = a.frame_id WHERE f.name LIKE '%!%'")" 0

run1=$("$BIN/sm-miner" run --quiet --app symsrv --kind run --aoi thread --threshold-fraction 0.05 2>"$T_TMP/miner.err") ||
	t_fail "sm-miner run (before)" "$(cat "$T_TMP/miner.err")"
t_eq "before: spin_inner has no name (exported functions have theirs from .dynsym)" \
	"$(q "SELECT count(*) FILTER (WHERE name = 'x-server!spin_inner'), count(*) FILTER (WHERE name = 'x-server!spin_cpu') > 0
	       FROM frames WHERE name LIKE 'x-server!%'")" "0|t"
t_match "before: the run's clusters show the offsets" \
	"$(curl -sS -H "Authorization: Bearer $ANALYST" "$WEB_URL/api/v1/runs/$run1/clusters?patterns=5")" 'x-server\+0x'
# a cluster page's flame graph is kept as drawn only when every name in it is final: one that
# shows offsets is drawn at each view, so that it shows the names once they are found
top1=$(q "SELECT id FROM clusters WHERE run_id = $run1 ORDER BY run_rank_total_cost LIMIT 1")
flame_of() {
	curl -sS -H "Authorization: Bearer $ANALYST" "$WEB_URL/clusters/$1" | python3 -c 'import re, sys
t = sys.stdin.read()
m = re.search(r"<section id=\"flame\">.*?</section>", t, re.S)
print(m.group(0) if m else "no flame graph in: " + t[:300])'
}
flames_kept() { curl -s "$WEB_URL/metrics" | awk '$1 == "sm_web_flames_kept" { print $2 }'; }
t_match "before: the top cluster's flame graph shows offsets" "$(flame_of "$top1")" 'x-server\+0x'
t_eq "and is not kept (names not final)" "$(flame_of "$top1" >/dev/null; flames_kept)" 0
t_eq "sm-admin debuginfo missing lists the build id (no debuginfod yet: a failed search was recorded)" \
	"$(sm_admin debuginfo missing | awk -v b="$bid" '$1 == b {print $2}')" "x-server"

# ---- debuginfod on loopback serves the debug file; the next run names the frames first ----

DPORT=$(free_port)
timeout 120 debuginfod -F "$T_TMP/debug" -p "$DPORT" -d "$T_TMP/debuginfod.sqlite" >"$T_TMP/debuginfod.log" 2>&1 &
DPID=$!
for _ in $(seq 1 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$DPORT/buildid/$bid/debuginfo")" = 200 ] && break
	sleep 0.1
done
t_eq "debuginfod serves the debug file" \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$DPORT/buildid/$bid/debuginfo")" 200
# the failed search of a moment ago is retried only after a day: make it old
q "UPDATE debug_files SET tried_at = now() - interval '2 days' WHERE build_id = '$bid'" >/dev/null
unnamed_before=$(q "SELECT count(*) FROM frame_addrs a JOIN frames f ON f.id = a.frame_id WHERE a.build_id = '$bid'")
run2=$(DEBUGINFOD_URLS=http://127.0.0.1:$DPORT DEBUGINFOD_CACHE_PATH=$T_TMP/dcache \
	"$BIN/sm-miner" run --quiet --app symsrv --kind run --aoi thread --threshold-fraction 0.05 2>"$T_TMP/miner.err") ||
	t_fail "sm-miner run (after)" "$(cat "$T_TMP/miner.err")"
kill "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null
t_eq "the debug file came from debuginfod" \
	"$(q "SELECT source, symbols > 10, error IS NULL FROM debug_files WHERE build_id = '$bid'")" "debuginfod|t|t"
t_eq "every offset inside spin_inner is an alias of x-server!spin_inner" \
	"$(q "SELECT count(*) FILTER (WHERE c.name = 'x-server!spin_inner'), count(*) FROM frame_addrs a
	       JOIN frames f ON f.id = a.frame_id LEFT JOIN frames c ON c.id = f.canon_id
	       WHERE a.build_id = '$bid' AND a.addr >= x'$sa'::bigint AND a.addr < x'$sa'::bigint + x'$ss'::bigint" |
	   awk -F'|' '{print ($1 == $2 && $1 > 0)}')" 1
t_eq "every offset inside a function is named, no other" \
	"$(q "SELECT count(*) FROM frame_addrs a JOIN frames f ON f.id = a.frame_id WHERE a.build_id = '$bid'
	       AND (f.canon_id IS NOT NULL) <> EXISTS (SELECT 1 FROM debug_symbols d WHERE d.build_id = a.build_id
	            AND a.addr >= d.addr AND a.addr < d.addr + d.size)")|$unnamed_before" \
	"0|$(q "SELECT count(*) FROM frame_addrs WHERE build_id = '$bid'")"
t_eq "frames were renamed, not rewritten: stacks still hold the offsets' ids" \
	"$(q "SELECT count(*) > 0 FROM stacks s JOIN frames f ON f.id = ANY (s.frame_ids) WHERE f.canon_id IS NOT NULL")" t
api1=$(curl -sS -H "Authorization: Bearer $ANALYST" "$WEB_URL/api/v1/runs/$run1/clusters?patterns=5")
t_match "the run mined before shows the new names through the API" "$api1" 'x-server!spin_inner'
t_match "and its top cluster's flame graph, drawn again, the function's name" "$(flame_of "$top1")" 'x-server!spin_inner'
t_eq "and no offset inside a named function" \
	"$(grep -o 'x-server+0x[0-9a-f]*' <<<"$api1" | sed 's/.*+0x//' | sort -u | while read -r o; do
		(( 16#$o >= 16#$sa && 16#$o < 16#$sa + 16#$ss )) && echo "$o"; done)" ""
t_eq "the run mined after has spin_inner as one frame in its patterns" \
	"$(q "SELECT count(*) FILTER (WHERE f.name = 'x-server!spin_inner') > 0,
	        count(*) FILTER (WHERE f.canon_id IS NOT NULL) FROM patterns p, unnest(p.frame_ids) u(id)
	        JOIN frames f ON f.id = u.id WHERE p.run_id = $run2")" "t|0"
t_eq "patterns mined after: spin_inner once per pattern, never beside an offset of itself" \
	"$(q "SELECT count(*) FROM patterns p WHERE p.run_id = $run2 AND (SELECT count(*) FROM unnest(p.frame_ids) u(id)
	       JOIN frames f ON f.id = u.id WHERE f.name = 'x-server!spin_inner') > 1")" 0
# n(f): streams holding the function, once each however many of its offsets they hold
t_eq "the statistics count the function once per stream" \
	"$(q "SELECT n FROM frame_stats WHERE frame_id = (SELECT id FROM frames WHERE name = 'x-server!spin_inner')")" \
	"$(q "SELECT count(DISTINCT e.stream_ref) FROM events e JOIN stacks s ON s.id = e.stack_id
	       WHERE s.frame_ids && ARRAY(SELECT id FROM frames WHERE canon_id = (SELECT id FROM frames
	       WHERE name = 'x-server!spin_inner') OR name = 'x-server!spin_inner')")"
t_eq "and no alias keeps counts of its own" \
	"$(q "SELECT count(*) FROM stat_frames s JOIN frames f ON f.id = s.frame_id WHERE f.canon_id IS NOT NULL")|$(q "SELECT count(*) FROM stat_calls s JOIN frames a ON a.id = s.caller JOIN frames b ON b.id = s.callee WHERE a.canon_id IS NOT NULL OR b.canon_id IS NOT NULL")" "0|0"
# a signature naming the function covers the run mined before too (its stacks hold the offsets)
http POST "$WEB_URL/api/v1/signatures" -H "Authorization: Bearer $ADMIN" -H "Content-Type: application/json" \
	--data-binary '{"name": "spin", "frames": ["x-server!spin_inner"]}'
t_eq "a signature of the named function is created" "$HTTP_STATUS" 201
cov() {
	curl -sS -H "Authorization: Bearer $ANALYST" "$WEB_URL/api/v1/runs/$1/coverage?kind=run" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["by_signature"][0]["cost_ns"] > 0)'
}
t_eq "its coverage counts in the runs mined before and after" "$(cov "$run1") $(cov "$run2")" "True True"
t_eq "the build id is no longer missing" "$(sm_admin debuginfo missing | awk -v b="$bid" '$1 == b' | wc -l)" 0

# ---- the collection keeps a canonical frame its aliases refer to ----
sm_admin collect >/dev/null || t_fail "sm-admin collect"
t_eq "after a collection every alias's canonical frame is there" \
	"$(q "SELECT count(*) FROM frames f WHERE f.canon_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM frames c WHERE c.id = f.canon_id)")" 0

# ---- a stream posted with an unnamed frame of a given module and build id ----

# post_frame MODULE BUILD_ID OFFSET_HEX: one stream whose only stack ends in MODULE+0xOFFSET
post_frame() {
	local id
	id=$(cat /proc/sys/kernel/random/uuid)
	http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
		--data-binary "{\"v\":1,\"stream_id\":\"$id\",\"host\":\"h1\",\"app\":\"posted\",
		\"modules\":{\"$1\":\"$2\"},
		\"symptom\":{\"kind\":\"unit_violation\",\"tid\":1,\"start_ns\":0,\"end_ns\":100},
		\"frames\":[\"$1!main\",\"$1+0x$3\"],\"stacks\":[[0,1]],
		\"events\":[{\"kind\":\"run\",\"tid\":1,\"ts_ns\":0,\"dur_ns\":10,\"stack\":0}]}"
	[ "$HTTP_STATUS" = 200 ] || t_fail "posting a stream with modules" "$HTTP_STATUS $HTTP_BODY"
}

# ---- libc6-dbg: /usr/lib/debug/.build-id names a libc function that .dynsym does not have ----

libc=$(ldd "$S/symserver" | awk '$1 == "libc.so.6" {print $3}')
lbid=$(readelf -n "$libc" | sed -n 's/.*Build ID: //p')
ldbg=/usr/lib/debug/.build-id/${lbid:0:2}/${lbid:2}.debug
if [ -r "$ldbg" ]; then
	# a local function alone at its address, absent from .dynsym
	read -r la lname < <(nm -S --defined-only "$ldbg" | python3 -c 'import sys
by = {}
for l in sys.stdin:
    f = l.split()
    if len(f) == 4 and f[2] in "tTwWi":
        by.setdefault(f[0], []).append((f[2], int(f[1], 16), f[3]))
for a in sorted(by):
    if len(by[a]) == 1 and by[a][0][0] == "t" and by[a][0][1] > 32 and "." not in by[a][0][2]:
        print(a, by[a][0][2]); break')
	loff=$(printf '%x' $((16#$la + 5)))
	post_frame libc.so.6 "$lbid" "$loff"
	t_eq "libc: the unnamed frame is stored with libc's build id" \
		"$(q "SELECT a.build_id FROM frame_addrs a JOIN frames f ON f.id = a.frame_id WHERE f.name = 'libc.so.6+0x$loff'")" "$lbid"
	out=$(DEBUGINFOD_URLS= sm_admin debuginfo resolve) || t_fail "sm-admin debuginfo resolve" "$out"
	t_eq "libc: named from libc6-dbg's build-id tree" \
		"$(q "SELECT c.name FROM frames f JOIN frames c ON c.id = f.canon_id WHERE f.name = 'libc.so.6+0x$loff'")|$(q "SELECT source FROM debug_files WHERE build_id = '$lbid'")" \
		"libc.so.6!$lname|build-id tree"
else
	t_fail "libc6-dbg is installed" "no $ldbg"
fi

# ---- uploads: sm-admin debuginfo add, POST /api/v1/debuginfo ----

# the status and the error message of the last answer
status_error() { echo "$HTTP_STATUS $(python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get("error"))' "$HTTP_BODY")"; }

# tiny N: a small program of its own build id with a static function `helper_N`, its debug file
tiny() {
	printf 'static int __attribute__((noinline)) helper_%s(int x) { return x * %s + 1; }\nint main(int c, char **v) { (void)v; return helper_%s(c); }\n' "$1" "$1" "$1" >"$T_TMP/tiny$1.c"
	gcc -g -O1 -o "$T_TMP/tiny$1" "$T_TMP/tiny$1.c" && objcopy --only-keep-debug "$T_TMP/tiny$1" "$T_TMP/tiny$1.debug"
}
tiny 1 && tiny 2 || t_bail "building the tiny programs"
for n in 1 2; do
	read -r ha _ < <(nm -S "$T_TMP/tiny$n.debug" | awk -v f="helper_$n" '$4 == f {print $1, $2}')
	tb=$(readelf -n "$T_TMP/tiny$n" | sed -n 's/.*Build ID: //p')
	printf -v "TB$n" '%s' "$tb"
	post_frame "tiny$n" "$tb" "$(printf '%x' $((16#$ha + 1)))"
done
t_match "missing: both uploads-to-be, one unnamed frame each" \
	"$(sm_admin debuginfo missing | awk -v a="$TB1" -v b="$TB2" '$1 == a || $1 == b {print $2, $3}' | sort | tr '\n' ' ')" \
	'^tiny1 1 tiny2 1 $'
out=$(sm_admin debuginfo add "$T_TMP/tiny1.debug")
t_match "sm-admin debuginfo add names the frame" "$out" \
	"^$T_TMP/tiny1.debug: build id $TB1, [0-9]+ symbols, 1 frames named\$"
t_eq "the frame is an alias of tiny1!helper_1" \
	"$(q "SELECT c.name FROM frame_addrs a JOIN frames f ON f.id = a.frame_id JOIN frames c ON c.id = f.canon_id WHERE a.build_id = '$TB1'")|$(q "SELECT source FROM debug_files WHERE build_id = '$TB1'")" \
	"tiny1!helper_1|upload"
out=$(sm_admin debuginfo add "$T_TMP/tiny1.c" 2>&1)
t_eq "a file that is not ELF: status 1 and the reason" "$?:$out" "1:sm-admin: $T_TMP/tiny1.c: not an ELF file (no ELF magic)"

http POST "$WEB_URL/api/v1/debuginfo" -H "Authorization: Bearer $ANALYST" --data-binary @"$T_TMP/tiny2.debug"
t_eq "POST /api/v1/debuginfo: an analyst is refused" "$(status_error)" "403 debug files are an admin's"
http POST "$WEB_URL/api/v1/debuginfo" -H "Authorization: Bearer $ADMIN" --data-binary 'garbage'
t_eq "POST /api/v1/debuginfo: garbage is a 400 naming the reason" "$(status_error)" \
	"400 the body is not a usable ELF debug file: not an ELF file (no ELF magic)"
head -c 100 "$T_TMP/tiny2.debug" >"$T_TMP/cut.debug"
http POST "$WEB_URL/api/v1/debuginfo" -H "Authorization: Bearer $ADMIN" --data-binary @"$T_TMP/cut.debug"
t_match "POST /api/v1/debuginfo: a truncated file is a 400 naming the reason" "$(status_error)" \
	'^400 the body is not a usable ELF debug file: (not a readable ELF file|unreadable section headers|section headers beyond)'
t_eq "nothing was stored for it" "$(q "SELECT count(*) FROM debug_files WHERE build_id = '$TB2'")" 0
http POST "$WEB_URL/api/v1/debuginfo" -H "Authorization: Bearer $ADMIN" --data-binary @"$T_TMP/tiny2.debug"
t_eq "POST /api/v1/debuginfo: an admin's upload names the frame" \
	"$HTTP_STATUS $(python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(d["build_id"], d["symbols"] > 0, d["frames_named"])' "$HTTP_BODY")" \
	"201 $TB2 True 1"
t_eq "the frame is an alias of tiny2!helper_2" \
	"$(q "SELECT c.name FROM frame_addrs a JOIN frames f ON f.id = a.frame_id JOIN frames c ON c.id = f.canon_id WHERE a.build_id = '$TB2'")" \
	"tiny2!helper_2"
http GET "$WEB_URL/api/v1/debuginfo" -H "Authorization: Bearer $ADMIN"
t_eq "GET /api/v1/debuginfo lists the builds and where their symbols came from" \
	"$(python3 -c 'import json, sys
d = {b["build_id"]: b for b in json.loads(sys.argv[1])["builds"]}
print(d[sys.argv[2]]["source"], d[sys.argv[3]]["source"], d[sys.argv[3]]["unnamed_frames"], d[sys.argv[4]]["source"], d[sys.argv[4]]["missing"])' \
	"$HTTP_BODY" "$bid" "$TB2" "$TB1")" "debuginfod upload 0 upload False"
http GET "$WEB_URL/api/v1/debuginfo" -H "Authorization: Bearer $ANALYST"
t_eq "GET /api/v1/debuginfo: an analyst is refused" "$HTTP_STATUS" 403

# ---- the wire extension is validated ----
id=$(cat /proc/sys/kernel/random/uuid)
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
	--data-binary "{\"v\":1,\"stream_id\":\"$id\",\"host\":\"h1\",\"app\":\"posted\",\"modules\":{\"m\":\"XYZ\"},
	\"symptom\":{\"kind\":\"k\",\"tid\":1,\"start_ns\":0,\"end_ns\":1},\"frames\":[\"m+0x1\"],\"stacks\":[[0]],
	\"events\":[{\"kind\":\"run\",\"tid\":1,\"ts_ns\":0,\"dur_ns\":1,\"stack\":0}]}"
t_eq "a bad build id in modules is refused, naming the field" "$HTTP_STATUS $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["error"])' "$HTTP_BODY")" \
	"400 modules.m: a build id is 2 to 80 lower-case hex digits, an even number"

t_done
