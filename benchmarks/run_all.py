"""Run every benchmark in this folder and write ``benchmarks/RESULTS.md``.

Each ``bench_*.py`` script is run in its own process; its full output goes into the report, and
every line it prints of the form ``SUMMARY {"figure": ..., "value": ..., "target": ...}``
becomes a row of the summary table. Figures are ratios or slopes measured within one run;
absolute seconds are labelled with the machine they were measured on.

Run: ``python benchmarks/run_all.py [--only NAME ...] [--quick]``

With ``--only``, the benchmarks named are re-run and every other benchmark's rows and output are
kept from the report already there (each benchmark's section says when and where it was
measured), so re-running one benchmark does not erase the others.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
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
    "bench_cam_estep": ["--rows", "60", "--depth", "2", "--repeats", "3"],
    "bench_partitions": ["--quick"],
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


_ROW = re.compile(r"^\| (bench_\w+) \|")
_SECTION = re.compile(r"^### (bench_\w+)\n", flags=re.MULTILINE)
_MEASURED = re.compile(r"^Measured (.+)\.$", flags=re.MULTILINE)


def report_parts(text: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The table rows and the output section of each benchmark in one report (or accelerator section).

    A section that does not say when it was measured (written before sections did) gets the
    report's own "Measured ..." line, so that it keeps its date when merged into a newer report.
    """
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if match := _ROW.match(line):
            rows.setdefault(match.group(1), []).append(line)
    header = _MEASURED.search(text)
    pieces = _SECTION.split(text)
    sections = {}
    for name, body in zip(pieces[1::2], pieces[2::2]):
        body = body.split(ACCELERATOR_BEGIN)[0].split(ACCELERATOR_END)[0].strip("\n")
        if not body.startswith("Measured ") and header:
            body = f"Measured {header.group(1)}.\n\n{body}"
        sections[name] = body
    return rows, sections


def merge_reports(previous: str, rows: dict[str, list[str]], sections: dict[str, str]
                  ) -> tuple[list[str], dict[str, list[str]], dict[str, str]]:
    """Add the rows and sections of the benchmarks in ``previous`` that this run did not re-run.

    Returns the names kept from ``previous`` and the merged rows and sections, in benchmark order.
    """
    old_rows, old_sections = report_parts(previous)
    kept = sorted(name for name in set(old_rows) | set(old_sections) if name not in sections)
    merged_rows = {name: rows.get(name) or old_rows.get(name, []) for name in sorted(set(rows) | set(kept))}
    merged_sections = {name: sections.get(name) or old_sections.get(name, "")
                       for name in sorted(set(sections) | set(kept))}
    return kept, merged_rows, merged_sections


def render(header: str, rows: dict[str, list[str]], sections: dict[str, str], full_output_heading: str) -> str:
    table = ["| benchmark | figure | value | target |", "|---|---|---|---|"]
    for lines in rows.values():
        table.extend(lines)
    return (header + "\n\n" + "\n".join(table) + "\n\n" + full_output_heading + "\n\n"
            + "\n".join(f"### {name}\n\n{body}\n" for name, body in sections.items() if body))


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
    when = (f"{datetime.date.today().isoformat()} on {machine()}"
            f"{' (quick sizes)' if args.quick else ''}")
    rows: dict[str, list[str]] = {}
    sections: dict[str, str] = {}
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
                rows.setdefault(script.stem, []).append(
                    f"| {script.stem} | {entry['figure']} | {entry['value']} | {entry.get('target', '')} |")
        shown = " ".join(["python"] + command[1:]).replace(str(HERE.parent) + "/", "")
        sections[script.stem] = f"Measured {when}.\n\n`{shown}` ({elapsed:.0f} s)\n\n```\n{output.strip()}\n```"
    header = f"Measured {when}."
    path = Path(args.out)
    previous = path.read_text() if path.exists() else ""
    if on_accelerator:
        previous_part = (previous[previous.index(ACCELERATOR_BEGIN):previous.index(ACCELERATOR_END)]
                         if ACCELERATOR_BEGIN in previous else "")
    else:
        previous_part = _without_accelerator_section(previous)
    if args.only and previous_part:
        kept, rows, sections = merge_reports(previous_part, rows, sections)
        if kept:
            header = (f"Measured {when}: {', '.join(name for name in sections if name not in kept)}; the rows of "
                      f"{', '.join(kept)} are kept from earlier runs (each benchmark's section says when).")
    if on_accelerator:
        section = (f"{ACCELERATOR_BEGIN}\n## On an accelerator: {jax.devices()[0].device_kind}\n\n"
                   + render(header, rows, sections, "### Full output") + f"\n{ACCELERATOR_END}\n")
        report = _without_accelerator_section(previous).rstrip("\n") + "\n\n" + section
    else:
        report = "# Benchmark results\n\n" + render(header, rows, sections, "## Full output")
        if ACCELERATOR_BEGIN in previous:
            start, stop = previous.index(ACCELERATOR_BEGIN), previous.index(ACCELERATOR_END) + len(ACCELERATOR_END)
            accelerator = previous[start:stop]
            report = report.rstrip("\n") + "\n\n" + accelerator + "\n"
    path.write_text(report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
