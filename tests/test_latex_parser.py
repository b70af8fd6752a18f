"""Unit tests for latex_parser: one small LaTeX input per DESIGN §4 trap."""

from __future__ import annotations

from pathlib import Path

import pytest

import chunk_format
import latex_parser as lp
import latex_source
from chunking import Block, Section

FIXTURES = Path(__file__).parent / "fixtures" / "trm"


def _parse(chapter: str, tags: set[str], chip_name: str = "ESP32-C3") -> lp.ParsedChapter:
    root = FIXTURES / chapter
    return lp.parse_chapter(root, FIXTURES, root.parent, tags, {"chipname": chip_name})


def _register(parsed: lp.ParsedChapter, name: str) -> lp.Register:
    matches = [r for r in parsed.tree.registers if r.name == name]
    assert len(matches) == 1, f"{name} found {len(matches)} times"
    return matches[0]


# --- comments -----------------------------------------------------------------------------------


def test_comments_are_stripped_but_escaped_percent_and_listings_survive() -> None:
    text = "keep 100\\% this % drop \\subfile{ghost}\n% \\input{also-ghost}\nnext\n"
    text += "\\begin{lstlisting}\nx = 1; % C comment stays\n\\end{lstlisting}\n"
    stripped = latex_source.strip_comments(text)
    assert "ghost" not in stripped
    assert "100\\% this" in stripped
    assert "% C comment stays" in stripped
    assert "next" in stripped


def test_commented_include_is_not_followed() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    assert parsed.include_problems == []
    assert not any("ghost" in str(p) or "commented-out" in str(p) for p in parsed.files)


# --- includes -------------------------------------------------------------------------------------


def test_includes_follow_path_macros_recursively() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    names = {p.name for p in parsed.files}
    assert {"01-DEMO__EN.tex", "01-DEMO-reg__EN.tex", "pin-table.tex", "glossary-reg__EN.tex"} <= names
    assert _register(parsed, "DEMO_CONF_REG").address == "0x0060"


def test_include_name_with_wrong_case_is_resolved_and_recorded() -> None:
    parsed = _parse("ESP32-C3/02-CASE__EN.tex", {"ESP32-C3"})
    assert parsed.include_problems == []
    assert [found.name for _target, found in parsed.case_fixed_includes] == ["02-CASE-REG__EN.tex"]
    assert _register(parsed, "CASE_HIDDEN_REG").address == "0x0010"


def test_missing_include_is_reported_not_silently_dropped(tmp_path: Path) -> None:
    root = tmp_path / "01-X__EN.tex"
    root.write_text(
        "\\begin{document}\\chapter{X}\nbefore\n\\subfile{./01-X/nowhere}\nafter\n\\end{document}\n"
    )
    parsed = lp.parse_chapter(root, tmp_path, tmp_path, {"ESP32-C3"}, {})
    assert [(p.target, p.reason) for p in parsed.include_problems] == [("./01-X/nowhere", "file not found")]


def test_include_cycle_is_cut_and_reported() -> None:
    resolver = latex_source.IncludeResolver([FIXTURES / "cycle"])
    ctx = latex_source.ExpandContext(tags=frozenset(), resolver=resolver, root_dir=FIXTURES / "cycle")
    text = latex_source.expand_file(FIXTURES / "cycle" / "a.tex", ctx)
    assert text.count("A starts.") == 1
    assert "B includes A again" in text
    assert [p.reason for p in ctx.problems] == ["include cycle"]


# --- tags -----------------------------------------------------------------------------------------


def test_tag_conditionals_select_branches() -> None:
    text = r"\tagged{C3}{yes-t}\untagged{C3}{no-u}\iftagged{C6, C3}{yes-if}{no-if}\iftagged{P4}{no}{yes-else}"
    assert latex_source.evaluate_tags(text, frozenset({"C3"})) == "yes-tyes-ifyes-else"
    assert latex_source.evaluate_tags(text, frozenset({"P4"})) == "no-uno-ifno"


