"""Where a torch profiler trace's time goes: the GPU's busy share, its kernels, the host's waits.

    python -m vicurl.runtime.trace_summary TRACE.json[.gz] [...] [--top 15]

For a chrome trace as torch.profiler writes it (verl's torch profiler: `global_profiler.tool=torch`, a
file per stage, rank 0's unless told): its span (first event to last), the time the GPU ran something (the union of its
kernels, copies and fills, so that overlapping streams count once) and the rest, idle; the kernels by total
time; the host's synchronising calls (the CUDA runtime's synchronize and blocking copies), whose count tells
how often the host waits on the GPU; the named regions (verl's stage marks, `record_function`) by total time.
On a CPU trace only the regions and the CPU ops are there.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# the host waits for the GPU: the runtime's synchronising calls (a GPU scalar read by .item() or a tensor's truth
# value is a copy, then cudaStreamSynchronize; the same read of a CPU tensor waits for nothing)
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def load(path: str | Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def union_length(intervals) -> float:
    """The length covered by ``(start, end)`` intervals, each point once."""
    total, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def by_name(events, top: int) -> list[tuple[str, int, float]]:
    """``(name, count, total µs)`` of the ``top`` names by total duration."""
    count, total = defaultdict(int), defaultdict(float)
    for e in events:
        count[e["name"]] += 1
        total[e["name"]] += e["dur"]
    return sorted(((n, count[n], total[n]) for n in total), key=lambda r: -r[2])[:top]


def summarize(events: list[dict], top: int = 15) -> dict:
    """The figures in microseconds, as the trace counts them."""
    if not events:
        raise ValueError("the trace holds no complete events")
    start = min(e["ts"] for e in events)
    span = max(e["ts"] + e["dur"] for e in events) - start
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    syncs = [e for e in events if e.get("cat") == "cuda_runtime" and e["name"] in SYNC_CALLS]
    busy = union_length((e["ts"], e["ts"] + e["dur"]) for e in gpu)
    return {
        "span_us": span,
        "gpu_busy_us": busy,
        "gpu_busy_share": busy / span if span else 0.0,
        "kernels": by_name([e for e in gpu if e["cat"] == "kernel"], top),
        "copies": by_name([e for e in gpu if e["cat"] != "kernel"], top),
        "host_syncs": by_name(syncs, top),
        "regions": by_name([e for e in events if e.get("cat") == "user_annotation"], top),
        "cpu_ops": by_name([e for e in events if e.get("cat") == "cpu_op"], top) if not gpu else [],
    }


def report(path, s: dict) -> str:
    ms = 1e-3
    gpu = (f"GPU busy {s['gpu_busy_us'] * ms:.1f} ms ({100 * s['gpu_busy_share']:.1f} %), "
           f"idle {(s['span_us'] - s['gpu_busy_us']) * ms:.1f} ms" if s["kernels"] or s["copies"] else "no GPU work")
    lines = [f"{path}: span {s['span_us'] * ms:.1f} ms, {gpu}"]
    for title in ("regions", "kernels", "copies", "host_syncs", "cpu_ops"):
        if s[title]:
            lines.append(f"  {title} (count, total ms):")
            lines += [f"    {n:7d} {t * ms:10.1f}  {name[:110]}" for name, n, t in s[title]]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args(argv)
    for path in a.traces:
        print(report(path, summarize(load(path), a.top)), flush=True)


if __name__ == "__main__":
    main()
