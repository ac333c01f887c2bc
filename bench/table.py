"""Markdown tables of one benchmark run, one per case: time per all-reduce (us) / busbw
(GB/s) for each size and tool. Reads OUT/TOOL.CASE files of "bytes time_us busbw [WRONG]"
lines (what bench/transports.sh and bench/peers.sh collect); a tool without results for a
case is named under its table with the tail of OUT/TOOL.CASE.err. OUT may be a glob of
several runs' folders (bench/peers.sh's rounds): each cell is then the run with the median
time for that size (WRONG if any run was wrong).
Usage: python3 table.py OUT CASE[,CASE...] TOOL..."""
import glob
import os
import sys


def load(path):
    rows = {}
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            if len(f) >= 3 and f[0].isdigit():
                rows[int(f[0])] = (float(f[1]), float(f[2]), "WRONG" in line)
    return rows


def median_of(paths):
    runs = [load(p) for p in paths]
    rows = {}
    for size in sorted({s for r in runs for s in r}):
        got = sorted((r[size] for r in runs if size in r), key=lambda row: row[0])
        us, bw, _ = got[(len(got) - 1) // 2]
        rows[size] = (us, bw, any(row[2] for row in got))
    return rows


def main():
    outs, cases, tools = sorted(glob.glob(sys.argv[1])) or [sys.argv[1]], sys.argv[2].split(","), sys.argv[3:]
    out = outs[-1]  # where a missing result's error is read
    for case in cases:
        data = {t: median_of([f"{o}/{t}.{case}" for o in outs]) for t in tools}
        # A tool with no file at all for the case did not run there (e.g. shared memory
        # between emulated hosts); one that ran and left nothing is reported.
        cols = [t for t in tools if data[t] or os.path.exists(f"{out}/{t}.{case}.err")]
        if not any(data.values()):
            continue
        sizes = sorted({s for d in data.values() for s in d})
        print(f"\n### {case}: time per all-reduce (us) / busbw (GB/s)\n")
        print("| size | " + " | ".join(cols) + " |")
        print("|---:|" + "---:|" * len(cols))
        for s in sizes:
            cells = []
            for t in cols:
                if s in data[t]:
                    us, bw, wrong = data[t][s]
                    cells.append(f"{us:.1f} / {bw:.3f}{' WRONG' if wrong else ''}")
                else:
                    cells.append("-")
            label = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
            print(f"| {label} | " + " | ".join(cells) + " |")
        for t in cols:
            if not data[t]:
                err = f"{out}/{t}.{case}.err"
                tail = open(err).read()[-400:].strip() if os.path.exists(err) else ""
                print(f"\n{t} {case}: no result; {tail}")


main()