def test_nested_tag_conditionals_are_evaluated() -> None:
    text = r"\iftagged{A}{outer \tagged{B}{inner}}{other}"
    assert latex_source.evaluate_tags(text, frozenset({"A", "B"})) == "outer inner"
    assert latex_source.evaluate_tags(text, frozenset({"A"})) == "outer "


def test_unbalanced_register_inside_tag_branches_does_not_swallow_the_file() -> None:
    c3 = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    c6 = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C6"}, chip_name="ESP32-C6")
    c3_names = [r.name for r in c3.tree.registers]
    c6_names = [r.name for r in c6.tree.registers]
    assert "DEMO_OLD_REG" in c3_names and "DEMO_NEW_REG" not in c3_names
    assert "DEMO_NEW_REG" in c6_names and "DEMO_OLD_REG" not in c6_names
    # the register after the tagged pair is still parsed on its own; the \iffalse one is not
    assert c3_names[-1] == "DEMO_DATE_REG" and c6_names[-1] == "DEMO_DATE_REG"
    assert c3.tree.warnings == []


def test_stray_begin_register_ends_the_previous_register_with_a_warning() -> None:
    text = (
        "\\begin{register}{H}{A\\_REG}{0x0000}\\regfield{A}{32}{0}{{0}}"
        "\\begin{register}{H}{B\\_REG}{0x0004}\\regfield{B}{32}{0}{{0}}\\end{register}\n"
        "Prose after both registers.\n"
    )
    tree = lp.build_tree(text, "Chapter")
    assert [r.name for r in tree.registers] == ["A_REG", "B_REG"]
    assert tree.warnings == ["register environment without its \\end{register}"]
    assert any("Prose after both registers." in b.text for b in tree.root.blocks)


# --- registers ------------------------------------------------------------------------------------


def test_register_renders_in_the_contract_format() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    assert _register(parsed, "DEMO_CONF_REG").render() == (
        "Register DEMO_CONF_REG\n"
        "Address: 0x0060\n"
        "Reset value: 0x00000608\n"
        "Fields:\n"
        "- (reserved) [31:16] reset 0x0\n"
        "- DEMO_WAIT [15:9] (R/W/SC) reset 0x3: Configures the wait time.\n"
        "- DEMO_PERIOD [8:0] (R/W) reset 0x8: Configures the demo period. 0: Off; 1: On"
    )


def test_parameterised_and_wrapped_headers_render_on_one_line() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    key = _register(parsed, "DEMO_KEY_n_REG")
    assert key.render().splitlines()[:2] == ["Register DEMO_KEY_n_REG (n: 0-7)", "Address: 0x0100+4*n"]
    wrapped = _register(parsed, "DEMO_GENn_FORCE_REG")
    assert wrapped.render().splitlines()[:3] == [
        "Register DEMO_GENn_FORCE_REG (n: 0-2)",
        "Address: 0x0048+0x38*n",
        "Reset value: 0x00000001",
    ]
    assert wrapped.symbol_refs == ["DEMO_GENn_FORCE_REG", "DEMO_GENn_FORCE_EN"]


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        ("0x{}0060", "0x0060"),
        ("\\hexprefix{}0060", "0x0060"),
        ("0x{}048", "0x048"),
        ("0x00b0", "0x00b0"),
        ("0x0154+4*\\regindex{n}", "0x0154+4*n"),
        ("0x90+0x0C*\\textit{\\textcolor{red}{\\it{n}}}", "0x90+0x0C*n"),
    ],
)
def test_addresses_render_as_written(latex: str, expected: str) -> None:
    assert lp.render_address(latex) == expected


@pytest.mark.parametrize(
    ("raw", "width", "value"),
    [
        ("0000000000000000", 16, 0),
        ("01", 2, 1),
        ("{0x3}", 7, 3),
        ("{8}", 9, 8),
        ("{\\hexprefix{}01}", 13, 1),
        ("{1'b1}", 1, 1),
        ("{11111}", 5, 31),
        ("{x}", 1, None),
    ],
)
def test_reset_values(raw: str, width: int, value: int | None) -> None:
    assert lp.parse_reset(raw, width)[0] == value


