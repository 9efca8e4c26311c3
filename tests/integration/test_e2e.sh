#!/usr/bin/env bash
# e2e: a generated fleet with known bugs (tests/tools/genfleet, docs/demo-fleet.md)
# through the whole backend: sm-agent ships it to the real sm-ingest, sm-miner
# mines each app (wait graph AOI, costly maximal patterns, clustering with the
# default average linkage and cut 0.5), and the clusters are judged against
# the generator's ground truth by e2e_check.py:
#   - every injected bug's cluster is in the top 5 by TotalCost of its kind;
#   - each bug's variants (two callers, x86_64/i686, ...) sit in that one cluster,
#     which matches at least half of the bug's cost;
#   - the lock convoy's cost in the holder's thread (CPU, not the waiter's) is
#     found through the wait graph, and not with the symptom thread alone;
#   - no cluster of idle waits or background work ranks above a bug;
#   - the checkout run's three bugs are three problems (docs/mining.md, "Problems").
# Each app is mined twice, run stacks and wait stacks (as POST /api/v1/runs
# takes one kind), with the paper's threshold guideline (section V, mining.md
# section 2): to find bugs that hit 10% of the streams with a delay d each,
# C = 0.1 * d * streams of the app; d = 0.3 s of CPU, 0.15 s of waiting.
# SM_E2E_SEED and SM_E2E_STREAMS change the fleet (default seed 1, 300 streams),
# SM_E2E_RUN_DELAY_MS and SM_E2E_WAIT_DELAY_MS the delays (300, 150), SM_GENFLEET
# the generator; docs/clustering.md has what other seeds and thresholds give.
. "$(dirname "$0")/../lib.sh"

genfleet=${SM_GENFLEET:-$SM_BIN_DIR/../tests/genfleet}
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
seed=${SM_E2E_SEED:-1}
nstreams=${SM_E2E_STREAMS:-300}
run_delay_ms=${SM_E2E_RUN_DELAY_MS:-300}
wait_delay_ms=${SM_E2E_WAIT_DELAY_MS:-150}

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"

"$genfleet" --streams "$nstreams" --seed "$seed" --out "$T_TMP/fleet.ndjson" --truth "$T_TMP/truth.json" ||
	t_bail "genfleet"
SM_TOKEN=$TOKEN "$SM_BIN_DIR/sm-agent" ship --url "$INGEST_URL" --spool "$T_TMP/spool" "$T_TMP/fleet.ndjson" \
	>"$T_TMP/ship.out" 2>&1 || { sed 's/^/  | /' "$T_TMP/ship.out"; t_bail "sm-agent ship"; }
t_eq "fleet stored" "$(pg_q 'SELECT count(*) FROM streams')" "$nstreams"
stop_ingest

# mine KIND APP DELAY_MS [OPTIONS...]: prints the run id
mine() {
	local kind=$1 app=$2 d=$3 n
	shift 3
	n=$(pg_q "SELECT count(*) FROM streams WHERE app = :'app'" -v app="$app")
	"$SM_BIN_DIR/sm-miner" run --quiet --app "$app" --kind "$kind" --threshold-ns $((n * d * 100000)) "$@" \
		2>"$T_TMP/miner.err" || { sed 's/^/  | /' "$T_TMP/miner.err" >&2; return 1; }
}
runs=()
for app in $(pg_q 'SELECT DISTINCT app FROM streams ORDER BY 1'); do
	id=$(mine run "$app" "$run_delay_ms") || t_bail "sm-miner run --app $app --kind run"
	runs+=("$id")
	id=$(mine wait "$app" "$wait_delay_ms") || t_bail "sm-miner run --app $app --kind wait"
	runs+=("$id")
done
t_eq "two runs per app" "${#runs[@]}" 4
thread_run=$(mine run checkout "$run_delay_ms" --aoi thread) || t_bail "sm-miner run --aoi thread"

"$py" "$SM_REPO/tests/integration/e2e_check.py" --absent "$thread_run" holder \
	"$T_TMP/truth.json" "${runs[@]}" >"$T_TMP/check.out" 2>&1 || t_bail "e2e_check.py" "$(cat "$T_TMP/check.out")"
t_verdicts "$T_TMP/check.out"
# 5 bugs, the convoy with two sides: 6 x 3 checks; noise: 2 apps x 2 kinds; 1 absent; the
# checkout run's three bugs in three problems
t_eq "every check ran" "$T_VERDICTS" 24
t_done
