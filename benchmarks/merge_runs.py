"""Merge bench runs over parts of one suite into one result (json, md, figure).

    python3 benchmarks/merge_runs.py OUT_PREFIX RUN1/results.json RUN2/results.json ...

For each problem the row of the last run that ran it is kept (a row ``not_run`` in one run
is taken from another), with ``run``: its run's place in the command line. Every row's ratios come from one run: eager, torch.compile and ours
are timed in the same problem process; the merged file names each run's command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stitchcuda_lab import bench, bench_figure


def merge(results: list[dict]) -> dict:
    rows: dict[str, dict] = {}
    order: list[str] = []
    for i, result in enumerate(results, 1):
        for row in result["rows"]:
            key = f"{row.get('suite', '')}/{row['problem']}"
            if key not in rows:
                order.append(key)
            if key not in rows or row.get("status") != "not_run":
                rows[key] = dict(row, run=i)   # which run (the commands' order) it came from
    first = results[0]
    merged = dict(first, rows=sorted((rows[k] for k in order), key=lambda r: (
        r.get("suite", ""), bench.discover_key(r["problem"]))),
        # every mode any run timed gets its column; a row a run timed without it shows "-"
        modes=",".join(dict.fromkeys(m for r in results for m in r["modes"].split(",") if m)),
        command=" ; ".join(r["command"] for r in results),
        complete=all(r.get("complete") for r in results),
        seconds=sum(r.get("seconds") or 0 for r in results), runs=len(results))
    merged["summary"] = bench.summarise(merged["rows"])
    return merged


def main(argv: list[str]) -> int:
    prefix, files = Path(argv[0]), argv[1:]
    merged = merge([json.loads(Path(f).read_text()) for f in files])
    prefix.with_suffix(".json").write_text(json.dumps(merged, indent=2, default=str))
    prefix.with_suffix(".md").write_text(bench.markdown(merged))
    bench_figure.write(merged, prefix)
    print(bench.markdown(merged).split("\n\n| suite |")[0][-400:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
