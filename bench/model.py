#!/usr/bin/env python3
"""Cost model of the ring all-reduce, fitted to this machine, checked, then extrapolated.

    time(n, S) = hops x latency + wire bytes / link rate + reduced bytes / reduce rate
    ring:  hops = 2(n-1),  wire bytes = 2(n-1)/n x S,  reduced bytes = (n-1)/n x S
    rd:    hops = log2 n,  wire bytes = log2 n x S,    reduced bytes = log2 n x S
           (recursive doubling, RR_ALGO=rd; built for n = 2, where it is one exchange)

Terms, each measured on this machine in the run whose output is given (never a figure from
another machine):
  latency      per hop: from the 4 KiB all-reduce of the same run, where bytes are
               negligible: its time / 2(n-1) at the smallest n above 2 (at n = 2 RR_ALGO=auto
               runs recursive doubling up to 64 KiB, one hop, not the ring's two), the median
               of the runs at that n
  link rate    iperf3's rate in the same run (emulated hosts: tc tbf per link)
  reduce rate  the host reducer's rate (fp32 sum, `reduce_rate` in the same run)

Where all the ranks share one host (the loopback jobs of 32..128 ranks on 2 cores), the
terms are the host's: a hop's latency grows with the processes that share the cores,
latency(n) = a + b x n (a and b from the 4 KiB all-reduce of the smallest and the largest
job), and the ranks share the host's copy rate C: link = C / n per rank, C from the 1 MiB
all-reduce of the smallest job. The other points check it.

It prints its error against every measured point, then predicts time and busbw
(= algbw x 2(n-1)/n) for n up to 4,096 at 25 and 100 Gbit/s for the buckets of ResNet-50
(25 MiB, the Horovod/PyTorch default bucket; 97.5 MiB of fp32 gradients in all) and of a
1 B parameter model (4 GB of fp32 gradients, as one pass and in 25 MiB buckets), with a
per-hop latency of the measured emulated-host latency (an assumption: real NICs and
switches differ).

With --rd RD_NETNS_OUTPUT (bench/netns_ring.sh run with RR_ALGO=rd, n = 2) it checks the
rd line with the same terms: the 1-4 KiB points (one hop, against the ring's two) and the
shaped points from 1 MiB. The predictions add the 4 KiB all-reduce by both algorithms.

Usage: python3 bench/model.py [--rd RD_NETNS_OUTPUT] NETNS_OUTPUT [SCALE_OUTPUT] [REDUCE_RATE_GBS]
  NETNS_OUTPUT   output of bench/netns_ring.sh (lines "n=N SIZE B time T us busbw B GB/s",
                 "# iperf3 one stream: X Gbit/s")
  SCALE_OUTPUT   lines of test/scale_check ("N ranks: ... 4 KiB all-reduce T us; 1 MiB
                 all-reduce T ms") from the loopback jobs, with "# iperf3 loopback: X Gbit/s";
                 where a job ran several times (bench/scale.sh's rounds), the median of each
                 figure is the point
"""
import re
import statistics
import sys


def ring_time(n, size, latency, link, reduce_rate):
    if n < 2:
        return 0.0
    return 2 * (n - 1) * latency + 2 * (n - 1) / n * size / link + (n - 1) / n * size / reduce_rate


def rd_time(n, size, latency, link, reduce_rate):
    if n < 2:
        return 0.0
    steps = (n - 1).bit_length()  # log2 n, rounded up (the fold-in of n not a power of two: +2)
    return steps * latency + steps * size / link + steps * size / reduce_rate


def busbw(n, size, t):
    return size / t * 2 * (n - 1) / n if t > 0 else 0.0


def parse_netns(path):
    points, link = [], None
    for line in open(path):
        m = re.match(r"# iperf3 one stream: ([0-9.]+) Gbit/s", line)
        if m:
            link = float(m.group(1)) * 1e9 / 8
        m = re.match(r"n=(\d+)\s+(\d+) B\s+time\s+([0-9.]+) us", line)
        if m:
            points.append((int(m.group(1)), int(m.group(2)), float(m.group(3)) * 1e-6))
    return points, link


def median_points(points):
    """One point per (n, size): the median time of the runs that measured it."""
    runs = {}
    for n, size, t in points:
        runs.setdefault((n, size), []).append(t)
    return [(n, size, statistics.median(ts)) for (n, size), ts in sorted(runs.items())]


def parse_scale(path):
    points, link = [], None
    for line in open(path):
        m = re.search(r"# iperf3 loopback: ([0-9.]+) Gbit/s", line)
        if m:
            link = float(m.group(1)) * 1e9 / 8
        m = re.search(r"(\d+) ranks: .*4 KiB all-reduce ([0-9.]+) us; 1 MiB all-reduce ([0-9.]+) ms", line)
        if m:
            n = int(m.group(1))
            points.append((n, 4096, float(m.group(2)) * 1e-6))
            points.append((n, 1 << 20, float(m.group(3)) * 1e-3))
    return median_points(points), link