def test_continued_register_is_one_register_with_all_descriptions() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    status = _register(parsed, "DEMO_STATUS_REG")
    assert "DEMO_C6_ONLY" in status.descriptions
    assert status.render().count("Register DEMO_STATUS_REG") == 1


def test_indexed_description_matches_numbered_fields() -> None:
    root = FIXTURES / "ESP32/01-PCNT__EN.tex"
    parsed = lp.parse_chapter(root, FIXTURES, root.parent, {"ESP32"}, {"chipname": "ESP32"})
    rendered = _register(parsed, "PCNT_CTRL_REG").render()
    assert "- PCNT_CNT_PAUSE_U1 [1] (R/W) reset 0x0: Set this bit to freeze unit n's counter." in rendered
    assert "Reset value: 0x00000001" in rendered


# --- tables, macros, listings ---------------------------------------------------------------------


def test_table_rows_keep_their_cells() -> None:
    rows = lp.render_table("\\hline A & B \\\\ \\hline x\\_1 & a \\& b \\\\ \\hline")
    assert rows == ["A | B", "x_1 | a & b"]


def test_longtable_repeated_header_is_dropped_and_caption_kept() -> None:
    body = (
        "\\caption{Pins} \\\\ \\hline H1 & H2 \\\\ \\endfirsthead \\hline H1 & H2 \\\\ \\endhead"
        " r1 & v1 \\\\ r2 & v2 \\\\"
    )
    assert lp.render_table(body) == ["Table: Pins", "H1 | H2", "r1 | v1", "r2 | v2"]


def test_macro_whose_body_opens_an_environment_is_expanded_not_swallowed() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    texts = [b.text for b in _all_blocks(parsed.tree.root)]
    assert "Table: Demo Pins\nPin | Function\nGPIO0 | DEMO_CLK\nGPIO1 | DEMO_DATA" in texts
    assert any("TEXT-AFTER-MACRO-TABLE" in t for t in texts)


def test_definitions_are_removed_and_uses_expanded() -> None:
    source = "\\newcommand{\\two}[2]{#2-#1}\\def\\one{ONE}x \\two{a}{b} \\one{} y"
    text, macros = latex_source.extract_definitions(source)
    assert set(macros) == {"two", "one"}
    assert latex_source.expand_macros(text, macros) == "x b-a ONE y"


def test_lstlisting_body_is_kept_verbatim() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    texts = [b.text for b in _all_blocks(parsed.tree.root)]
    assert "// 100% verbatim: \\textbf{not bold} & {braces}\nREG_WRITE(DEMO_CONF_REG, 1);" in texts


def test_chapter_title_sections_and_chip_macro() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    assert parsed.tree.title == "Demo Controller (DEMO)"
    assert [c.title for c in parsed.tree.root.children] == ["Overview", "Signals", "Programming", "Registers"]
    assert parsed.tree.root.blocks[0].text == "The ESP32-C3 demo controller has 100% of the features."


def test_table_in_prose_renders_row_by_row() -> None:
    parsed = _parse("ESP32-C3/01-DEMO__EN.tex", {"ESP32-C3"})
    signals = parsed.tree.root.children[1]
    assert signals.blocks[0].text == "Signal | Meaning\nDEMO_IN | input & sampled\nDEMO_OUT | output"


def _all_blocks(section: lp.Section) -> list[lp.Block]:
    blocks = list(section.blocks)
    for child in section.children:
        blocks.extend(_all_blocks(child))
    return blocks


