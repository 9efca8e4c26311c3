#!/usr/bin/python3
"""e2e_check: judge the clusters of mining runs against genfleet's ground truth.

usage: e2e_check.py TRUTH RUN_ID... (psql reaches the database through the PG*
environment; only the standard library is used)

For every run (one per app) and every injected bug of that app, on each side
of the bug (a lock convoy has two: the holder's CPU, kind run, and the waiter's
wait, kind wait):

- the bug's events are the run's AOI events whose stack contains the bug's
  signature (truth `frames`, or `wait_frames` for the waiter) as a subsequence;
  a variant's, those whose stack contains the variant's frames;
- the bug's cluster is the best-ranked cluster (by total cost) of that kind with
  a member pattern containing the signature.

Prints one line per figure and then one verdict line per check:
  PASS name        or        FAIL name: why
The checks (tests/integration/test_e2e.sh turns them into test results):
  top5      the bug's cluster ranks 1 to 5 by TotalCost among its kind
  variants  every variant of the bug has events matched by the bug's cluster
            (its variants sit in one cluster)
  share     the bug's cluster matches at least half the bug's cost
  noise     no cluster whose member contains an idle-wait noise frame set of
            the truth (classes outside the wait-graph AOI) ranks above any bug
            of its kind
  problems  a run with several bugs has each bug's cluster in a problem of its
            own (docs/mining.md, "Problems")
With --absent RUN SIDE: the run must have no cluster holding that bug side
(the holder's CPU is out of reach of a symptom-thread-only AOI).
"""
import json
import subprocess
import sys


