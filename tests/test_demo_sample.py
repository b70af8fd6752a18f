"""The demo sample is what the TRM ingest gives now, so the demo shows what the full store would."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

import demo_sample
from schema import write_jsonl
from sources import load_pins

TRM_PATH = os.environ.get("TRM_PATH")
needs_corpus = pytest.mark.skipif(
    not TRM_PATH, reason="TRM_PATH is not set: point it at the TRM LaTeX tree (shared/corpus/trm-latex)"
)
SAMPLE_ROWS = [json.loads(line) for line in demo_sample.SAMPLE.read_text(encoding="utf-8").splitlines()]


def test_the_sample_holds_every_demo_chapter_and_nothing_else() -> None:
    assert {row["file_path"] for row in SAMPLE_ROWS} == set(demo_sample.DEMO_CHAPTERS)
    assert {tuple(row["chips"]) for row in SAMPLE_ROWS} == {(demo_sample.DEMO_CHIP,)}


def test_the_sample_renders_the_baud_rate_formulas_with_their_brackets() -> None:
    text = "\n".join(row["text"] for row in SAMPLE_ROWS)
    assert "INPUT_FREQ/(UART_CLKDIV + (UART_CLKDIV_FRAG)/16)" in text
    assert "f_clk/((UART_LOWPULSE_MIN_CNT + UART_HIGHPULSE_MIN_CNT + 2)/2)" in text
    assert "INPUT_FREQ/UART_CLKDIV + UART_CLKDIV_FRAG/16" not in text


@needs_corpus
def test_the_committed_sample_is_what_the_ingest_writes_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo_sample.main(["--trm-path", str(TRM_PATH), "--check"]) == 0, capsys.readouterr().err
    stale = tmp_path / "sample.jsonl"
    rows = [dict(row) for row in SAMPLE_ROWS]
    rows[0]["text"] = rows[0]["text"].replace(" ", "  ", 1)
    write_jsonl(stale, rows)
    monkeypatch.setattr(demo_sample, "SAMPLE", stale)
    assert demo_sample.main(["--trm-path", str(TRM_PATH), "--check"]) == 1
    assert "differs from the ingest" in capsys.readouterr().err


@needs_corpus
def test_a_tree_at_another_commit_than_the_pin_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rows cite the tree's commit and samples/SOURCE.md the pinned one: they must agree."""
    other = dataclasses.replace(load_pins(), trm_commit="0" * 40)
    monkeypatch.setattr(demo_sample, "load_pins", lambda: other)
    before = demo_sample.SAMPLE.read_bytes()
    assert demo_sample.main(["--trm-path", str(TRM_PATH)]) == 2
    assert "but sources.yaml pins 0000000000000000000000000000000000000000" in capsys.readouterr().err
    assert demo_sample.SAMPLE.read_bytes() == before


def test_no_tree_is_refused_naming_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRM_PATH", raising=False)
    assert demo_sample.main(["--check"]) == 2
    assert "set TRM_PATH" in capsys.readouterr().err
