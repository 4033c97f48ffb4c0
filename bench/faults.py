"""The fault-injection suite by hand: ``python -m bench.faults --seeds 1-50``.

Each seed runs a pipeline of a few hundred 20-200 ms tasks on three worker processes (two slots each)
against a real luigid, under seeded faults (see ``test/faults/runner.py``), then prints one line per
seed and a table: faults injected by kind, reruns a fault explains by kind, reruns nothing explains
(must be 0), tasks lost (must be 0). Exits 1 if any seed showed a defect. With a PostgreSQL test server
(``--standby``, by default when one answers), two luigids share each seed's state, active and standby,
and ``kill -9`` of the active one (a standby must take over within 15 s) is one more fault kind.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

from faults import injectors  # noqa: E402
from faults.runner import Result, run_faults  # noqa: E402
from helpers.postgres import fresh_schema, postgres_url  # noqa: E402


def parse_seeds(text: str) -> list[int]:
    """``1-50``, ``3``, ``1,4,9-12``: the seeds to run."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        try:
            seeds += range(int(low), int(high or low) + 1)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad seed range {part!r}: use e.g. 1-50 or 1,4,9-12") from None
    return seeds


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-50"))
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--workers", type=int, default=3, help="worker processes (two slots each)")
    parser.add_argument("--faults", type=int, default=8, help="faults per seed")
    parser.add_argument(
        "--disk", choices=("auto", "yes", "no"), default="auto", help="include the full tmpfs (root only)"
    )
    parser.add_argument(
        "--standby",
        choices=("auto", "yes", "no"),
        default="auto",
        help="two luigids on a PostgreSQL state, and the takeover fault (needs the test server)",
    )
    return parser.parse_args(argv)


def _print_seed(result: Result) -> None:
    kinds = collections.Counter(fault.kind for fault in result.faults)
    line = ", ".join(f"{kind} x{count}" for kind, count in sorted(kinds.items()))
    print(
        f"seed {result.seed:3d}: {result.seconds:5.1f}s, {result.verdict.runs} runs, "
        f"{result.verdict.reruns} reruns, faults: {line or 'none'}"
        + (f"; skipped: {', '.join(result.skipped)}" if result.skipped else "")
        + f"; luigid RSS {result.rss_baseline >> 20}->{result.rss_final >> 20} MiB",
        flush=True,
    )
    causes = dict(result.verdict.explained)
    stale = dict(result.verdict.stale)
    if causes or stale:
        held = f"; by a grant held across a cut-off: {stale}" if stale else ""
        print(f"    reruns by cause: {causes}{held}")
    if result.takeovers:
        print(f"    standby took over after {', '.join(f'{t:.1f}' for t in result.takeovers)} s", flush=True)
    for fault in result.faults:
        if "failed starts" in fault.note:
            print(f"    luigid {fault.note}", flush=True)
    for defect in result.defects():
        print(f"    DEFECT {defect}", flush=True)


def _table(results: list[Result]) -> str:
    injected = collections.Counter(fault.kind for result in results for fault in result.faults)
    explained: collections.Counter[str] = collections.Counter()
    stale: collections.Counter[str] = collections.Counter()
    for result in results:
        explained.update(result.verdict.explained)
        stale.update(result.verdict.stale)
    rows = [
        "| fault | injected | reruns: its victim's run | reruns: a grant held across it |",
        "|---|---:|---:|---:|",
    ]
    rows += [
        f"| {kind} | {injected[kind]} | {explained[kind]} | {stale[kind]} |"
        for kind in injectors.ALL_KINDS
        if injected[kind]
    ]
    unexplained = sum(len(result.verdict.unexplained) for result in results)
    lost = sum(len(result.verdict.lost) for result in results)
    rows.append(
        f"| **total** | {sum(injected.values())} | {sum(explained.values())} | {sum(stale.values())} |"
    )
    summary = [
        f"seeds: {len(results)}; task runs: {sum(result.verdict.runs for result in results)}",
        f"reruns without cause: {unexplained}; tasks lost: {lost}; "
        f"seeds with a defect and a full-disk fault: {sum(_had_disk(r) for r in results if r.defects())}",
        f"orphaned processes: {sum(len(result.orphans) for result in results)}; "
        f"seeds over the memory bound: {sum(not result.memory_ok() for result in results)}",
    ]
    return "\n".join(rows + [""] + summary)


def _had_disk(result: Result) -> bool:
    return any(fault.kind == injectors.DISK_FULL for fault in result.faults)


def _run_seed(
    workdir: Path, seed: int, args: argparse.Namespace, kinds: tuple[str, ...], disk: bool, pg_url: str | None
) -> Result:
    """One seed; with ``pg_url``, on a fresh schema of it shared by two luigids."""
    if pg_url is None:
        return run_faults(workdir, seed, args.tasks, args.workers, kinds, args.faults, disk=disk)
    with fresh_schema(pg_url) as state_url:
        return run_faults(
            workdir, seed, args.tasks, args.workers, kinds, args.faults, disk, state_url=state_url
        )


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    why_not = injectors.can_mount_tmpfs() if args.disk != "no" else "not asked for"
    if args.disk == "yes" and why_not:
        print(
            f"--disk yes: {why_not}; run as root where mount is allowed, or pass --disk no", file=sys.stderr
        )
        return 2
    kinds = injectors.BUILT_KINDS + ((injectors.DISK_FULL,) if not why_not else ())
    if why_not and args.disk == "auto":
        print(f"(no full-disk faults: {why_not})", flush=True)
    pg_url = postgres_url() if args.standby != "no" else None
    if args.standby == "yes" and pg_url is None:
        print("--standby yes: no PostgreSQL answers (scripts/start-postgres.sh)", file=sys.stderr)
        return 2
    if pg_url is not None:
        kinds += (injectors.TAKEOVER,)
    elif args.standby == "auto":
        print("(no standby takeovers: no PostgreSQL test server answers)", flush=True)
    results = []
    crashed = []
    for seed in args.seeds:
        workdir = Path(tempfile.mkdtemp(prefix=f"faults-{seed}-"))
        try:
            result = _run_seed(workdir, seed, args, kinds, disk=not why_not, pg_url=pg_url)
        except Exception as exc:  # a run that could not finish is reported, and the next seed goes on
            print(f"seed {seed:3d}: the run broke off: {exc}; kept {workdir}", flush=True)
            crashed.append(seed)
            continue
        _print_seed(result)
        results.append(result)
        if result.defects():
            print(f"    kept {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(_table(results))
    if crashed:
        print(f"runs that broke off: seeds {crashed}")
    return 1 if crashed or any(result.defects() for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
