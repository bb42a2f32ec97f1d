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
# Arguments of the full run on an accelerator (GPU or TPU), where they differ from the CPU's.
ACCELERATOR_ARGUMENTS = {
    "bench_estep_order": ["--nnz", "1e6", "1e7", "1e8"],
}
# Arguments that keep each benchmark short with --quick (a smoke run, not the published figures).
QUICK_ARGUMENTS = {
    "bench_aspect_em": ["--synthetic", "--classes", "16"],
    "bench_scaling": ["--max-nnz", "3e5", "--classes", "16"],
    "bench_dp_mixing": ["--quick"],
    "bench_estep_order": ["--nnz", "1e4", "3e4"],
}
# An accelerator's run is kept as its own section of RESULTS.md, between these lines, so that a CPU
# run and a GPU run of the same tree each keep the other's figures.
ACCELERATOR_BEGIN = "<!-- accelerator results: written by run_all.py on a GPU or TPU -->"
ACCELERATOR_END = "<!-- end of accelerator results -->"


def machine() -> str:
    import jax

    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"JAX {jax.__version__} ({jax.default_backend()})")


def _without_accelerator_section(text: str) -> str:
    if ACCELERATOR_BEGIN not in text:
        return text
    start, stop = text.index(ACCELERATOR_BEGIN), text.index(ACCELERATOR_END) + len(ACCELERATOR_END)
    return text[:start] + text[stop:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="benchmark names (without .py)")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = parser.parse_args()

    import jax

    on_accelerator = jax.default_backend() != "cpu"
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        scripts = [script for script in scripts if script.stem in args.only]
    rows, sections = [], []
    for script in scripts:
        if args.quick:
            extra = QUICK_ARGUMENTS.get(script.stem, [])
        elif on_accelerator and script.stem in ACCELERATOR_ARGUMENTS:
            extra = ACCELERATOR_ARGUMENTS[script.stem]
        else:
            extra = FULL_ARGUMENTS.get(script.stem, [])
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
    measured = (f"Measured {datetime.date.today().isoformat()} on {machine()}"
                f"{' (quick sizes)' if args.quick else ''}.\n\n" + "\n".join(table) + "\n\n")
    path = Path(args.out)
    previous = path.read_text() if path.exists() else ""
    if on_accelerator:
        section = (f"{ACCELERATOR_BEGIN}\n## On an accelerator: {jax.devices()[0].device_kind}\n\n{measured}"
                   "### Full output\n\n" + "\n".join(sections) + f"\n{ACCELERATOR_END}\n")
        report = _without_accelerator_section(previous).rstrip("\n") + "\n\n" + section
    else:
        report = "# Benchmark results\n\n" + measured + "## Full output\n\n" + "\n".join(sections)
        if ACCELERATOR_BEGIN in previous:
            kept = previous[previous.index(ACCELERATOR_BEGIN):previous.index(ACCELERATOR_END) + len(ACCELERATOR_END)]
            report = report.rstrip("\n") + "\n\n" + kept + "\n"
    path.write_text(report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
