"""Header ingest speed against a baseline checkout of this project, side by side on one ESP-IDF tree.

The ingest of one release's SoC headers is CPU-bound pure Python (~2,000 headers); on a shared
machine its wall time says more about the other jobs than about the code. So both sides run in turn
on the same tree, each timed in CPU seconds of its own process as well as wall seconds, and the
figure is their ratio. Their JSONL must be byte-identical: a speed-up that changes the rows is a bug.

    uv run ingest_bench.py --baseline DIR --idf-path TREE [--rounds 1] [--work-dir DIR]

DIR is another checkout of this project (``git worktree add /tmp/base main``); it runs with this
project's interpreter.
"""

from __future__ import annotations

import argparse
import filecmp
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parent


def timed_ingest(code_dir: Path, idf_path: Path, out_path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``ingest_source.py`` run from ``code_dir``; a failure stops all."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "ingest_source.py", "--idf-path", str(idf_path), "--out-path", str(out_path)],
        cwd=code_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: ingest_source.py in {code_dir} exit {result.returncode}: {tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of this project to compare")
    parser.add_argument("--idf-path", type=Path, required=True, help="the ESP-IDF tree both sides ingest")
    parser.add_argument("--rounds", type=int, default=1, help="runs per side, alternating (default 1)")
    parser.add_argument("--work-dir", type=Path, help="where the two JSONL files go (default: a temp dir)")
    args = parser.parse_args(argv)
    if not (args.baseline / "ingest_source.py").is_file():
        parser.error(f"--baseline {args.baseline} has no ingest_source.py (a checkout of this project)")
    if not (args.idf_path / "components" / "soc").is_dir():
        parser.error(f"--idf-path {args.idf_path} is not an ESP-IDF tree: components/soc is missing")
    if args.rounds < 1:
        parser.error("--rounds wants 1 or more")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sides = {"baseline": args.baseline.resolve(), "this": REPO}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    wall: dict[str, list[float]] = {side: [] for side in sides}
    for _ in tqdm(range(args.rounds), desc="rounds", unit="round"):
        for side, code_dir in sides.items():
            seconds, cpu_seconds = timed_ingest(code_dir, args.idf_path.resolve(), work / f"{side}.jsonl")
            wall[side].append(seconds)
            cpu[side].append(cpu_seconds)
    for side in sides:
        print(f"{side:8s} CPU {min(cpu[side]):7.1f} s  wall {min(wall[side]):7.1f} s  ({sides[side]})")
    identical = filecmp.cmp(work / "baseline.jsonl", work / "this.jsonl", shallow=False)
    ratio = min(cpu["baseline"]) / min(cpu["this"])
    print(
        f"header ingest of {args.idf_path.name}: {ratio:.2f}x less CPU than the baseline "
        f"(best of {args.rounds}); JSONL {'byte-identical' if identical else 'DIFFERS'} ({work})"
    )
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
