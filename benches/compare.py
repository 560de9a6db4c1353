#!/usr/bin/env python3
"""Join bench (ferrotile) and peers.py JSON lines; print a markdown table of
GB/s, % of copy bandwidth and ferrotile / best-peer ratios."""
import json, sys

rows = []
for f in sys.argv[1:]:
    rows += [json.loads(l) for l in open(f) if l.strip()]
key = lambda r: (r["kernel"], r["dtype"], r["rows"], r["cols"])
by = {}
for r in rows:
    by.setdefault(key(r), {})[r["impl"]] = r
print("| kernel | dtype | shape | ferrotile GB/s | % copy | eager GB/s | compile GB/s | Liger GB/s | ferrotile / best peer |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for k in sorted(by):
    d = by[k]
    ft = d.get("ferrotile")
    peers = [d[p]["gbs"] for p in ("eager", "compile", "liger") if p in d]
    best = max(peers) if peers else None
    fmt = lambda p: f"{d[p]['gbs']:.0f}" if p in d else "—"
    ratio = f"{ft['gbs'] / best:.2f}×" if ft and best else "—"
    pct = f"{100 * ft['gbs'] / ft['copy_gbs']:.1f}%" if ft else "—"
    print(f"| {k[0]} | {k[1]} | {k[2]}×{k[3]} | {fmt('ferrotile')} | {pct} | {fmt('eager')} | {fmt('compile')} | {fmt('liger')} | {ratio} |")