def check(name, points, latency_of, link_of, reduce_rate, terms, model=ring_time):
    print(f"\n{name}: {terms}")
    print(f"{'n':>5} {'size':>10} {'measured':>12} {'model':>12} {'error':>8}")
    worst = 0.0
    for n, size, t in points:
        m = model(n, size, latency_of(n), link_of(n), reduce_rate)
        err = (m - t) / t
        worst = max(worst, abs(err))
        print(f"{n:>5} {size:>10} {t * 1e3:>10.3f}ms {m * 1e3:>10.3f}ms {err * 100:>7.1f}%"
              f"{'   (over 15%)' if abs(err) > 0.15 else ''}")
    print(f"worst error: {worst * 100:.1f}%")
    return worst


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    rd_path = None
    if sys.argv[1] == "--rd":
        rd_path = sys.argv[2]
        del sys.argv[1:3]
    reduce_rate = float(sys.argv[3]) * 1e9 if len(sys.argv) > 3 else 8e9
    points, link = parse_netns(sys.argv[1])
    if not points or link is None:
        sys.exit("no emulated-host points or no iperf3 rate in " + sys.argv[1])
    ring_small = [p for p in points if p[1] <= 4096 and p[0] > 2]
    if not ring_small:
        sys.exit("no 4 KiB point above n = 2 (the ring's latency) in " + sys.argv[1])
    n_small = min(p[0] for p in ring_small)
    small = (n_small, 4096, statistics.median(p[2] for p in ring_small if p[0] == n_small))
    latency = small[2] / (2 * (small[0] - 1))
    # Below 1 MiB a message fits tbf's 256 KiB burst and passes unshaped: the link term
    # does not hold there, so those points fit only the latency.
    shaped = [p for p in points if p[1] >= 1 << 20]
    check("emulated hosts (tc tbf links), 1 MiB and up", shaped, lambda n: latency, lambda n: link, reduce_rate,
          f"latency {latency * 1e6:.1f} us/hop (4 KiB, n={small[0]}), link {link / 1e9:.3f} GB/s "
          f"(iperf3), reduce {reduce_rate / 1e9:.2f} GB/s")
    if rd_path:
        rpoints, _ = parse_netns(rd_path)
        rpoints = [p for p in rpoints if p[0] == 2 and (p[1] <= 4096 or p[1] >= 1 << 20)]
        # Below 1 MiB only the latency term holds (tbf's burst), as for the ring: the small
        # points check that rd pays one hop where the ring pays two.
        check("recursive doubling (RR_ALGO=rd), emulated hosts n = 2: 1-4 KiB and 1 MiB up",
              rpoints, lambda n: latency, lambda n: link, reduce_rate,
              f"the same terms; 1 hop, S on the wire each way, S reduced", model=rd_time)
    if len(sys.argv) > 2:
        spoints, _ = parse_scale(sys.argv[2])
        if spoints:
            lo = min(spoints, key=lambda p: (p[0], p[1]))
            hi = max((p for p in spoints if p[1] == 4096), key=lambda p: p[0])
            lat_lo, lat_hi = lo[2] / (2 * (lo[0] - 1)), hi[2] / (2 * (hi[0] - 1))
            b = (lat_hi - lat_lo) / (hi[0] - lo[0]) if hi[0] != lo[0] else 0.0
            a = lat_lo - b * lo[0]
            big = min((p for p in spoints if p[1] == 1 << 20), key=lambda p: p[0])
            n0 = big[0]
            bytes_time = big[2] - 2 * (n0 - 1) * (a + b * n0) - (n0 - 1) / n0 * big[1] / reduce_rate
            host_rate = 2 * (n0 - 1) / n0 * big[1] / bytes_time * n0
            check("one host, every rank on it (loopback jobs)", spoints, lambda n: a + b * n,
                  lambda n: host_rate / n, reduce_rate,
                  f"latency {a * 1e6:.0f} + {b * 1e6:.2f} x n us/hop, host copy rate "
                  f"{host_rate / 1e9:.2f} GB/s shared by n ranks, reduce {reduce_rate / 1e9:.2f} GB/s")

    print("\nPredictions (ring, per-hop latency as on emulated hosts, "
          f"{latency * 1e6:.0f} us; reduce {reduce_rate / 1e9:.1f} GB/s):")
    # (name, bucket bytes, buckets per step): a step's gradients all-reduced as one pass, or
    # in 25 MiB buckets one pass each (a 1 B parameter model's 4 GB is 164 of them).
    bucket = 25 << 20
    rows = [("ResNet-50, 25 MiB bucket", bucket, 1),
            ("ResNet-50, all 97.5 MiB", int(97.5 * (1 << 20)), 1),
            ("1 B params, 4 GB in one", 4 << 30, 1),
            ("1 B params, 164 x 25 MiB", bucket, -(-(4 << 30) // bucket))]
    for gbit in (25, 100):
        rate = gbit * 1e9 / 8
        print(f"\n{gbit} Gbit/s links: busbw in GB/s (time per step)")
        header = "".join(f"{'n=' + str(n):>16}" for n in (8, 128, 1024, 4096))
        print(f"{'bucket':>26}{header}")
        for name, size, count in rows:
            row = ""
            for n in (8, 128, 1024, 4096):
                t = count * ring_time(n, size, latency, rate, reduce_rate)
                row += f"{busbw(n, count * size, t) / 1e9:>7.2f} ({t * 1e3:>5.0f}ms)"
            print(f"{name:>26}{row}")
        # The share of the bandwidth bound that latency leaves at each n (25 MiB buckets).
        size = 25 << 20
        eff = [ (2 * (n - 1) / n * size / rate) / ring_time(n, size, latency, rate, reduce_rate)
                for n in (8, 128, 1024, 4096)]
        print(f"{'25 MiB: share of link rate':>26}" + "".join(f"{e:>16.2f}" for e in eff))
        # A small bucket is latency: the ring's 2(n-1) hops against recursive doubling's
        # log2 n (built for n = 2 only; for more ranks, what it would take if built).
        small = 4096
        print(f"{'4 KiB, ring (us)':>26}" + "".join(
            f"{ring_time(n, small, latency, rate, reduce_rate) * 1e6:>16.0f}" for n in (8, 128, 1024, 4096)))
        print(f"{'4 KiB, rd (us)':>26}" + "".join(
            f"{rd_time(n, small, latency, rate, reduce_rate) * 1e6:>16.0f}" for n in (8, 128, 1024, 4096)))


if __name__ == "__main__":
    main()
