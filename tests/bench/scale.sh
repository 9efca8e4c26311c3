#!/usr/bin/env bash
# bench/scale.sh: StackMine's largest study and a fleet's day, end to end on this machine
# (make bench, section "scale"; a report, not a test; tens of minutes). Sourced by
# tests/bench/run.sh with its PostgreSQL (PG* in the environment), $bin, $tools, $work,
# now, rate and wrk_line.
#
# Two generated workloads (genfleet, docs/demo-fleet.md), each made by parallel pipes
# `genfleet --part I/N | sm-agent ship -` into one sm-ingest, so the events are never on disk
# but in the database:
#   paper  SM_BENCH_PAPER_STREAMS streams (900) of SM_BENCH_PAPER_EVENTS events (200,000),
#          three quarters waits, from 300 hosts; one run per kind with the wait-graph AOI;
#   day    SM_BENCH_DAY_STREAMS streams (1,000,000) of SM_BENCH_DAY_EVENTS events (100), the
#          size a guard agent sends, from SM_BENCH_DAY_HOSTS hosts (10,000); one run.
# For each: ingest (time, events/s against a raw COPY of some of the same rows into the same
# tables, each process's peak memory, disk), then each run's phases (time, rows per second, the
# miner's peak memory, PostgreSQL's), the injected bugs' ranks (tests/integration/e2e_check.py
# against genfleet's truth), and the run's pages through sm-web.
set -euo pipefail

sc_pipes=${SM_BENCH_SCALE_PIPES:-3}
sc_warm=()
sc_py=${SM_BENCH_PYTHON:-python3}

