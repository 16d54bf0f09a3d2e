#!/usr/bin/env python3
"""Summarises a Kineto trace (Chrome trace JSON from bench_train_step --profile, or any trace that
LibTorch's profiler saved) as markdown: where a step's time goes, without opening Perfetto.

  trace_table.py TRACE.json [--step-name step] [--top 25]

Per step (the trace's `step` annotations; the whole trace when there are none):
  - wall time of each annotated phase (step::forward_and_loss, step::backward, ...), and the GPU
    kernel time inside it;
  - GPU busy time (the union of kernel, copy and set intervals) against the wall time: the rest
    is the device idling, waiting for the host;
  - the top kernels by total time (count per step, mean, share of GPU time), GEMMs split by their
    shapes where the trace has them;
  - launches, copies and synchronisations per step (the host calls that make the device wait or
    the host block), and the longest idle gaps between kernels with what ran either side.
On a CPU trace (no kernels) the tables list CPU operators by self time instead.
"""
import argparse
import collections
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def union_length(intervals):
    total, end = 0.0, None
    start = None
    for a, b in sorted(intervals):
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    if end is not None:
        total += end - start
    return total


def short(name, width=90):
    name = " ".join(name.split())
    return name if len(name) <= width else name[: width - 3] + "..."


def inside(e, windows):
    t = e["ts"]
    return any(a <= t < b for a, b in windows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--step-name", default="step")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    ev = load(a.trace)
    steps = [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == a.step_name]
    if steps:
        windows = [(e["ts"], e["ts"] + e["dur"]) for e in steps]
    else:
        t0 = min(e["ts"] for e in ev)
        t1 = max(e["ts"] + e["dur"] for e in ev)
        windows = [(t0, t1)]
    n = len(windows)
    wall = sum(b - a_ for a_, b in windows)
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    kernels = [e for e in ev if e.get("cat") == "kernel" and inside(e, windows)]
    device_ops = [e for e in ev if e.get("cat") in gpu_cats and inside(e, windows)]
    print(f"# {a.trace}\n")
    print(f"{n} step(s), {wall / n / 1000:.2f} ms of wall time per step\n")

    phases = collections.OrderedDict()
    for e in ev:
        if e.get("cat") == "user_annotation" and e["name"] != a.step_name and inside(e, windows):
            phases.setdefault(e["name"], []).append((e["ts"], e["ts"] + e["dur"]))
    if phases:
        print("## Phases (per step)\n")
        print("| phase | wall ms | GPU kernel ms inside |")
        print("|---|---:|---:|")
        for name, iv in phases.items():
            w = sum(b - a_ for a_, b in iv) / n / 1000
            k = sum(e["dur"] for e in kernels if any(a_ <= e["ts"] < b for a_, b in iv)) / n / 1000
            print(f"| {name} | {w:.2f} | {k:.2f} |")
        print()

    if kernels:
        busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in device_ops])
        ktime = sum(e["dur"] for e in kernels)
        print("## Device\n")
        print(f"- GPU busy {busy / n / 1000:.2f} ms of {wall / n / 1000:.2f} ms per step "
              f"({100 * busy / wall:.1f}%); idle {(wall - busy) / n / 1000:.2f} ms per step")
        print(f"- kernels: {len(kernels) / n:.0f} launches per step, {ktime / n / 1000:.2f} ms")
        for cat in ("gpu_memcpy", "gpu_memset"):
            ops = [e for e in device_ops if e.get("cat") == cat]
            if ops:
                kinds = collections.Counter(short(e["name"], 40) for e in ops)
                print(f"- {cat}: {len(ops) / n:.1f} per step, {sum(e['dur'] for e in ops) / n / 1000:.2f} ms"
                      f" ({', '.join(f'{k} x{v / n:.1f}' for k, v in kinds.most_common(4))})")
        rt = [e for e in ev if e.get("cat") == "cuda_runtime" and inside(e, windows)]
        syncs = [e for e in rt if "Synchronize" in e["name"] or e["name"] in ("cudaMemcpy", "cudaMemcpy2D")]
        if rt:
            counts = collections.Counter(e["name"] for e in syncs)
            print(f"- host waits: {len(syncs) / n:.1f} per step, {sum(e['dur'] for e in syncs) / n / 1000:.2f} ms"
                  + (f" ({', '.join(f'{k} x{v / n:.1f}' for k, v in counts.most_common())})" if counts else ""))
        print()
        groups = collections.defaultdict(lambda: [0, 0.0])
        for e in kernels:
            g = groups[short(e["name"])]
            g[0] += 1
            g[1] += e["dur"]
        print(f"## Top {a.top} kernels\n")
        print("| kernel | per step | mean us | ms per step | share of kernel time |")
        print("|---|---:|---:|---:|---:|")
        for name, (cnt, dur) in sorted(groups.items(), key=lambda kv: -kv[1][1])[: a.top]:
            print(f"| `{name}` | {cnt / n:.1f} | {dur / cnt:.1f} | {dur / n / 1000:.3f} | {100 * dur / ktime:.1f}% |")
        print()
        # Idle gaps between consecutive device operations on the whole device.
        ops = sorted(device_ops, key=lambda e: e["ts"])
        gaps = []
        for p, q in zip(ops, ops[1:]):
            gap = q["ts"] - (p["ts"] + p["dur"])
            if gap > 0:
                gaps.append((gap, p, q))
        gaps.sort(key=lambda g: -g[0])
        print(f"## Longest idle gaps ({sum(g[0] for g in gaps) / n / 1000:.2f} ms per step in all)\n")
        print("| gap us | after | before |")
        print("|---:|---|---|")
        for gap, p, q in gaps[:10]:
            print(f"| {gap:.0f} | `{short(p['name'], 50)}` | `{short(q['name'], 50)}` |")
        print()
    else:
        # CPU: operators by self time (their duration less that of the operators inside them).
        ops = sorted([e for e in ev if e.get("cat") == "cpu_op" and inside(e, windows)],
                     key=lambda e: (e.get("tid"), e["ts"], -e["dur"]))
        self_time = collections.defaultdict(lambda: [0, 0.0])
        stack = []
        for e in ops:
            end = e["ts"] + e["dur"]
            while stack and (stack[-1][0].get("tid") != e.get("tid") or stack[-1][1] <= e["ts"]):
                stack.pop()
            if stack:
                self_time[stack[-1][0]["name"]][1] -= e["dur"]
            s = self_time[e["name"]]
            s[0] += 1
            s[1] += e["dur"]
            stack.append((e, end))
        total = sum(v[1] for v in self_time.values())
        print(f"## Top {a.top} CPU operators by self time\n")
        print("| operator | calls per step | self ms per step | share |")
        print("|---|---:|---:|---:|")
        for name, (cnt, dur) in sorted(self_time.items(), key=lambda kv: -kv[1][1])[: a.top]:
            print(f"| `{short(name)}` | {cnt / n:.1f} | {dur / n / 1000:.2f} | {100 * dur / max(total, 1):.1f}% |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
