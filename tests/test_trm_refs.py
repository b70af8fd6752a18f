"""TRM cross-references: marks survive the text conversion, labels land on registers and sections."""

from __future__ import annotations

import latex_parser as lp
from trm_refs import LabelIndex, mark_references, summary, take_marks

CHAPTER = (
    "\\chapter{Demo Controller (DEMO)}\\label{mod:demo}\n"
    "\\section{Overview}\\label{sec:overview}\n"
    "Configure the divider in \\hyperref[regdesc:DEMOCLKREG]{ DEMO\\_CLK\\_REG} first; "
    "see Section~\\ref{sec:usage} and \\hyperref[glossary-access-types]{Access Types}.\n\n"
    "A paragraph with no reference.\n"
    "\\section{Usage}\\label{sec:usage}\n"
    "\\subsection{Clock}\\label{subsec:clock}\n"
    "Set \\hyperref[fielddesc:DEMODIV]{DEMO\\_DIV}, then read Table~\\ref{tab:pins}.\n"
    "\\begin{table}\\caption{Pins}\\label{tab:pins}\n\\begin{tabular}{ll}\nA & B \\\\\n\\end{tabular}\n"
    "\\end{table}\n"
    "\\begin{register}{H}{DEMO\\_CLK\\_REG}{0x0010}\\label{regdesc:DEMOCLKREG}\n"
    "\\regfield{DEMO\\_DIV}{32}{0}{{0}}%\n"
    "\\reglabel{Reset}\\regnewline%\n"
    "\\begin{regdesc}\\begin{reglist}\n"
    "\\label{fielddesc:DEMODIV}\\item [DEMO\\_DIV] Divider; the clock is selected in "
    "\\hyperref[sec:overview]{Overview}. (R/W)\n"
    "\\end{reglist}\\end{regdesc}\n"
    "\\end{register}\n"
)


def _blocks(section: lp.Section) -> list[lp.Block]:
    return [*section.blocks, *(b for child in section.children for b in _blocks(child))]


def test_marks_leave_the_text_exactly_as_without_them() -> None:
    plain = lp.build_tree(CHAPTER, "C")
    texts = [b.text for b in _blocks(plain.root)]
    assert all("\ue000" not in t and "\ue001" not in t for t in texts)
    # the argument's leading space collapses with the one before the command, as without a mark
    assert any("Configure the divider in DEMO_CLK_REG first;" in t for t in texts)
    text, labels = take_marks(mark_references("in \\ref{sec:a} and \\hyperref[x:y]{ Z}"))
    assert labels == ["sec:a", "x:y"] and "\ue000" not in text


def test_labels_land_on_their_register_or_section_and_blocks_keep_what_they_reference() -> None:
    tree = lp.build_tree(CHAPTER, "C")
    assert tree.labels["regdesc:DEMOCLKREG"].register == "DEMO_CLK_REG"
    assert tree.labels["fielddesc:DEMODIV"].register == "DEMO_CLK_REG"
    assert tree.labels["sec:usage"].section == ("Demo Controller (DEMO)", "Usage")
    assert tree.labels["tab:pins"].section == ("Demo Controller (DEMO)", "Usage", "Clock")
    overview = next(b for b in _blocks(tree.root) if b.text.startswith("Configure the divider"))
    assert overview.doc_refs == ["regdesc:DEMOCLKREG", "sec:usage", "glossary-access-types"]
    register = tree.registers[0]
    assert register.block is not None and register.block.doc_refs == ["sec:overview"]
    assert "\ue000" not in register.block.text and "\ue000" not in register.descriptions["DEMO_DIV"][0]


def test_index_resolves_across_chapters_and_counts_what_it_cannot() -> None:
    tree = lp.build_tree(CHAPTER, "C")
    index = LabelIndex()
    index.define("CHIP/01-DEMO__EN", tree.labels)
    refs = index.resolve(
        ["regdesc:DEMOCLKREG", "sec:usage", "glossary-access-types", "fielddesc:DEMOCLKREG"],
        own_text="Demo Controller (DEMO) > Overview\n\nConfigure ...",
        own_file="CHIP/01-DEMO__EN",
        own_section="Demo Controller (DEMO) > Overview",
    )
    # a register label written as a field label still names the register; duplicates go
    assert refs == ["register:DEMO_CLK_REG", "CHIP/01-DEMO__EN#Demo Controller (DEMO) > Usage"]
    # a field description never points at its own register, nor a row at its own section
    own = index.resolve(
        ["fielddesc:DEMODIV", "sec:usage"],
        "Register DEMO_CLK_REG\nAddress: 0x0010",
        "CHIP/01-DEMO__EN",
        "Demo Controller (DEMO) > Usage",
    )
    assert own == []
    total, resolved, unresolved = summary([index])
    assert (total, resolved) == (6, 5) and unresolved == {"glossary-access-types": 1}