# The largest resident set seen per program while a phase ran, sampled each second: this bench's
# programs (their executables in this repository) and its PostgreSQL (the postmaster and its
# children).
sc_sampler_pid=
sc_sample_start() {
	local pm
	pm=$(head -n 1 "$work/pg/data/postmaster.pid")
	: >"$work/sc.peak"
	(
		declare -A peak=()
		while :; do
			for p in /proc/[0-9]*; do
				c=$(cat "$p/comm" 2>/dev/null) || continue
				case $c in
				postgres)
					[ "${p#/proc/}" = "$pm" ] || [ "$(awk '{ print $4 }' "$p/stat" 2>/dev/null)" = "$pm" ] || continue ;;
				sm-ingest|sm-agent|sm-miner|sm-web|genfleet)
					case $(readlink "$p/exe" 2>/dev/null) in "$repo"/*) ;; *) continue ;; esac ;;
				*) continue ;;
				esac
				r=$(awk '/^VmRSS/ { print $2 }' "$p/status" 2>/dev/null) || continue
				[ -n "$r" ] || continue
				# postgres: the largest backend (shared buffers counted once each); others: the largest process
				[ "${peak[$c]:-0}" -ge "$r" ] || peak[$c]=$r
			done
			for c in "${!peak[@]}"; do echo "$c ${peak[$c]}"; done >"$work/sc.peak.tmp"
			mv "$work/sc.peak.tmp" "$work/sc.peak"
			sleep 1
		done
	) &
	sc_sampler_pid=$!
}
sc_sample_stop() {
	kill "$sc_sampler_pid" 2>/dev/null || true
	wait "$sc_sampler_pid" 2>/dev/null || true
	sc_sampler_pid=
	sort "$work/sc.peak" | awk '{ printf "%s%s %.0f MB", sep, $1, $2 / 1024; sep = ", " } END { print "" }'
}
sc_cleanup() { [ -z "$sc_sampler_pid" ] || kill "$sc_sampler_pid" 2>/dev/null || true; }
trap 'sc_cleanup; cleanup' EXIT

sc_db_mb() { psql -XAtc "SELECT round(pg_database_size(current_database()) / 1e6)"; }
sc_wal_mb() { du -sm "$work/pg/data/pg_wal" 2>/dev/null | cut -f1 || echo 0; }
sc_cpu() { awk '{ printf "%.0f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
# the machine's busy, I/O wait and steal ticks (/proc/stat), on one line
sc_machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $6, $9 }' /proc/stat; }

# sc_ingest NAME GENFLEET-ARGS...: the fleet through N pipes into a fresh sm-ingest
sc_ingest() {
	local name=$1 t0 t1 secs url token pids=() i stored nstreams nevents db0 db1 b0 b1 w0 w1 s0 s1 p0 p1
	shift
	token=$("$bin/sm-admin" token create --role ingest --name "scale-$name" 2>/dev/null)
	rm -f "$work/port"
	"$bin/sm-ingest" --listen 127.0.0.1:0 --port-file "$work/port" --log-level warn 2>"$work/ingest.log" &
	ingest_pid=$!
	for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
	url=http://127.0.0.1:$(cat "$work/port")
	db0=$(sc_db_mb)
	sc_sample_start
	read -r b0 w0 s0 <<<"$(sc_machine_ticks)"
	p0=$(pg_ticks)
	t0=$(now)
	for i in $(seq 0 $((sc_pipes - 1))); do
		(
			set -o pipefail
			"$tools/genfleet" --part "$i/$sc_pipes" "$@" $([ "$i" = 0 ] && echo --truth "$work/$name.truth.json") 2>/dev/null |
				/usr/bin/time -f '%e %M %U %S' -o "$work/agent.$i.time" \
					"$bin/sm-agent" ship --url "$url" --token "$token" --spool "$work/spool.$i" \
					--timeout 300 --batch "$sc_batch" - 2>"$work/agent.$i.log"
		) &
		pids+=("$!")
	done
	for p in "${pids[@]}"; do
		wait "$p" || { echo "bench: a pipe of $name failed:" >&2; cat "$work"/agent.*.log >&2; exit 1; }
	done
	t1=$(now)
	read -r b1 w1 s1 <<<"$(sc_machine_ticks)"
	p1=$(pg_ticks)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	echo "ingest:     $(sc_sample_stop | sed 's/^/peak RSS: /')"
	echo "            sm-ingest CPU $(sc_cpu "$ingest_pid") s; sm-agent: $(cat "$work"/agent.*.time |
		awk '{ c += $3 + $4; if ($2 > m) m = $2 } END { printf "CPU %.0f s, peak RSS %.0f MB each", c, m / 1024 }')"
	# what the machine did meanwhile: a store that waits on the disk is not one that needs less CPU
	# (/proc/stat counts every online CPU; PostgreSQL's share, its processes alive at both ends)
	echo "            the machine busy $(ticks_s "$b0" "$b1") core-s of $(awk -v s="$secs" \
		-v n="$(getconf _NPROCESSORS_ONLN)" 'BEGIN { printf "%.0f", s * n }'), PostgreSQL $(ticks_s "$p0" "$p1") s of it;" \
		"waiting on I/O $(ticks_s "$w0" "$w1") core-s, stolen by the hypervisor $(ticks_s "$s0" "$s1")"
	kill "$ingest_pid"
	wait "$ingest_pid" || true
	ingest_pid=
	if [ -n "$(ls -A "$work"/spool.* 2>/dev/null | grep -v '^$' || true)" ] && find "$work"/spool.* -type f | grep -q .; then
		echo "bench: streams left in a spool: $(find "$work"/spool.* -type f | head -3)" >&2
		exit 1
	fi
	stored=$(psql -XAtc "SELECT count(*) || ' ' || coalesce(sum(n_events), 0) FROM streams WHERE app = '$name'")
	nstreams=${stored% *}
	nevents=${stored#* }
	db1=$(sc_db_mb)
	echo "            $nstreams streams, $nevents events in $secs s: $(rate "$nevents" "$secs") events/s, $(rate "$nstreams" "$secs") streams/s"
	echo "            disk: database +$((db1 - db0)) MB ($(awk -v d="$((db1 - db0))" -v n="$nevents" 'BEGIN { printf "%.0f", d * 1e6 / n }') bytes per event), WAL $(sc_wal_mb) MB"
	SC_NEVENTS=$nevents SC_NSTREAMS=$nstreams SC_INGEST_SECS=$secs
}

# sc_settle: before a timed part, the rows deleted before vacuumed and the WAL checkpointed, so that
# neither part pays for the other (autovacuum of millions of dead rows, a checkpoint's writes)
sc_settle() {
	psql -Xqc "VACUUM streams, event_chunks"
	psql -Xq "$(deploy/pg.sh url "$work/pg" --admin)" -c "CHECKPOINT"
}

# sc_alone WHAT K GENFLEET-ARGS...: sm-ingest alone against a raw COPY of the same rows, in
# SM_BENCH_ALONE_ROUNDS rounds (3) of the two in turn; the medians are compared (one raw COPY of
# the same rows took 0.84 s in one run and 1.35 s in the next). K more streams (genfleet's
# arguments say which) generated beforehand as zstd batches and sent by 4 senders (send_fleet), so
# that neither the generator nor the agent takes CPU meanwhile; then the same rows (the streams
# numbered above any before, their events, and the frames, their addresses and the stacks the
# send added, which a new build's streams bring by the thousand) taken out and put back with psql
# \copy into the same tables; then all of it removed (the frames and stacks too, so that the next
# round's send finds them new again; the frame statistics as they were before the first round, so
# that the streams removed count in no run). Each timed part starts from a settled database (sc_settle;
# the frames and stacks taken out vacuumed too, so that the COPY meets no dead index entries of
# the keys it puts back). When sc_warm (genfleet's arguments) is set, those streams go first,
# untimed, to the same server (send_fleet), which settles again before the timed send; they are
# removed with the rest at the end of the round. The same rows, not the same pages: the first
# round's send splits the index pages its new keys go to, and the later rounds find the room the
# removal left there (so do all the raw COPYs).
sc_alone() {
	local what=$1 k=$2 rounds=${SM_BENCH_ALONE_ROUNDS:-3} r t0 t1 b0 busy n stored top top0 stacks0 ftop0 stop0
	local ftop stop warm= nf ns sends=() copies=() send_lines=() copy_busy=() rcopies=() rcopy_busy=() mid ms mc mr left t
	local t1 t2 t3 b1 b2 b3
	shift 2
	[ "$rounds" -ge 1 ] || rounds=1
	while left=$(psql -XAtc "SELECT sm_fold_stats(1000)") && [ "$left" != 0 ]; do :; done
	[ "$left" = 0 ] || { echo "sc_alone: folding the frame statistics failed" >&2; return 1; }
	for t in streams frames calls; do psql -XqAtc "CREATE TABLE sc_stat_$t AS SELECT * FROM stat_$t"; done
	"$tools/genfleet" --streams "$k" "$@" --out "$work/alone.ndjson" 2>/dev/null
	if [ "${#sc_warm[@]}" -gt 0 ]; then
		"$tools/genfleet" "${sc_warm[@]}" --out "$work/warm.ndjson" 2>/dev/null
		warm=$work/warm.ndjson
	fi
	top0=$(psql -XAtc "SELECT coalesce(max(id), 0) FROM streams")
	read -r ftop0 stop0 <<<"$(psql -XAtF ' ' -c "SELECT (SELECT coalesce(max(id), 0) FROM frames),
		(SELECT coalesce(max(id), 0) FROM stacks)")"
	for r in $(seq "$rounds"); do
		stacks0=$(psql -XAtc "SELECT count(*) FROM stacks")
		sc_settle
		SEND_SETTLE=sc_settle send_fleet "$work/alone.ndjson" "$sc_batch" 4 $warm
		top=${SEND_TOP:-$top0} stacks0=${SEND_STACKS:-$stacks0} ftop=${SEND_FRAME_TOP:-$ftop0} stop=${SEND_STACK_TOP:-$stop0}
		stored=$(psql -XAtc "SELECT count(*) || ' ' || coalesce(sum(n_events), 0) FROM streams WHERE id > $top")
		n=${stored#* }
		sends+=("$SEND_SECS")
		send_lines+=("$n events, $(( $(psql -XAtc "SELECT count(*) FROM stacks") - stacks0 )) new stacks)|$SEND_SECS|CPU $SEND_CPU s, peak RSS $SEND_PEAK_MB MB; the machine busy $SEND_BUSY core-s of $(awk -v s="$SEND_SECS" -v c="$(nproc)" 'BEGIN { printf "%.1f", s * c }'), PostgreSQL $SEND_PG_CPU s of it")
		psql -XqAtc "CREATE TABLE sc_ids AS SELECT id FROM streams WHERE id > $top"
		read -r nf ns <<<"$(psql -XAtF ' ' -c "SELECT (SELECT count(*) FROM frames WHERE id > $ftop),
			(SELECT count(*) FROM stacks WHERE id > $stop)")"
		psql -Xqc "\\copy (SELECT s.* FROM streams s JOIN sc_ids USING (id) ORDER BY id) TO '$work/sc.streams.tsv'" \
			-c "\\copy (SELECT c.* FROM event_chunks c WHERE stream_ref IN (SELECT id FROM sc_ids)) TO '$work/sc.chunks.tsv'" \
			-c "\\copy (SELECT e.* FROM events e WHERE stream_ref IN (SELECT id FROM sc_ids)) TO '$work/sc.events.tsv'" \
			-c "\\copy (SELECT * FROM frames WHERE id > $ftop ORDER BY id) TO '$work/sc.frames.tsv'" \
			-c "\\copy (SELECT * FROM frame_addrs WHERE frame_id > $ftop) TO '$work/sc.addrs.tsv'" \
			-c "\\copy (SELECT id, frame_ids FROM stacks WHERE id > $stop ORDER BY id) TO '$work/sc.stacks.tsv'"
		psql -Xqc "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM sc_ids)" -c "DELETE FROM streams WHERE id IN (SELECT id FROM sc_ids)" \
			-c "DELETE FROM stacks WHERE id > $stop" -c "DELETE FROM frames WHERE id > $ftop" -c "VACUUM frames, frame_addrs, stacks"
		raw_rows_table
		sc_settle
		b0=$(busy_ticks)
		t0=$(now)
		psql -Xqc "\\copy frames FROM '$work/sc.frames.tsv'" -c "\\copy frame_addrs FROM '$work/sc.addrs.tsv'" \
			-c "\\copy stacks (id, frame_ids) FROM '$work/sc.stacks.tsv'" \
			-c "\\copy streams FROM '$work/sc.streams.tsv'"
		t1=$(now) b1=$(busy_ticks)
		psql -Xqc "\\copy event_chunks FROM '$work/sc.chunks.tsv'"
		t2=$(now) b2=$(busy_ticks)
		psql -Xqc "\\copy sm_bench_rows FROM '$work/sc.events.tsv'"
		t3=$(now) b3=$(busy_ticks)
		# the frames, stacks and streams, then the events: as chunks, or a row each
		copies+=("$(awk -v a="$t0" -v b="$t2" 'BEGIN { printf "%.2f", b - a }')")
		copy_busy+=("$(ticks_s "$b0" "$b2")")
		rcopies+=("$(awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { printf "%.2f", b - a + d - c }')")
		rcopy_busy+=("$(ticks_s 0 $(( b1 - b0 + b3 - b2 )))")
		# the round's rows gone, the warm-up's and the frames and stacks of both too
		psql -Xqc "DELETE FROM event_chunks WHERE stream_ref > $top0" -c "DELETE FROM streams WHERE id > $top0" \
			-c "DELETE FROM stacks WHERE id > $stop0" -c "DELETE FROM frames WHERE id > $ftop0" -c "DROP TABLE sc_ids" \
			-c "VACUUM frames, frame_addrs, stacks"
		psql -Xqc "DROP TABLE sm_bench_rows"
		rm -f "$work"/sc.{streams,chunks,events,frames,addrs,stacks}.tsv
	done
	rm -f "$work/alone.ndjson" "$work/warm.ndjson"
	psql -Xq -v ON_ERROR_STOP=1 -1 -c "DELETE FROM stat_deltas" -c "TRUNCATE stat_streams, stat_frames, stat_calls" \
		-c "INSERT INTO stat_streams SELECT * FROM sc_stat_streams" -c "INSERT INTO stat_frames SELECT * FROM sc_stat_frames" \
		-c "INSERT INTO stat_calls SELECT * FROM sc_stat_calls" -c "DROP TABLE sc_stat_streams, sc_stat_frames, sc_stat_calls"
	psql -Xqc "VACUUM ANALYZE stat_deltas, stat_streams, stat_frames, stat_calls"
	# the round whose send took the median time (the lower middle of an even number) speaks for the sends (its CPU and memory)
	mid=$(for r in "${!sends[@]}"; do echo "${sends[r]} $r"; done | sort -g | awk -v m="$(( (rounds + 1) / 2 ))" 'NR == m { print $2 }')
	ms=${sends[mid]}
	mc=$(printf '%s\n' "${copies[@]}" | sort -g | awk -v m="$(( (rounds + 1) / 2 ))" 'NR == m')
	IFS='|' read -r stored _ busy <<<"${send_lines[mid]}"
	echo "sm-ingest alone, $what: $k more streams ($stored sent as zstd batches by 4 senders: $ms s" \
		"(median of $rounds rounds: ${sends[*]}), $(rate "$n" "$ms") events/s, $(rate "$k" "$ms") streams/s, $busy"
	mr=$(printf '%s\n' "${rcopies[@]}" | sort -g | awk -v m="$(( (rounds + 1) / 2 ))" 'NR == m')
	echo "raw COPY:   the same rows ($nf frames and $ns stacks new) put back with psql \\copy in $mc s" \
		"(median of $rounds rounds: ${copies[*]}; the machine busy ${copy_busy[*]} core-s): $(rate "$n" "$mc") events/s;" \
		"sm-ingest did $(awk -v a="$ms" -v c="$mc" 'BEGIN { printf "%.0f %%", 100 * c / a }') of that (the chunks as stored: no parse, no interning)"
	echo "raw COPY, a row an event: the same, the events put with psql \\copy into an empty table of a row an event (events' columns before 030, their index) in $mr s" \
		"(median of $rounds rounds: ${rcopies[*]}; the machine busy ${rcopy_busy[*]} core-s): $(rate "$n" "$mr") events/s;" \
		"sm-ingest did $(awk -v a="$ms" -v c="$mr" 'BEGIN { printf "%.0f %%", 100 * c / a }') of that (goal: at least 100 %)"
}

# sc_run NAME ARGS...: one mining run; its phases, rates, memory; sets SC_RUN
sc_run() {
	local name=$1 id db0
	shift
	db0=$(sc_db_mb)
	sc_sample_start
	/usr/bin/time -f '%e %M %U %S' -o "$work/miner.time" "$bin/sm-miner" run --quiet --app "$name" "$@" \
		>"$work/miner.out" 2>"$work/miner.err" || { echo "bench: sm-miner run $*: $(cat "$work/miner.err")" >&2; exit 1; }
	id=$(cat "$work/miner.out")
	echo "run $id ($*): $(awk '{ printf "%.1f s, miner peak RSS %.0f MB, CPU %.0f s", $1, $2 / 1024, $3 + $4 }' "$work/miner.time")"
	echo "            peak RSS while it ran: $(sc_sample_stop); disk: database +$(( $(sc_db_mb) - db0 )) MB (its results)"
	psql -XAtc "SELECT format('            select %s ms (%s streams/s), read and AOI %s ms (%s events read on %s connections: %s events/s, %s AOI events),'
		' collapse and filter %s ms (%s distinct stacks), mine %s ms (%s patterns), cluster %s ms (%s clusters),'
		' store %s ms; total %s ms',
		t->>'select', round(n_sel / greatest((t->>'select')::numeric, 1) * 1000),
		t->>'read_aoi', n_ev, c->>'read_connections', round(n_ev / greatest((t->>'read_aoi')::numeric, 1) * 1000),
		c->>'aoi_events',
		t->>'collapse_filter', c->>'distinct_stacks', t->>'mine', c->>'patterns', t->>'cluster', c->>'clusters',
		t->>'store', t->>'total')
		FROM (SELECT timings_ms AS t, counts AS c,
			(counts->>'streams')::numeric + (counts->>'baseline_streams')::numeric AS n_sel,
			(counts->>'events_read')::numeric AS n_ev FROM runs WHERE id = $id) x"
	SC_RUN=$id
}

# sc_ranks TRUTH RUN...: the injected bugs' clusters and ranks, as test_e2e judges them
sc_ranks() {
	"$sc_py" "$repo/tests/integration/e2e_check.py" "$@" >"$work/ranks" 2>&1 || true
	grep -E "cluster rank|no cluster has it|^(PASS|FAIL) .*top5" "$work/ranks" |
		sed -E 's/; it matches.*//; s/^/            /' ||
		{ echo "bench: e2e_check.py found no bug:" >&2; head -c 2000 "$work/ranks" >&2; }
}

