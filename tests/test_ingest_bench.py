"""ingest_bench.py on the small fixture tree, with this checkout as its own baseline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE_IDF = REPO / "tests" / "fixtures" / "src" / "idf-v6-revisions"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "ingest_bench.py"), *args], capture_output=True, text=True, check=False
    )


def test_the_same_code_on_both_sides_gives_identical_rows(tmp_path: Path) -> None:
    result = run("--baseline", str(REPO), "--idf-path", str(FIXTURE_IDF), "--work-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("header ingest of idf-v6-revisions: ") and "JSONL byte-identical" in last
    assert (tmp_path / "baseline.jsonl").read_bytes() == (tmp_path / "this.jsonl").read_bytes()


def test_a_baseline_that_is_no_checkout_is_named(tmp_path: Path) -> None:
    result = run("--baseline", str(tmp_path), "--idf-path", str(FIXTURE_IDF))
    assert result.returncode == 2
    assert f"--baseline {tmp_path} has no ingest_source.py" in result.stderr
