"""The demo's sample: five ESP32-C3 manual chapters exactly as the TRM ingest renders them now.

    uv run demo_sample.py [--trm-path TRM] [--check]

The demo is the first answer a new user sees, so it must show what the full store would: a sample
written by an older ingest kept old renderings (a formula without its brackets) long after the ingest
was fixed. This rewrites `samples/esp32c3_trm_sample.jsonl` from the TRM tree; `--check` only says
whether the committed sample still matches, which the corpus tests run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ingest_trm import discover_manuals, ingest
from schema import write_jsonl
from sources import load_pins

SAMPLE = Path(__file__).resolve().parent / "samples" / "esp32c3_trm_sample.jsonl"
DEMO_CHIP = "esp32c3"
# The peripherals a first question is most likely about, with registers, formulas and tables each.
DEMO_CHAPTERS = (
    "ESP32-C3/10-UART__EN",
    "ESP32-C3/15-LEDPWM__EN",
    "ESP32-C3/16-IOMUXGPIO__EN",
    "ESP32-C3/24-AES__EN",
    "ESP32-C3/28-SYSTIMER__EN",
)


def sample_rows(trm_root: Path) -> list[dict[str, Any]]:
    """The demo chapters' rows from an ingest of the demo chip's manual, from the pinned TRM commit
    only: the rows cite their commit, and samples/SOURCE.md names the pinned one."""
    report = ingest(trm_root, discover_manuals(trm_root, [DEMO_CHIP]), progress=False)
    if report.failures:
        raise ValueError(f"the TRM ingest of {DEMO_CHIP} failed: {'; '.join(report.failures)}")
    rows = [row for row in report.rows if row["file_path"] in DEMO_CHAPTERS]
    missing = set(DEMO_CHAPTERS) - {row["file_path"] for row in rows}
    if missing:
        raise ValueError(f"{trm_root} has no chapter {', '.join(sorted(missing))}")
    pinned = load_pins().trm_commit
    if rows[0]["source_commit"] != pinned:
        raise ValueError(
            f"{trm_root} is at {rows[0]['source_commit']}, but sources.yaml pins {pinned}: "
            "check out the pinned commit (or bump the pin and samples/SOURCE.md together)"
        )
    return rows


def as_stored(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as a JSONL file gives them back (tuples become lists), so the two compare equal."""
    return json.loads(json.dumps(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trm-path", type=Path, help="TRM LaTeX tree (default: $TRM_PATH)")
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed sample, write nothing"
    )
    args = parser.parse_args(argv)
    trm_root = args.trm_path or (Path(os.environ["TRM_PATH"]) if os.environ.get("TRM_PATH") else None)
    if trm_root is None:
        print("error: no TRM tree: pass --trm-path or set TRM_PATH", file=sys.stderr)
        return 2
    try:
        rows = sample_rows(trm_root)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        committed = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line]
        if committed == as_stored(rows):
            print(f"demo sample: {SAMPLE.name} matches the ingest ({len(rows)} chunks)")
            return 0
        print(
            f"demo sample: {SAMPLE.name} differs from the ingest: run uv run demo_sample.py", file=sys.stderr
        )
        return 1
    write_jsonl(SAMPLE, rows)
    print(f"demo sample: {len(rows)} chunks of {len(DEMO_CHAPTERS)} chapters -> {SAMPLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