# sc_pages RUN: the run's pages through sm-web, 10 s of wrk each
sc_pages() {
	local wport cl pr sess st nev
	rm -f "$work/wport"
	"$bin/sm-web" --db "$(deploy/pg.sh url "$work/pg")" --listen 127.0.0.1:0 --port-file "$work/wport" --no-worker \
		--log-level warn 2>"$work/web.log" &
	web_pid=$!
	for _ in $(seq 100); do [ -s "$work/wport" ] && break; sleep 0.1; done
	sess=$("$bin/sm-admin" token create --role analyst --name "scale-web-$1" 2>/dev/null)
	cl=$(psql -XAtc "SELECT id FROM clusters WHERE run_id = $1 ORDER BY run_rank_total_cost LIMIT 1")
	# the problem that holds it: the same cost model over the problem's streams
	pr=$(psql -XAtc "SELECT id FROM problems WHERE run_id = $1 AND $cl = ANY (members) LIMIT 1")
	local u=http://127.0.0.1:$(cat "$work/wport") h="Authorization: Bearer $sess"
	wrk_line "run $1 page (HTML)" "$u/runs/$1" "$h"
	wrk_line "run $1 clusters (API)" "$u/api/v1/runs/$1/clusters?limit=50" "$h"
	wrk_line "cluster $cl page (HTML)" "$u/clusters/$cl" "$h"
	wrk_line "cluster $cl (API)" "$u/api/v1/clusters/$cl" "$h"
	if [ -n "$pr" ]; then
		wrk_line "problem $pr page (HTML)" "$u/problems/$pr" "$h"
		wrk_line "problem $pr (API)" "$u/api/v1/problems/$pr" "$h"
	fi
	wrk_line "streams of the app (HTML)" "$u/streams?app=$2" "$h"
	# a stream of the run with the most events: its page unpacks all of its chunks
	read -r st nev <<<"$(psql -XAtF ' ' -c "SELECT stream_id, n_events FROM streams WHERE app = '$2'
		ORDER BY n_events DESC, id LIMIT 1")"
	wrk_line "stream page, $nev events (HTML)" "$u/streams/$st" "$h"
	wrk_line "stream, $nev events (API)" "$u/api/v1/streams/$st" "$h"
	echo "sm-web:     peak RSS $(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$web_pid/status") MB"
	kill "$web_pid"
	wait "$web_pid" 2>/dev/null || true
	web_pid=
}