@pytest.mark.parametrize(
    ("header", "first_lines"),
    [
        (
            "{H}{RMT\\_CH\\regindex{n}DATA\\_REG(\\regindex{n}=0,1)}{0x0000}",
            ["Register RMT_CHnDATA_REG (n=0,1)", "Address: 0x0000"],
        ),
        (
            "{H}{SPI\\_MISC\\_REG (For SPI2 Only)}{0x003C}",
            ["Register SPI_MISC_REG (For SPI2 Only)", "Address: 0x003C"],
        ),
        (
            "{H}{INT\\_PRI\\_\\regindex{n}\\_REG}{\\regindex{n}: 1 - 31)(0x00C8 + 0x4*\\regindex{n}}",
            ["Register INT_PRI_n_REG (n: 1 - 31)", "Address: 0x00C8 + 0x4*n"],
        ),
    ],
)
def test_irregular_register_headers(header: str, first_lines: list[str]) -> None:
    tree = lp.build_tree("\\begin{register}" + header + "\\regfield{X}{32}{0}{{0}}\\end{register}", "C")
    assert tree.registers[0].render().splitlines()[:2] == first_lines


def test_iffalse_hides_text_and_ifglobal_keeps_its_first_branch() -> None:
    text = "a \\iffalse hidden \\ifx\\x\\y nested \\fi still hidden \\else shown \\fi b "
    text += "\\ifglobal g \\else s \\fi"
    assert latex_source.select_constant_branches(text) == "a  shown  b  g "


def test_drawings_are_left_out_of_prose() -> None:
    text = "Before.\n\\begin{bytefield}[bitwidth=1em]\\bitbox{5}{START}\\end{bytefield}\nAfter."
    tree = lp.build_tree(text, "C")
    assert [b.text for b in tree.root.blocks] == ["Before.", "After."]


def test_field_description_keeps_its_nested_list_and_access() -> None:
    body = (
        "\\begin{regdesc}\\begin{reglist}\n"
        "\\item [IO\\_MUX\\_CLK1] Configure clock output: (R/W)\n"
        "\\begin{itemize}\n\\item 0: output to CLK\\_OUT1.\n\\item 15: disabled.\n\\end{itemize}\n"
        "\\item [IO\\_MUX\\_DELAY] Power switch delay (in APB cycles). (RO)\n"
        "\\end{reglist}\\end{regdesc}"
    )
    descriptions = lp._parse_descriptions(body)
    access, text = descriptions["IO_MUX_CLK1"]
    assert access == "R/W"
    assert "0: output to CLK_OUT1." in text and "15: disabled." in text
    assert descriptions["IO_MUX_DELAY"] == ("RO", "Power switch delay (in APB cycles).")


def test_whole_register_field_without_a_name_takes_the_register_name() -> None:
    text = (
        "\\begin{register}{H}{EFUSE\\_BLK0\\_RDATA1\\_REG}{0x004}\n"
        "\\regfield{}{32}{0}{00000000000000000000000000000000}%\n"
        "\\begin{regdesc}\\begin{reglist}\n"
        "\\item [EFUSE\\_BLK0\\_RDATA1\\_REG]Returns the lower 32 bits of the MAC address. (RO)\n"
        "\\end{reglist}\\end{regdesc}\n\\end{register}"
    )
    rendered = lp.build_tree(text, "C").registers[0].render()
    assert rendered.endswith(
        "- EFUSE_BLK0_RDATA1_REG [31:0] (RO) reset 0x0: Returns the lower 32 bits of the MAC address."
    )


def test_indexed_description_with_index_note_matches_numbered_fields() -> None:
    text = (
        "\\begin{register}{H}{DMAC\\_CHEN0\\_REG}{0x0018}\n"
        "\\regfield{DMAC\\_CH2\\_EN}{1}{1}{{0}}\\regfield{DMAC\\_CH1\\_EN}{1}{0}{{1}}\n"
        "\\begin{regdesc}\\begin{reglist}\n"
        "\\item [DMAC\\_CH\\regindex{n}\\_EN (\\regindex{n}: 1-2)] Enables channel n. (R/W)\n"
        "\\end{reglist}\\end{regdesc}\n\\end{register}"
    )
    lines = lp.build_tree(text, "C").registers[0].render().splitlines()
    assert lines[4:] == [
        "- DMAC_CH2_EN [1] (R/W) reset 0x0: Enables channel n.",
        "- DMAC_CH1_EN [0] (R/W) reset 0x1: Enables channel n.",
    ]


