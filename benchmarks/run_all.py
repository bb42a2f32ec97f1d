"""Run every benchmark in this folder and write ``benchmarks/RESULTS.md``.

Each ``bench_*.py`` script is run in its own process; its full output goes into the report, and
every line it prints of the form ``SUMMARY {"figure": ..., "value": ..., "target": ...}``
becomes a row of the summary table. Figures are ratios or slopes measured within one run;
absolute seconds are labelled with the machine they were measured on.

Run: ``python benchmarks/run_all.py [--only NAME ...] [--quick]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Arguments of the full (published) run beyond each script's defaults.
FULL_ARGUMENTS = {
    "bench_scdp": ["--full"],  # run SCDP-1 10 chains x 10,000 sweeps instead of extrapolating
    "bench_dp_mixing": ["--full"],  # digits 300 s per sampler, 100,000 simulated points 120 s per sampler
}
# Arguments that keep each benchmark short with --quick (a smoke run, not the published figures).
QUICK_ARGUMENTS = {
    "bench_aspect_em": ["--synthetic", "--classes", "16"],
    "bench_scaling": ["--max-nnz", "3e5", "--classes", "16"],
    "bench_dp_mixing": ["--quick"],
}


def machine() -> str:
    import jax

    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"JAX {jax.__version__} ({jax.default_backend()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="benchmark names (without .py)")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = parser.parse_args()

    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        scripts = [script for script in scripts if script.stem in args.only]
    rows, sections = [], []
    for script in scripts:
        extra = QUICK_ARGUMENTS.get(script.stem, []) if args.quick else FULL_ARGUMENTS.get(script.stem, [])
        command = [sys.executable, str(script)] + extra
        print(f"running {script.name} ...", flush=True)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent)
        elapsed = time.perf_counter() - start
        output = done.stdout + (f"\n[exit code {done.returncode}]\n{done.stderr[-2000:]}" if done.returncode else "")
        for line in done.stdout.splitlines():
            if line.startswith("SUMMARY "):
                entry = json.loads(line[len("SUMMARY "):])
                rows.append((script.stem, entry))
        sections.append(f"### {script.stem}\n\n`{' '.join(['python'] + command[1:]).replace(str(HERE.parent) + '/', '')}`"
                        f" ({elapsed:.0f} s)\n\n```\n{output.strip()}\n```\n")
    table = ["| benchmark | figure | value | target |", "|---|---|---|---|"]
    for name, entry in rows:
        table.append(f"| {name} | {entry['figure']} | {entry['value']} | {entry.get('target', '')} |")
    report = (
        f"# Benchmark results\n\nMeasured {datetime.date.today().isoformat()} on {machine()}"
        f"{' (quick sizes)' if args.quick else ''}.\n\n" + "\n".join(table) + "\n\n## Full output\n\n" + "\n".join(sections)
    )
    Path(args.out).write_text(report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