sc_paper_streams=${SM_BENCH_PAPER_STREAMS:-900}
sc_paper_events=${SM_BENCH_PAPER_EVENTS:-200000}
sc_day_streams=${SM_BENCH_DAY_STREAMS:-1000000}
sc_day_events=${SM_BENCH_DAY_EVENTS:-100}
sc_day_hosts=${SM_BENCH_DAY_HOSTS:-10000}

sc_need_gb=$(( (sc_paper_streams * sc_paper_events + sc_day_streams * sc_day_events) * 200 / 1000000000 + 1 ))
sc_free_gb=$(df -P -BG "$work" | awk 'NR == 2 { print $4 + 0 }')
if [ "$sc_free_gb" -lt "$sc_need_gb" ]; then
	echo
	echo "== scale: skipped, $sc_free_gb GB free for the database where it needs about $sc_need_gb GB"
	sc_paper_streams=0 sc_day_streams=0
fi

if [ "$sc_paper_streams" -gt 0 ]; then
	echo
	echo "== scale, the paper's study: $sc_paper_streams streams x $sc_paper_events events, 3/4 waits, 300 hosts," \
		"$sc_pipes pipes genfleet | sm-agent ship into one sm-ingest"
	sc_batch=2
	sc_ingest paper --streams "$sc_paper_streams" --events "$sc_paper_events" --hosts 300 --apps paper \
		--wait-share 0.75 --distinct-stacks 50000 --bugs 5 --seed 29
	sc_alone "the study's next streams" "$(( sc_paper_streams / 45 > 2 ? sc_paper_streams / 45 : 2 ))" \
		--first "$sc_paper_streams" --events "$sc_paper_events" --hosts 300 --apps paper --wait-share 0.75 \
		--distinct-stacks 50000 --bugs 5 --seed 29
	psql -XqAtc "VACUUM ANALYZE streams" >/dev/null
	runs=()
	for kind in wait run; do
		sc_run paper --kind "$kind" --aoi waitgraph
		runs+=("$SC_RUN")
	done
	echo "bugs' ranks (kind, rank among the run's clusters of that kind by total cost):"
	sc_ranks "$work/paper.truth.json" "${runs[@]}"
	sc_pages "${runs[0]}" paper