def test_parameterised_register_lists_fields_under_their_parameterised_names() -> None:
    """LEDC_CHn_CONF0_REG is drawn with channel 0's field names; listing those would send a reader
    of channel 2 to channel 0's bit, so the described CHn name leads and the drawn name is kept."""
    register = lp.Register(
        name="LEDC_CHn_CONF0_REG",
        param_note="n: 0-5",
        address="0x0000+0x14*n",
        fields=[
            lp.RegField("LEDC_PARA_UP_CH0", 4, 4, 0, "0"),
            lp.RegField("LEDC_TIMER_SEL_CH0", 1, 0, 0, "0"),
        ],
        descriptions={
            "LEDC_PARA_UP_CHn": ("WT", "Configures whether to update the duty of channel n."),
            "LEDC_TIMER_SEL_CHn": ("R/W", "Selects the timer of channel n."),
        },
    )
    rendered = register.render()
    assert (
        "- LEDC_TIMER_SEL_CHn [1:0] (R/W) reset 0x0: Selects the timer of channel n. "
        "(the register drawing labels it LEDC_TIMER_SEL_CH0)"
    ) in rendered
    assert "- LEDC_PARA_UP_CHn [4] (WT)" in rendered
    # the same description shared by fields drawn once per index keeps each drawn name
    per_index = lp.Register(
        name="DEMO_n_REG",
        param_note="n: 0-1",
        address="0x0000+4*n",
        fields=[lp.RegField("DEMO_PAUSE_U0", 0, 0, 0, "0"), lp.RegField("DEMO_PAUSE_U1", 1, 1, 0, "0")],
        descriptions={"DEMO_PAUSE_Un": ("R/W", "Pauses unit n.")},
    )
    assert "- DEMO_PAUSE_U1 [1] (R/W) reset 0x0: Pauses unit n." in per_index.render()


def test_a_summary_tables_absolute_addresses_join_the_block_that_gives_an_offset() -> None:
    # ESP32's summary tables give absolute addresses, one column per instance; its blocks offsets
    table = "\n".join(
        (
            "Name | Description | UART0 | UART1 | UART2 | Acc",
            "UART_AT_CMD_GAPTOUT_REG | Timeout configuration | 0x3FF40050 | 0x3FF50050 | 0x3FF6E050 | R/W",
            "UART_ID_REG | Version register | 0x3FF40078 | 0x0078 | 0x3FF6E078 | R/W",
        )
    )
    aes = "Name | Description | Address | Access\nAES_ENDIAN_REG | Endianness config | 0x3FF01040 | R/W"
    root = Section("UART", children=[Section("Register Summary", blocks=[Block(table), Block(aes)])])
    gap = lp.Register("UART_AT_CMD_GAPTOUT_REG", "", "0x50")
    endian = lp.Register("AES_ENDIAN_REG", "", "0x040")
    version = lp.Register("UART_ID_REG", "", "0x78")
    summaries = lp.register_summaries(root, [gap, endian, version])
    every_instance = "UART0 0x3FF40050, UART1 0x3FF50050, UART2 0x3FF6E050"
    assert lp.absolute_address(gap, summaries[gap.name]) == every_instance
    assert lp.absolute_address(endian, summaries[endian.name]) == "0x3FF01040"
    assert lp.absolute_address(version, summaries[version.name]) == "", "a mix of offsets and addresses"
    # a block that is already absolute, or parameterised, or a summary listing no address: nothing
    assert lp.absolute_address(lp.Register("X_REG", "", "0x3FF01040"), summaries[endian.name]) == ""
    assert lp.absolute_address(lp.Register("X_REG", "", "0x10+4*n"), summaries[endian.name]) == ""
    assert lp.absolute_address(gap, lp.SummaryRow("Timeout configuration")) == ""
    endian.absolute_address = lp.absolute_address(endian, summaries[endian.name])
    lines = endian.render().splitlines()
    assert lines[1:3] == ["Address: 0x040", "Absolute address (register summary): 0x3FF01040"]
    # the register tool's parser reads past the line: the reset after it is still the block's
    parsed = chunk_format.parse_register_block(endian.render())
    assert parsed["address"] == "0x040" and parsed["reset"] == "see fields"


