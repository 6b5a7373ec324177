"""Median duration of each span in a Horovod timeline, per tensor row.

    python benchmarks/timeline_spans.py timeline.json [tensor ...]

The timeline (HOROVOD_TIMELINE) has one row per tensor; each op leaves spans such as
NEGOTIATE_ALLREDUCE, ALLREDUCE and, inside it, MEMCPY_IN_FUSION_BUFFER, RING_ALLREDUCE,
MEMCPY_OUT_FUSION_BUFFER. For the rows named (default: all), prints how many times each span
occurred and its median length in microseconds: where the time of an op goes.
"""

import collections
import json
import statistics
import sys


def spans(events, pid):
    open_spans, out = [], collections.defaultdict(list)
    for e in events:
        if e.get("pid") != pid or e.get("ph") not in ("B", "E"):
            continue
        if e["ph"] == "B":
            open_spans.append(e)
        elif open_spans:
            b = open_spans.pop()
            out[b["name"]].append(e["ts"] - b["ts"])
    return out


def main():
    data = json.load(open(sys.argv[1]))
    events = data["traceEvents"] if isinstance(data, dict) else data
    rows = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    wanted = sys.argv[2:] or sorted(rows.values())
    for name in wanted:
        for pid in [p for p, n in rows.items() if n == name]:
            parts = ", ".join(
                f"{span} x{len(d)} {statistics.median(d):.0f} us"
                for span, d in spans(events, pid).items()
            )
            print(f"{name}: {parts}")


if __name__ == "__main__":
    main()
