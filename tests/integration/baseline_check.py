#!/usr/bin/python3
"""baseline_check: judge the excess cost of mining runs against genfleet's ground truth.

usage: baseline_check.py TRUTH RUN_ID... (psql reaches the database through the PG*
environment; only the standard library is used)

For every run (one app, one kind) measured against baseline streams:
- a bug's cluster is the best-ranked cluster by total cost of the run's kind with a
  member pattern containing the bug's signature (as e2e_check.py has it);
- the dispatch cluster is the best-ranked cluster by total cost whose common part
  holds the ordinary request dispatch (http::Router::dispatch) and that is no bug's
  cluster, when the run has one.

Prints the clusters by excess cost, then one verdict line per check:
  PASS name        or        FAIL name: why
  above      every bug's cluster ranks above the dispatch cluster by excess cost
  sinks      the dispatch cluster is not first by excess cost
  interval   the excess of every bug's cluster has a 95 % interval above 0
  owned      no cluster owns more than its total cost, and the clusters of the run own
             at most the run's AOI cost (each event counts for one cluster)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_check import NAMES, contains, q, sides  # noqa: E402


def main():
    truth = json.load(open(sys.argv[1]))
    verdicts = []

    def check(ok, name, why):
        verdicts.append(f"PASS {name}" if ok else f"FAIL {name}: {why}")

    for run in [int(r) for r in sys.argv[2:]]:
        params = q(f"SELECT params FROM runs WHERE id = {run} AND status = 'done'")
        kind = params["kind"][0]
        app = params["app"]
        clusters = q(f"""SELECT coalesce(json_agg(json_build_object('id', c.id, 'rank', c.rank_total_cost,
            'xrank', c.rank_excess_cost, 'cost', c.total_cost_ns, 'own', c.own_cost_ns,
            'expected', c.expected_cost_ns, 'excess', c.excess_cost_ns, 'lo', c.excess_lo_ns,
            'hi', c.excess_hi_ns, 'common', {NAMES.format('c.common_frame_ids')},
            'members', (SELECT json_agg({NAMES.format('p.frame_ids')}) FROM patterns p WHERE p.id = ANY(c.members)))
            ORDER BY c.rank_total_cost), '[]') FROM clusters c WHERE c.run_id = {run} AND c.kind = '{kind}'""")
        aoi = q(f"SELECT coalesce(sum(cost_ns), 0) FROM run_stacks WHERE run_id = {run} AND kind = '{kind}'")
        print(f"run {run} ({app}, kind {params['kind']}): {len(clusters)} clusters; by excess cost "
              "(excess rank, total rank, excess [95 %], own, expected, innermost frames):")
        for c in sorted(clusters, key=lambda c: c["xrank"])[:8]:
            tail = " > ".join(f.split("!")[-1][:40] for f in c["common"][-2:])
            print(f"  {c['xrank']:3d} {c['rank']:3d} {c['excess'] / 1e9:8.3f} s [{c['lo'] / 1e9:.3f}, "
                  f"{c['hi'] / 1e9:.3f}] {c['own'] / 1e9:8.3f} {c['expected'] / 1e9:8.3f}  ... {tail}")
        bugs = []
        for bug in truth["bugs"]:
            if bug["app"] != app:
                continue
            for side, k, sig in sides(bug):
                if k != kind:
                    continue
                name = bug["name"] + (f" ({side})" if side else "")
                holder = next((c for c in clusters if any(contains(sig, m) for m in c["members"])), None)
                if holder is None:
                    check(False, f"run {run} {name} above", "in no cluster")
                    continue
                bugs.append((name, holder))
                check(holder["lo"] > 0, f"run {run} {name} interval",
                      f"excess {holder['excess']} ns, interval [{holder['lo']}, {holder['hi']}]")
        # the ordinary dispatch: the costliest cluster through http::Router::dispatch that holds no bug
        held = {holder["id"] for _, holder in bugs}
        dispatch = next((c for c in clusters if c["id"] not in held and
                         any(f.endswith("http::Router::dispatch(http::Request&, http::Response&)") for f in c["common"])),
                        None)
        if dispatch:
            print(f"  dispatch: total rank {dispatch['rank']}, excess rank {dispatch['xrank']}")
            check(dispatch["xrank"] > 1, f"run {run} dispatch sinks", f"excess rank {dispatch['xrank']}")
            for name, holder in bugs:
                check(holder["xrank"] < dispatch["xrank"], f"run {run} {name} above",
                      f"excess rank {holder['xrank']}, the dispatch's {dispatch['xrank']}")
        owned = sum(c["own"] for c in clusters)
        over = [c["id"] for c in clusters if c["own"] > c["cost"]]
        check(not over and owned <= aoi, f"run {run} owned",
              f"clusters {over} own more than their cost, or {owned} > {aoi}")
    for v in verdicts:
        print(v)


if __name__ == "__main__":
    main()