def test_a_multirow_cell_whose_width_is_a_bare_star_renders_without_it() -> None:
    # the manuals write both \multirow{2}{*}{...} and \multirow{2}*{...}: the star is the width,
    # which was printed before the text, also in a row that goes through pylatexenc (\rowcolor)
    linked = r"\multirow{2}*{\hyperref[regdesc:UARTCLKDIVREG]{UART\_CLKDIV\_REG}}"
    assert lp.latex_to_text(linked) == "UART_CLKDIV_REG"
    assert lp.latex_to_text(r"\multirow{-2}*{0x3FF40014}") == "0x3FF40014"
    assert lp.latex_to_text(r"\multirow{3}[2]{*}{Bus Type}") == "Bus Type"
    assert lp.latex_to_text("\\rowcolor{lightgray}\n\\multirow{-2}*{Bus Type}") == "Bus Type"
    assert lp.latex_to_text(r"\multirow{2}{*}{\textbf{Key} registers}") == "Key registers"


def test_a_hyperlink_renders_its_text_and_an_index_entry_nothing() -> None:
    # "RTC FAST Memory | PRO_CPU_OnlyPRO_CPU Only" before: the target was printed too
    assert lp.latex_to_text(r"\hyperlink{PRO_CPU_Only}{PRO\_CPU Only}") == "PRO_CPU Only"
    assert lp.latex_to_text(r"see the \hyperlink{glossary}{Glossary}.") == "see the Glossary."
    # an index entry prints nothing where it stands ("VDD_SDIOVDD_SDIO can source ..." before)
    assert lp.latex_to_text(r"VDD\_SDIO\index{VDD\_SDIO} can source") == "VDD_SDIO can source"


def test_register_summaries_join_the_summary_table_words_to_each_register() -> None:
    table = "\n".join(
        (
            "Name | Description | Address | Access",
            "Configuration Registers",
            "UART_CLKDIV_REG | Clock divider configuration | 0x0014 | R/W",
            "LEDC_CH0_CONF0_REG | Configuration register 0 for channel 0 | 0x0000 | varies",
            "LEDC_CH1_CONF0_REG | Configuration register 0 for channel 1 | 0x0014 | varies",
            "UART_ID_REG | 0x0080 | 0x0080 | R/W",
        )
    )
    root = Section("UART", children=[Section("Register Summary", blocks=[Block(table)])])
    registers = [
        lp.Register("UART_CLKDIV_REG", "", "0x0014"),
        lp.Register("LEDC_CHn_CONF0_REG", "n: 0-7", "0x0000"),
        lp.Register("UART_ID_REG", "", "0x0080"),
    ]
    assert lp.register_summaries(root, registers) == {
        "UART_CLKDIV_REG": lp.SummaryRow("Clock divider configuration", (("", "0x0014"),)),
        "LEDC_CHn_CONF0_REG": lp.SummaryRow(
            "Configuration register 0 for channel 0 (as listed for LEDC_CH0_CONF0_REG)"
        ),
    }, "an address in the description column is not a description"
    registers[0].summary = "Clock divider configuration"
    assert registers[0].render().splitlines()[:4] == [
        "Register UART_CLKDIV_REG",
        "Address: 0x0014",
        "Reset value: see fields",
        "Summary: Clock divider configuration",
    ]
