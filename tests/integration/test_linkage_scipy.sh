#!/usr/bin/env bash
# test_linkage_scipy: `sm-cluster linkage` against SciPy as the oracle.
#
# On random condensed matrices (n from 2 to 60; most with distances rounded to
# one decimal so that ties abound, some with only three distinct values, some
# continuous), for each of average, single and complete linkage: the linkage
# rows must be SciPy's (same a and b, sizes, heights within 1e-9; hence the
# same sorted heights), and the flat clusters of `--flat T` must be those of
# scipy's fcluster(Z, T, 'distance') at several cuts, up to relabelling (and
# numbered by lowest point, as documented). Also the input errors. Then fleets
# of call-stack patterns clustered as a mining run clusters them: the flat
# clusters must be SciPy's on the full matrix of 1 - Sim.
#
# Needs no database. SciPy comes from Debian (python3-scipy), which
# deploy/deps.sh test installs; without it the test fails saying so.
export SM_TEST_FRESH_DB=0
. "$(dirname "$0")/../lib.sh"

bin=$SM_BIN_DIR/sm-cluster
bench=$(dirname "$SM_BIN_DIR")/tests/clusterbench
[ -x "$bin" ] || t_bail "sm-cluster" "$bin is missing (build first)"
[ -x "$bench" ] || t_bail "clusterbench" "$bench is missing (build first)"

have_scipy() {
	"$1" -c 'import scipy.cluster.hierarchy, numpy' 2>/dev/null
}
py=
for cand in python3 /usr/bin/python3; do
	if command -v "$cand" >/dev/null && have_scipy "$cand"; then
		py=$cand
		break
	fi
done
[ -n "$py" ] || t_bail "scipy" "SciPy is missing: deploy/deps.sh test installs it (python3-scipy python3-numpy)"
echo "oracle: $("$py" -c 'import scipy, sys; print("scipy", scipy.__version__, "python", sys.version.split()[0])')"

# The Python side writes the inputs, runs sm-cluster, compares and prints one
# "ok NAME" or "FAIL NAME: WHY" line per check.
"$py" - "$bin" "$T_TMP" "$bench" >"$T_TMP/checks" 2>"$T_TMP/py.err" <<'EOF'
import subprocess, sys
import numpy as np
from scipy.cluster.hierarchy import linkage, fcluster

binary, tmp = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20240611)

def run(args, text):
    path = f"{tmp}/in.txt"
    with open(path, "w") as f:
        f.write(text)
    return subprocess.run([binary] + args + [path, "-"], capture_output=True, text=True)

def matrix_text(n, y):
    lines = [str(n)]
    k = 0
    for i in range(n - 1):
        row = y[k:k + n - 1 - i]
        k += n - 1 - i
        lines.append(" ".join(repr(float(v)) for v in row))
    return "\n".join(lines) + "\n"

def canon(labels):
    """partition as a sorted tuple of sorted member tuples"""
    groups = {}
    for i, l in enumerate(labels):
        groups.setdefault(int(l), []).append(i)
    return sorted(tuple(g) for g in groups.values())

def first_seen_numbering(labels):
    seen, out = {}, []
    for l in labels:
        seen.setdefault(int(l), len(seen))
        out.append(seen[int(l)])
    return out

cases = []
sizes = [2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60]
for c in range(32):
    n = sizes[c % len(sizes)] if c < len(sizes) else int(rng.integers(2, 61))
    m = n * (n - 1) // 2
    kind = c % 4
    if kind in (0, 1):
        y = np.round(rng.random(m), 1)           # ties everywhere
    elif kind == 2:
        y = rng.choice([0.2, 0.5, 0.8], size=m)  # only three values
    else:
        y = rng.random(m)                        # continuous
    cases.append((f"m{c:02d}-n{n}-{['r1', 'r1', 'v3', 'cont'][kind]}", n, y))
# hand-picked: all equal, a chain of equal nearest neighbours, n = 2
cases.append(("all-equal-n7", 7, np.full(21, 0.5)))
cases.append(("n2", 2, np.array([0.25])))
chain = []
for i in range(9):
    for j in range(i + 1, 9):
        chain.append(0.1 if j == i + 1 else 0.9)
cases.append(("chain-n9", 9, np.array(chain)))

