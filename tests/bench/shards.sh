#!/usr/bin/env bash
# bench/shards.sh: the events on two shards (make bench, section "shards"; a report, not a
# test). Sourced by tests/bench/run.sh with its PostgreSQL (PG* in the environment, the main
# database), $bin, $tools, $work and send_fleet.
#
# Two more clusters made by deploy/pg.sh are added as shards (sm-admin shard add); a generated
# fleet of 500 streams x 2,000 events is sent through one sm-ingest: events/s stored, and where
# they went; then a mining run in one piece and one in parts over two workers read them back.
# All three servers share this machine's two cores: the figures show what sharding costs, not
# what it gains (that needs a server per shard).
set -euo pipefail

echo
echo "== shards: the events of 500 streams x 2,000 events on two shards (all on this machine)"
admin_url=$(deploy/pg.sh url "$work/pg" --admin)
(cd / && runuser -u "$(stat -c %U "$work/pg/data")" -- psql -XAtq "$admin_url dbname=stackmine" \
	-c "CREATE EXTENSION IF NOT EXISTS postgres_fdw" -c "CREATE EXTENSION IF NOT EXISTS dblink" \
	-c "GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO stackmine")
chmod 755 "$work"   # the shards' clusters live in it, owned by postgres
for k in 1 2; do
	SM_PGPORT=$((54400 + k)) deploy/pg.sh start "$work/shard$k" >"$work/shard$k.log" 2>&1 ||
		{ echo "bench: cannot start shard $k:" >&2; cat "$work/shard$k.log" >&2; exit 1; }
	env -u PGPASSWORD "$bin/sm-admin" shard add "bench$k" "$(deploy/pg.sh url "$work/shard$k" --tcp)" >/dev/null
done
"$tools/genfleet" --streams 500 --events 2000 --apps shardbench --hosts 50 --seed 13 --out "$work/shards.ndjson" 2>/dev/null
send_fleet "$work/shards.ndjson" 10 4
rm -f "$work/shards.ndjson"
nev=$(psql -XAtc "SELECT sum(n_events) FROM streams WHERE app = 'shardbench'")
day=event_chunks_p$(date -u +%Y%m%d)
s1=$(psql -XAt "$(deploy/pg.sh url "$work/shard1")" -c "SELECT coalesce(sum(length(data) / 29), 0) FROM stackmine_events.$day")
s2=$(psql -XAt "$(deploy/pg.sh url "$work/shard2")" -c "SELECT coalesce(sum(length(data) / 29), 0) FROM stackmine_events.$day")
echo "sm-ingest:  $SEND_SECS s  $(rate "$nev" "$SEND_SECS") events/s  peak RSS $SEND_PEAK_MB MB  server CPU $SEND_CPU s" \
	" (events: $s1 on shard 1, $s2 on shard 2)"
for ps in 0 100; do
	if [ "$ps" = 0 ]; then
		t=$(timed "$bin/sm-miner" run --quiet --app shardbench --threshold-fraction 0.01 --part-streams 0)
		id=$(cat "$work/out")
	else
		w1=; w2=
		"$bin/sm-miner" worker --quiet --threads 1 --part-streams "$ps" 2>/dev/null & w1=$!
		"$bin/sm-miner" worker --quiet --threads 1 --part-streams "$ps" 2>/dev/null & w2=$!
		sleep 1
		t0=$(now)
		id=$("$bin/sm-miner" run --queue --quiet --app shardbench --threshold-fraction 0.01)
		for _ in $(seq 6000); do
			case $(psql -XAtc "SELECT status FROM runs WHERE id = $id") in done|failed) break ;; esac
			sleep 0.05
		done
		t="$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }')"
		kill "$w1" "$w2"
		wait "$w1" "$w2" 2>/dev/null || true
	fi
	echo "run $([ "$ps" = 0 ] && echo "in one piece:          " || echo "in parts, two workers:  ") $t" \
		" $(psql -XAtc "SELECT status || ', read and AOI ' || (timings_ms->>'read_aoi') || ' ms of ' || (timings_ms->>'total') || ' ms' FROM runs WHERE id = $id")"
done
psql -Xqc "DELETE FROM runs"
for k in 1 2; do deploy/pg.sh destroy "$work/shard$k" >/dev/null 2>&1 || true; done