fi

if [ "$sc_day_streams" -gt 0 ]; then
	echo
	echo "== scale, a fleet's day: $sc_day_streams streams x $sc_day_events events from $sc_day_hosts hosts," \
		"$sc_pipes pipes genfleet | sm-agent ship into one sm-ingest"
	sc_batch=200
	sc_ingest day --streams "$sc_day_streams" --events "$sc_day_events" --hosts "$sc_day_hosts" --apps day \
		--distinct-stacks 50000 --bugs 5 --seed 30
	# the fleet's next streams, whose stacks the day stored nearly all; then as many of an app never
	# seen, every stack of it new (what a new build's first streams bring)
	sc_k=$(( sc_day_streams / 50 > 100 ? sc_day_streams / 50 : 100 ))
	# before each, a running server's memory: two batches per sender of the day's streams (their
	# stacks stored, so a new app's stay new), beyond those sent
	sc_warm=(--streams "$(( 8 * sc_batch ))" --first "$(( sc_day_streams + sc_k ))" --events "$sc_day_events"
		--hosts "$sc_day_hosts" --apps day --distinct-stacks 50000 --bugs 5 --seed 30)
	sc_alone "the day's next streams" "$sc_k" --first "$sc_day_streams" --events "$sc_day_events" \
		--hosts "$sc_day_hosts" --apps day --distinct-stacks 50000 --bugs 5 --seed 30
	sc_alone "a new app's streams" "$sc_k" --events "$sc_day_events" --hosts "$sc_day_hosts" --apps day-new \
		--distinct-stacks 50000 --bugs 5 --seed 130
	psql -XqAtc "VACUUM ANALYZE streams" >/dev/null
	sc_run day --kind both --aoi waitgraph
	echo "bugs' ranks (kind, rank among the run's clusters of that kind by total cost):"
	sc_ranks "$work/day.truth.json" "$SC_RUN"
	sc_pages "$SC_RUN" day
fi
echo "disk at the end: database $(sc_db_mb) MB, WAL $(sc_wal_mb) MB"