def q(sql):
    out = subprocess.check_output(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
    return json.loads(out or b"null")


def contains(pat, frames):
    """pat is a subsequence of frames."""
    it = iter(frames)
    return all(any(f == p for f in it) for p in pat)


NAMES = "(SELECT array_agg(f.name ORDER BY o.i) FROM unnest({}) WITH ORDINALITY o(id, i) JOIN frames f ON f.id = o.id)"


def load(run):
    params = q(f"SELECT params FROM runs WHERE id = {int(run)} AND status = 'done'")
    if params is None:
        sys.exit(f"e2e_check: run {run} is not done")
    clusters = q(f"""SELECT coalesce(json_agg(json_build_object('kind', c.kind, 'rank', c.rank_total_cost,
        'problem', c.problem_id,
        'cost', c.total_cost_ns, 'streams', c.streams, 'events', c.events,
        'common', {NAMES.format('c.common_frame_ids')},
        'members', (SELECT json_agg({NAMES.format('p.frame_ids')}) FROM patterns p WHERE p.id = ANY(c.members)))
        ORDER BY c.kind, c.rank_total_cost), '[]') FROM clusters c WHERE c.run_id = {int(run)}""")
    stacks = q(f"""SELECT coalesce(json_agg(json_build_object('kind', x.kind, 'cost', x.cost,
        'frames', (SELECT {NAMES.format('s.frame_ids')} FROM stacks s WHERE s.id = x.stack_id))), '[]')
        FROM (SELECT kind, stack_id, sum(cost_ns) AS cost FROM run_stacks WHERE run_id = {int(run)}
              GROUP BY 1, 2) x""")
    return params, clusters, stacks


def sides(bug):
    if bug.get("wait_frames"):
        return [("holder", "r", bug["frames"]), ("waiter", "w", bug["wait_frames"])]
    return [("", bug["kind"][0], bug["frames"])]


def main():
    args = sys.argv[1:]
    absent = []
    while args[:1] == ["--absent"]:
        absent.append((int(args[1]), args[2]))
        args = args[3:]
    truth = json.load(open(args[0]))
    runs = [int(r) for r in args[1:]]
    verdicts = []

    def check(ok, name, why):
        verdicts.append(f"PASS {name}" if ok else f"FAIL {name}: {why}")

    idle = [n for n in truth["noise"] if not n["in_waitgraph_aoi"]]
    for run in runs:
        params, clusters, stacks = load(run)
        app = params["app"]
        kinds = {"run": "r", "wait": "w", "both": "rw"}[params["kind"]]
        nk = {k: sum(c["kind"] == k for c in clusters) for k in "rw"}
        print(f"run {run} ({app}, kind {params['kind']}, threshold {params.get('threshold_ns')} ns, {params['linkage']} "
              f"linkage, cut {params['cut']}): {nk['r']} run clusters, {nk['w']} wait clusters")
        worst = {"r": 0, "w": 0}   # the lowest rank of a bug's cluster, per kind
        problems = {}              # bug -> the problems of its clusters
        for bug in truth["bugs"]:
            if bug["app"] != app:
                continue
            for side, kind, sig in sides(bug):
                if kind not in kinds:
                    continue
                name = bug["name"] + (f" ({side})" if side else "")
                holders = [c for c in clusters if c["kind"] == kind and any(contains(sig, m) for m in c["members"])]
                bstacks = [s for s in stacks if s["kind"] == kind and contains(sig, s["frames"])]
                total = sum(s["cost"] for s in bstacks)
                if not holders:
                    print(f"  {name}: no cluster has it (bug cost {total / 1e9:.3f} s)")
                    check(False, f"{name} top5", "in no cluster")
                    continue
                k = holders[0]
                worst[kind] = max(worst[kind], k["rank"])
                problems.setdefault(bug["name"], set()).add(k["problem"])

                def matched(sts):
                    return sum(s["cost"] for s in sts if any(contains(m, s["frames"]) for m in k["members"]))
                vfig, vmissing = [], []
                for v in bug["variants"]:
                    if v["kind"][0] != kind:
                        continue
                    vst = [s for s in bstacks if contains(v["frames"], s["frames"])]
                    vt = sum(s["cost"] for s in vst)
                    vm = matched(vst)
                    vfig.append(f"variant {v['variant']} ({v['when']}) {vm / vt if vt else 0:.0%}")
                    if vm == 0:
                        vmissing.append(str(v["variant"]))
                share = matched(bstacks) / total if total else 0
                print(f"  {name}: cluster rank {k['rank']} of {nk[kind]} ({kind}), total cost "
                      f"{k['cost'] / 1e9:.3f} s, {k['streams']} streams, {len(k['members'])} members; "
                      f"it matches {share:.0%} of the bug's {total / 1e9:.3f} s: {', '.join(vfig)}; "
                      f"other clusters with the signature: {[c['rank'] for c in holders[1:]]}")
                print(f"    common part: {' > '.join(k['common'])}")
                check(k["rank"] <= 5, f"{name} top5", f"rank {k['rank']}")
                check(not vmissing, f"{name} variants", f"variants {','.join(vmissing)} not in its cluster")
                check(share >= 0.5, f"{name} share", f"its cluster matches {share:.0%} of its cost")
        if len(problems) > 1:
            # distinct bugs (a convoy's two sides are one) are distinct problems
            owners = [p for ps in problems.values() for p in ps]
            print(f"  problems of the bugs' clusters: {problems}")
            check(len(set(owners)) == len(owners) and None not in owners, f"{app} {params['kind']} bugs are separate problems",
                  f"{problems}")
        for kind in kinds:
            print(f"  top {kind} clusters (rank, total cost, streams, events, members, innermost frames of the common part):")
            for c in [c for c in clusters if c["kind"] == kind][:8]:
                tail = " > ".join(f.split("!")[-1][:48] for f in c["common"][-3:])
                print(f"    {c['rank']:3d} {c['cost'] / 1e9:8.3f} s {c['streams']:5d} {c['events']:7d} "
                      f"{len(c['members']):4d}  ... {tail}")
            noisy = [c for c in clusters if c["kind"] == kind and
                     any(n["kind"][0] == kind and n["app"] == app and contains(n["frames"], m)
                         for n in idle for m in c["members"])]
            best = min((c["rank"] for c in noisy), default=None)
            print(f"  idle-wait noise clusters ({kind}): {len(noisy)}, best rank {best}; "
                  f"worst bug rank {worst[kind] or '-'}")
            check(best is None or best > worst[kind], f"{app} {kind} noise below bugs",
                  f"an idle cluster ranks {best}, above a bug at {worst[kind]}")
    for run, side in absent:
        params, clusters, _ = load(run)
        for bug in truth["bugs"]:
            if bug["app"] != params["app"]:
                continue
            for s, kind, sig in sides(bug):
                if s == side:
                    n = sum(1 for c in clusters if c["kind"] == kind and any(contains(sig, m) for m in c["members"]))
                    print(f"run {run} ({params['app']}, aoi {params['aoi']}): {n} clusters hold {bug['name']} ({side})")
                    check(n == 0, f"{bug['name']} ({side}) absent with aoi {params['aoi']}", f"{n} clusters")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
