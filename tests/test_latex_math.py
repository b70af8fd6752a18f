"""The math renderer: formulas keep their precedence, unrenderable ones stay marked LaTeX."""

import pytest

from latex_math import KEPT_PREFIX
from latex_parser import latex_to_text


@pytest.mark.parametrize(
    ("latex", "text"),
    [
        # the UART baud rate: the fractional part belongs to the denominator
        (
            r"$\frac{INPUT\_FREQ}{UART\_CLKDIV + \frac{UART\_CLKDIV\_FRAG}{16}}$",
            "INPUT_FREQ/(UART_CLKDIV + UART_CLKDIV_FRAG/16)",
        ),
        # the autobaud rate: the whole (... + 2)/2 divides, not f_clk/(... + 2) then /2
        (
            r"\[B_{\textrm{uart}}=\frac{f_{\textrm{clk}}} {\textrm{(\hyperref[f:a]{LOW\_CNT} + "
            r"\hyperref[f:b]{HIGH\_CNT} +2)/2}}\]",
            "B_uart = f_clk/((LOW_CNT + HIGH_CNT + 2)/2)",
        ),
        (r"$\frac{\frac{a}{b}}{\frac{c}{d}}$", "(a/b)/(c/d)"),
        (r"$\frac{a}{b}\frac{c}{d}$", "(a/b) * (c/d)"),
        (r"$\frac{1}{2^{n}}$", "1/2^n"),
        (r"\(a \times b + c \cdot d\)", "a * b + c * d"),
        (r"$\left( \frac{N}{32} - 1 \right) \times 4$", "(N/32 - 1) * 4"),
        (r"$\left\lfloor \frac{a + b}{c} \right\rfloor$", "floor((a + b)/c)"),
        (r"$\lceil x/2 \rceil$", "ceil(x/2)"),
        (r"$\sum_{i=0}^{n-1} x_{i} \cdot 2^{i} + 1$", "sum over i=0..n-1 of (x_i * 2^i) + 1"),
        (r"$f_{clk}$, $x_{n-1}$, $2^{n+1}$, $2^{-1}$", "f_clk, x_(n-1), 2^(n+1), 2^(-1)"),
        (r"$x^10$", "x^1 0"),  # TeX takes one character as the exponent
        (r"$M^{\prime}$", "M'"),
        (r"$LEDC\_CLK\_DIV\regindex{x} = A + \frac{B}{256}$", "LEDC_CLK_DIVx = A + B/256"),
        (r"$f_{xtal}(a + 1)$", "f_xtal * (a + 1)"),
        (r"$(a+1)(b+1)$", "(a + 1)(b + 1)"),
        (r"$k\Omega$", "k Ω"),
        (r"\begin{math}4{^2}\end{math}", "4^2"),
        (r"$\log_2\left(\frac{f_{clk}}{f_{PWM} \cdot D}\right)$", "log_2(f_clk/(f_PWM * D))"),
        (r"$sw\_init_key$, $line_number - 1$", "sw_init_key, line_number - 1"),
    ],
)
def test_formulas_render_with_their_meaning(latex: str, text: str) -> None:
    assert latex_to_text(latex) == text


@pytest.mark.parametrize(
    "latex",
    [
        r"$\begin{pmatrix} a & b \end{pmatrix}$",
        r"$\sqrt[3]{x}$",
        r"$\left. x \right|$",
        r"$[0, 1)$",
        r"$\unknownmacro{x} + 1$",
    ],
)
def test_what_cannot_be_rendered_is_kept_as_marked_source(latex: str) -> None:
    text = latex_to_text(latex)
    assert text.startswith(KEPT_PREFIX) and text.endswith("]")
    assert "\\" in text or "[0, 1)" in text


def test_inline_math_stays_on_the_prose_line() -> None:
    text = latex_to_text(r"The rate is $\frac{a}{b + c}$ per second, see \(2^{n}\).")
    assert text == "The rate is a/(b + c) per second, see 2^n."


def test_display_math_is_a_line_of_its_own() -> None:
    text = latex_to_text("Before\n\\begin{equation}\n a = \\frac{b}{c + d}\n\\end{equation}\nafter.")
    assert "\na = b/(c + d)\n" in text
