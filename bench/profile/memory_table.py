#!/usr/bin/env python3
"""What held the GPU's memory at its peak, from a CUDA caching-allocator snapshot with history
(bench_train_step --profile writes one; so does torch.cuda.memory._dump_snapshot).

  memory_table.py SNAPSHOT.pickle [--device 0] [--top 20] [--frame-filter studio]

The snapshot holds the allocator's segments when it was taken and, since recording started,
every allocation and free with its C++ stack. Replaying that history from the memory allocated
when it started gives the allocated-bytes curve; at its maximum the table lists the live blocks
grouped by the first stack frame that matches --frame-filter (the engine's own function that
asked for the memory), with the memory allocated before recording started as one row. It also
reports reserved against allocated (fragmentation) at the end.
Plain pickle, no torch needed (the snapshot holds only builtins).
"""
import argparse
import collections
import pickle
import sys


def frame_key(frames, flt):
    for f in frames or []:
        name = f.get("name", "")
        if flt in name:
            where = f.get("filename", "").rsplit("/", 1)[-1]
            return f"{' '.join(name.split())[:100]} ({where}:{f.get('line', '?')})"
    for f in frames or []:
        name = f.get("name", "")
        if name and not name.startswith(("c10::", "at::", "torch::", "std::", "??", "_start")):
            return " ".join(name.split())[:100]
    return "(no stack)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshot")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--frame-filter", default="studio")
    a = ap.parse_args()
    with open(a.snapshot, "rb") as f:
        snap = pickle.load(f)
    segs = [s for s in snap.get("segments", []) if s.get("device", 0) == a.device]
    reserved = sum(s["total_size"] for s in segs)
    live_end = {}
    for s in segs:
        for b in s.get("blocks", []):
            if b.get("state") == "active_allocated":
                live_end[b.get("address", id(b))] = b["size"]
    allocated_end = sum(live_end.values())
    traces = snap.get("device_traces", [])
    trace = traces[a.device] if a.device < len(traces) else []
    frees = {"free_completed"} if any(t["action"] == "free_completed" for t in trace) else {"free_requested"}
    # Replay: delta of allocated bytes against the start of recording.
    live = {}
    freed_before = 0  # bytes freed during recording that were allocated before it
    delta, peak_delta, peak_at, peak_live = 0, 0, -1, {}
    for i, t in enumerate(trace):
        act, addr, size = t["action"], t.get("addr"), t.get("size", 0)
        if act == "alloc":
            live[addr] = (size, t.get("frames"))
            delta += size
            if delta > peak_delta:
                peak_delta, peak_at = delta, i
                peak_live = dict(live)
        elif act in frees:
            if addr in live:
                delta -= live.pop(addr)[0]
            else:
                delta -= size
                freed_before += size
    start = allocated_end - delta
    peak = start + peak_delta
    mib = 2 ** 20
    print(f"# {a.snapshot}\n")
    print(f"- history: {len(trace)} events; allocated at its start {start / mib:.1f} MiB, "
          f"peak {peak / mib:.1f} MiB (event {peak_at}), at the end {allocated_end / mib:.1f} MiB")
    print(f"- reserved by the caching allocator at the end: {reserved / mib:.1f} MiB in {len(segs)} "
          f"segments ({(reserved - allocated_end) / mib:.1f} MiB cached but unused)")
    if not trace:
        print("- the snapshot has no history: nothing to replay")
        return 0
    groups = collections.defaultdict(lambda: [0, 0])
    for size, frames in peak_live.values():
        g = groups[frame_key(frames, a.frame_filter)]
        g[0] += 1
        g[1] += size
    print(f"\n## Live at the peak ({peak / mib:.1f} MiB)\n")
    print("| allocated by | blocks | MiB | share |")
    print("|---|---:|---:|---:|")
    print(f"| (before recording started: weights, states, caches) | - | {start / mib:.1f} | {100 * start / peak:.1f}% |")
    if freed_before:
        print(f"| (of which freed before the peak or after) | - | {freed_before / mib:.1f} | - |")
    for key, (cnt, size) in sorted(groups.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"| `{key}` | {cnt} | {size / mib:.1f} | {100 * size / peak:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
