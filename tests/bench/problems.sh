#!/usr/bin/env bash
# bench/problems.sh: the acceptance of issue 26 with longer loads (make bench, section "problems";
# figures, not a test). Runs tests/integration/test_real_problems.sh against the release build and
# the bench's database as it is (the streams are told apart by their label): PostgreSQL, redis and
# nginx from Debian's packages, each trained on its normal load, then guarded (default agent settings) with realistic problems mixed in (lock waits
# on a hot row, a missing index, a sort that spills; KEYS, DEL of a big set, a slow EVAL; a slow
# upstream, gzip at level 9), mined with default settings. Prints per problem its rank among the
# run's clusters, the clusters it spans, its streams and violations, the load tool's own count of
# slow requests (recall), and the shipped streams of no problem; SM_PROBLEMS_GOAL=1 makes the goal
# (each problem among the top 3 of its app, normal work below it) a check.
#
# Environment: SM_BENCH_PROBLEMS_TRAIN_S (training per server, 30 s), SM_BENCH_PROBLEMS_LOAD_S (the
# guarded load per server, 120 s), SM_PROBLEMS_APPS (postgres redis nginx). Needs root
# (PostgreSQL runs as postgres).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
echo "== problems: real servers with realistic problems (training ${SM_BENCH_PROBLEMS_TRAIN_S:-30} s," \
	"load ${SM_BENCH_PROBLEMS_LOAD_S:-120} s per server)"
SM_TEST_FRESH_DB=0 SM_BIN_DIR=$repo/bin SM_PROBLEMS_TRAIN_S=${SM_BENCH_PROBLEMS_TRAIN_S:-30} \
	SM_PROBLEMS_LOAD_S=${SM_BENCH_PROBLEMS_LOAD_S:-120} \
	bash "$repo/tests/integration/test_real_problems.sh" 2>&1 | grep -v -E '^ok |LOG:|FATAL:|lib.sh: cleanup'
