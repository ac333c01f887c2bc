#!/usr/bin/env bash
# examples/trainer on 4 ranks must end with the weights of the same trainer on 1 rank (which
# takes the whole 64-sample batch itself) within 1e-5 relative, and its loss must fall.
set -euo pipefail
rr=$1 trainer=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out4=$(timeout --kill-after=5 120 "$rr" run -n 4 -- "$trainer" --out "$dir/w4.bin")
out1=$(RR_RANK= RR_SIZE= timeout --kill-after=5 120 "$trainer" --out "$dir/w1.bin")
echo "$out4"
python3 - "$dir/w4.bin" "$dir/w1.bin" "$out4" <<'PY'
import re, struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
x = struct.unpack(f"{len(a)//8}d", a)
y = struct.unpack(f"{len(b)//8}d", b)
assert len(x) == len(y) == 577, (len(x), len(y))
rel = max(abs(p - q) / max(abs(q), 1e-12) for p, q in zip(x, y))
print(f"largest relative difference between 4 ranks and 1 rank: {rel:.3g}")
assert rel <= 1e-5, "weights differ"
losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", sys.argv[3])]
print(f"loss {losses[0]} -> {losses[-1]}")
assert len(losses) == 20 and losses[-1] < 0.5 * losses[0], "loss did not fall"
PY