cuts = [0.0, 0.1, 0.25, 0.3, 0.5, 0.55, 0.75, 1.0]
for name, n, y in cases:
    text = matrix_text(n, y)
    for method in ("average", "single", "complete"):
        tag = f"{name} {method}"
        Z = linkage(y, method=method)
        r = run(["linkage", "--method", method], text)
        if r.returncode != 0:
            print(f"FAIL {tag}: sm-cluster exited {r.returncode}: {r.stderr.strip()}")
            continue
        rows = [l.split() for l in r.stdout.splitlines()]
        if len(rows) != n - 1 or any(len(x) != 4 for x in rows):
            print(f"FAIL {tag}: {len(rows)} rows, expected {n - 1}")
            continue
        mine = np.array([[float(v) for v in x] for x in rows]) if rows else np.zeros((0, 4))
        why = None
        if n > 1 and np.max(np.abs(np.sort(mine[:, 2]) - np.sort(Z[:, 2]))) > 1e-9:
            why = f"heights {np.sort(mine[:, 2])} != {np.sort(Z[:, 2])}"
        elif n > 1 and not np.array_equal(mine[:, 3], Z[:, 3]):
            why = f"sizes {mine[:, 3]} != {Z[:, 3]}"
        elif n > 1 and not np.array_equal(mine[:, :2], Z[:, :2]):
            bad = int(np.nonzero(np.any(mine[:, :2] != Z[:, :2], axis=1))[0][0])
            why = f"row {bad}: {mine[bad]} != scipy {Z[bad]}"
        print(f"FAIL linkage {tag}: {why}" if why else f"ok   linkage {tag}")
        # flat clusters at several cuts, from sm-cluster's own fcluster
        bad = []
        for t in cuts:
            r = run(["linkage", "--method", method, "--flat", repr(t)], text)
            got = [int(v) for v in r.stdout.split()] if r.returncode == 0 else None
            want = fcluster(Z, t, criterion="distance") if n > 1 else [1]
            if got is None or len(got) != n:
                bad.append(f"t={t}: sm-cluster failed: {r.stderr.strip()}")
            elif canon(got) != canon(want):
                bad.append(f"t={t}: {canon(got)} != {canon(want)}")
            elif got != first_seen_numbering(got) or sorted(set(got)) != list(range(len(set(got)))):
                bad.append(f"t={t}: labels not numbered by lowest point: {got}")
        print(f"FAIL fcluster {tag}: {'; '.join(bad)}" if bad else f"ok   fcluster {tag}")

# errors: a message naming the line, exit status 1
def expect_error(name, text, pattern, args=()):
    r = run(["linkage"] + list(args), text)
    if r.returncode == 1 and pattern in r.stderr:
        print(f"ok   error {name}")
    else:
        print(f"FAIL error {name}: exit {r.returncode}, stderr {r.stderr.strip()!r}, wanted {pattern!r}")

expect_error("empty", "", "empty input")
expect_error("bad n", "three\n0.1\n", "in.txt:1: 'three' is not a number of points")
expect_error("n too big", "100001\n", "in.txt:1: 100001 points: at most 100000")
expect_error("n on a shared line", "3 0.1 0.2 0.3\n", "in.txt:1: the first line must hold only")
expect_error("bad distance", "3\n0.1 0.2\nx\n", "in.txt:3: distance 3: 'x' is not a finite number")
expect_error("nan", "3\n0.1 nan\n0.3\n", "in.txt:2: distance 2: 'nan' is not a finite number")
expect_error("too few", "4\n0.1 0.2 0.3\n0.4\n", "input ends after 4 of the 6 distances")
expect_error("too many", "3\n0.1 0.2\n0.3\n0.4\n", "in.txt:4: more than the 3 distances")
expect_error("long token", "3\n" + "1" * 100 + "\n", "in.txt:2: a token longer than 64 bytes")
r = subprocess.run([binary, "linkage", "--method", "ward", f"{tmp}/in.txt", "-"], capture_output=True, text=True)
print("ok   usage unknown method" if r.returncode == 2 and "unknown method 'ward'" in r.stderr
      else f"FAIL usage unknown method: {r.returncode} {r.stderr.strip()!r}")
r = run(["linkage"], "1\n")
print("ok   one point" if r.returncode == 0 and r.stdout == "" else f"FAIL one point: {r.returncode} {r.stdout!r}")

# Fleets of call-stack patterns (tests/tools/clusterbench: families of variants
# sharing thread-start and library frames), clustered as a run clusters them
# (pairs pruned by the bound, and for average linkage the exact distances kept
# inside components): the flat clusters must be SciPy's on the full matrix of
# every pair's 1 - Sim.
bench = sys.argv[3]
for seed, n, fam in ((1, 240, 12), (2, 300, 25), (3, 200, 6)):
    for method in ("average", "single", "complete"):
        for cut in (0.1, 0.3, 0.5):
            tag = f"patterns seed {seed} n {n} {method} cut {cut}"
            r = subprocess.run([bench, "--patterns", str(n), "--family", str(fam), "--seed", str(seed),
                                "--method", method, "--cut", str(cut), "--write", tmp],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {tag}: clusterbench exited {r.returncode}: {r.stderr.strip()}")
                continue
            y = np.fromfile(f"{tmp}/dist.f64", dtype="<f8")
            got = [int(v) for v in open(f"{tmp}/labels").read().split()]
            want = fcluster(linkage(y, method=method), cut, criterion="distance")
            if len(y) != n * (n - 1) // 2 or len(got) != n:
                print(f"FAIL {tag}: {len(y)} distances and {len(got)} labels for {n} patterns")
            elif canon(got) != canon(want):
                diff = sum(1 for g in canon(got) if g not in canon(want))
                print(f"FAIL {tag}: {diff} of {len(set(got))} clusters differ from SciPy's {len(set(want))}")
            else:
                beyond = sum(1 for d in y if cut < d < 1)
                print(f"ok   {tag} ({len(set(got))} clusters; {beyond} pairs beyond the cut share a frame)")
EOF
rc=$?
if [ $rc -ne 0 ]; then
	sed 's/^/  | /' "$T_TMP/py.err"
	t_fail "oracle script" "python exited $rc"
fi
while IFS= read -r line; do
	case $line in
	"ok   "*) t_ok "${line#ok   }" ;;
	"FAIL "*)
		rest=${line#FAIL }
		t_fail "${rest%%: *}" "${rest#*: }"
		;;
	esac
done <"$T_TMP/checks"
[ "$T_PASSED" -ge 100 ] || t_fail "number of checks" "only $T_PASSED passed checks ran"
t_done
