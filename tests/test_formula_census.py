"""The formula census: spans found, checked by evaluation, and a broken rendering caught."""

import os
from pathlib import Path

import pytest

import formula_census as fc
from latex_math import render_math

FIXTURE = Path(__file__).parent / "fixtures" / "formulas" / "uart.tex"
TRM_PATH = os.environ.get("TRM_PATH")


def _fixture_census(render: fc.Renderer = render_math) -> list[fc.Verdict]:
    text = FIXTURE.read_text()
    return fc.census_of_texts([("formulas/uart.tex", text)], lambda _rel: text, render)


def test_fixture_spans_are_found_rendered_and_equal() -> None:
    verdicts = _fixture_census()
    counts = fc.summary(verdicts)
    assert counts["spans found"] == 12
    assert counts[fc.MISMATCH] == 0
    assert counts[fc.KEPT] == 1  # the matrix
    assert counts[fc.EQUAL] >= 7
    uart = next(v for v in verdicts if "UART\\_CLKDIV\\_FRAG" in v.span.latex)
    assert uart.outcome == fc.EQUAL and uart.span.line == 2
    autobaud = next(v for v in verdicts if "LOWPULSE" in v.span.latex)
    assert autobaud.rendered == "B_uart = f_clk/((UART_LOWPULSE_MIN_CNT + UART_HIGHPULSE_MIN_CNT + 2)/2)"
    assert autobaud.outcome == fc.EQUAL and autobaud.span.display


def test_a_rendering_that_drops_brackets_is_caught() -> None:
    def flattened(node) -> str:  # what pylatexenc's own text mode did to fractions
        return render_math(node).replace("(", "").replace(")", "")

    verdicts = _fixture_census(flattened)
    mismatched = [v.span.latex for v in verdicts if v.outcome == fc.MISMATCH]
    assert any("UART\\_CLKDIV\\_FRAG" in latex for latex in mismatched)
    assert any("LOWPULSE" in latex for latex in mismatched)


@pytest.mark.parametrize(
    ("latex", "rendered", "outcome"),
    [
        (r"\frac{a}{b + c}", "a/(b + c)", fc.EQUAL),
        (r"\frac{a}{b + c}", "a/b + c", fc.MISMATCH),
        (r"\left\lfloor \frac{x}{2} \right\rfloor", "floor(x/2)", fc.EQUAL),
        (r"\left\lfloor \frac{x}{2} \right\rfloor", "x/2", fc.MISMATCH),
        (r"\sum_{i=0}^{n-1} 2^{i}", "sum over i=0..n-1 of (2^i)", fc.EQUAL),
        (r"f_{clk}", "f_clk", fc.NOT_EXPRESSION),
        (r"f_{clk}", "f_xtal", fc.MISMATCH),
        (r"a \bmod b", "a mod b", fc.NO_PARSE),
        (r"\log_2\left(\frac{a}{b}\right)", "log_2(a/b)", fc.EQUAL),
        (r"\log_2\left(\frac{a}{b}\right)", "log_2 * (a/b)", fc.MISMATCH),
        (r"\textrm{ch}\textcolor{red}{\it{n}} + 1", "chn + 1", fc.EQUAL),
    ],
)
def test_compare_evaluates_both_sides(latex: str, rendered: str, outcome: str) -> None:
    assert fc.compare(latex, rendered)[0] == outcome


def test_no_tree_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert fc.main(["--trm-path", str(FIXTURE.parent)]) == 2
    assert "not a TRM LaTeX tree" in capsys.readouterr().err


@pytest.mark.corpus
def test_real_corpus_has_no_mismatch() -> None:
    if not TRM_PATH:
        pytest.skip("TRM_PATH is not set: point it at the TRM LaTeX tree (e.g. ../shared/corpus/trm-latex)")
    verdicts = fc.take_census(TRM_PATH)
    counts = fc.summary(verdicts)
    assert counts["spans found"] > 3000
    assert counts[fc.MISMATCH] == 0, [
        (v.span.file, v.span.line, v.rendered) for v in verdicts if v.outcome == fc.MISMATCH
    ]
