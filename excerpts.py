"""The excerpt of a long passage that an agent sees: its lead plus the lines that answer the query.

An agent pays for every byte of an answer, so a result shows a few hundred characters of a passage
that may run to several thousand. One window of consecutive text loses the answer whenever it sits
apart from where the query's words first meet: the default value at the end of a Kconfig option
after its prose, the one row of a register summary table, the member of a struct named in the
question. So the passage is cut into units (lines; sentences of a long line; a labelled value block
such as "Default value:" with its items), each unit is scored by the query words it holds, and the
best units are kept in text order with "…" where text was left out. What budget remains grows the
kept units into their neighbours, so the excerpt still reads as text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from chunk_format import FIELDS_LINE, REGISTER_CHUNK_HEAD
from terms import stem

# A line longer than this is cut at its sentences, so one long paragraph cannot take the budget.
LONG_LINE_CHARS = 240
# The least room kept for the body, however long the lead (which is never cut).
MIN_BODY_CHARS = 200
GAP_LINE = "\n…\n"
GAP_INLINE = " … "
# A label line ("Range:", "Default value:") and the indented items under it are one unit: a value
# without its label is no answer, and the label alone says nothing.
LABEL_LINE = re.compile(r"^\s*[A-Z][A-Za-z /()-]{0,40}:\s*$")
ITEM_LINE = re.compile(r"^\s+(?:- |\S)")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9`'\"(\[])")
# The share of the budget left after the best unit that goes to its neighbours before the next
# best unit is considered.
CONTEXT_SHARE = 0.4
# Kinds whose labelled values (default, range) are the fact most questions ask for.
VALUE_KINDS = frozenset(("kconfig_option",))


@dataclass
class Unit:
    start: int
    end: int
    text: str
    indent: int
    labelled: bool = False
    inline: bool = False  # a sentence after the first of its line


def excerpt(
    text: str,
    focus: list[str],
    budget: int,
    terms: list[str] | None = None,
    kind: str | None = None,
) -> tuple[str, bool]:
    """``text`` cut to about ``budget`` characters: the lead, then the units holding the focus
    symbols and the query's rarer words, grown into their neighbours; True when text was left out.

    The lead is the heading line, and for a register block every line before its field list (name,
    address, reset value, summary): a register answer without its address or reset is no answer.
    """
    if len(text) <= budget:
        return text, False
    lead = _lead(text)  # whole even past the budget: an address or reset value is never cut
    units = split_units(text, len(lead))
    if not units:
        return text[: budget - 2].rstrip() + " …", True
    room = max(budget - len(lead) - len(" …"), MIN_BODY_CHARS)
    scores = score_units(units, focus, terms or [], kind)
    chosen: set[int] = set()
    room = _take_best(units, scores, chosen, room)
    if not chosen:
        room = _take_cropped(units, scores, chosen, room)
    _grow(units, scores, chosen, room)
    return _render(text, lead, units, sorted(chosen)), True


def split_units(text: str, lead_end: int) -> list[Unit]:
    """The body after the lead as units: lines, a long line's sentences, label-and-items blocks."""
    units: list[Unit] = []
    position = lead_end
    lines = text[lead_end:].split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        start = position
        position += len(line) + 1
        index += 1
        if not line.strip():
            continue
        if LABEL_LINE.match(line):
            end = start + len(line)
            while index < len(lines) and lines[index].strip() and ITEM_LINE.match(lines[index]):
                end = position + len(lines[index])
                position += len(lines[index]) + 1
                index += 1
            if end > start + len(line):
                units.append(Unit(start, end, text[start:end], _indent(line), labelled=True))
                continue
        if len(line) > LONG_LINE_CHARS:
            units.extend(_sentences(text, start, line))
        else:
            units.append(Unit(start, start + len(line), line, _indent(line)))
    return units


def score_units(units: list[Unit], focus: list[str], terms: list[str], kind: str | None) -> list[float]:
    """Each unit's score: the query words it holds, each weighted by how few units hold it (a word
    on every field line says little); a focus symbol outweighs all words together; a labelled
    value of a Kconfig option counts as holding every word."""
    lowered = [u.text.lower() for u in units]
    # a word matches where a word or an identifier's part starts: "rate" is no word of
    # "integrated", while "speed" is a part of "clock_speed_hz"
    holds = {
        key: [bool(pattern.search(line)) for line in lowered]
        for key, pattern in (
            (key, re.compile(r"(?<![a-z0-9])" + re.escape(key)))
            for key in dict.fromkeys(stem(t) for t in terms if t)
        )
    }
    weights = {key: math.log(1 + len(units) / (1 + sum(held))) for key, held in holds.items()}
    total = sum(weights.values()) or 1.0
    symbols = [s.lower() for s in focus if s]
    scores = []
    for index, (unit, line) in enumerate(zip(units, lowered, strict=True)):
        score = sum(weight for key, weight in weights.items() if holds[key][index])
        score += sum(2 * total for symbol in symbols if symbol in line)
        if unit.labelled and kind in VALUE_KINDS:
            score += total
        scores.append(score)
    return scores


def _take_best(units: list[Unit], scores: list[float], chosen: set[int], room: int) -> int:
    """Keep the best-scoring units that fit, each with the lines it hangs under and, for the
    best, the units right after and before it: an answer sits next to the words
    that find it more often than at the next match further down."""
    order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
    for rank, i in enumerate(order):
        wanted = [j for j in (*_owners(units, i), i) if j not in chosen]
        cost = sum(len(units[j].text) + len(GAP_LINE) for j in wanted)
        if cost > room:
            wanted = [i] if i not in chosen else []
            cost = len(units[i].text) + len(GAP_LINE) if wanted else 0
        if cost > room:
            continue
        chosen.update(wanted)
        room -= cost
        if rank == 0:
            room = _add_context(units, i, chosen, room, CONTEXT_SHARE * room)
    return room


def _add_context(units: list[Unit], index: int, chosen: set[int], room: int, allowance: float) -> int:
    """Add the units after and before ``index`` (alternating) while they fit ``allowance``."""
    spent = 0
    for step in range(1, len(units)):
        grew = False
        for j in (index + step, index - step):
            if 0 <= j < len(units) and j not in chosen:
                cost = len(units[j].text) + 1
                if spent + cost <= allowance and cost <= room:
                    chosen.add(j)
                    spent += cost
                    room -= cost
                    grew = True
        if not grew:
            break
    return room


def _take_cropped(units: list[Unit], scores: list[float], chosen: set[int], room: int) -> int:
    """When even the best unit is too long, keep a cropped copy of it; else start at the top."""
    best = max(range(len(units)), key=lambda i: (scores[i], -i))
    if scores[best] <= 0:
        return room
    unit = units[best]
    keep = max(room - len(GAP_LINE) - 2, 40)
    units[best] = Unit(unit.start, unit.start + keep, unit.text[:keep].rstrip() + " …", unit.indent)
    chosen.add(best)
    return room - len(units[best].text) - len(GAP_LINE)


def _grow(units: list[Unit], scores: list[float], chosen: set[int], room: int) -> None:
    """Spend the rest of the budget on the units next to kept ones (after, then before), the
    best-scoring kept units first, so the excerpt reads on where it matters most; with nothing
    kept, the passage's opening lines."""
    if not chosen:
        for i, unit in enumerate(units):
            if len(unit.text) + 1 > room:
                return
            chosen.add(i)
            room -= len(unit.text) + 1
        return
    # grow around the scored units first (and what grew from them), then around the lines they
    # hang under, so an owner's other members do not take the answer's room
    sources = {i for run in _runs(chosen) if any(scores[j] > 0 for j in run) for i in run}
    for phase in (sources, chosen):
        grew = True
        while grew:
            grew = False
            for i in sorted(phase, key=lambda i: (-scores[i], i)):
                for j in (i + 1, i - 1):
                    if 0 <= j < len(units) and j not in chosen and len(units[j].text) + 1 <= room:
                        chosen.add(j)
                        phase.add(j)
                        room -= len(units[j].text) + 1
                        grew = True


def _runs(chosen: set[int]) -> list[list[int]]:
    """The kept units as runs of consecutive indices."""
    runs: list[list[int]] = []
    for i in sorted(chosen):
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _render(text: str, lead: str, units: list[Unit], chosen: list[int]) -> str:
    parts = [lead]
    previous: int | None = None
    for i in chosen:
        unit = units[i]
        if previous is not None and i == previous + 1:
            parts.append("\n" if "\n" in text[units[previous].end : unit.start] else " ")
        elif previous is None and i == 0:
            parts.append("\n")  # the body opens right under the lead
        else:
            parts.append(GAP_INLINE if unit.inline else GAP_LINE)
        parts.append(unit.text)
        previous = i
    if chosen and chosen[-1] == len(units) - 1 and units[-1].end >= len(text.rstrip()):
        return "".join(parts)
    return "".join(parts).rstrip() + " …"


def _owners(units: list[Unit], index: int) -> list[int]:
    """The less indented lines an indented unit hangs under, outermost first: a member's
    description needs its member line (``int spics_io_num``) and that its struct's, or it answers
    nothing."""
    owners: list[int] = []
    indent = units[index].indent
    for j in range(index - 1, -1, -1):
        if indent == 0:
            break
        if not units[j].inline and units[j].indent < indent:
            owners.append(j)
            indent = units[j].indent
    return owners[::-1]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _sentences(text: str, start: int, line: str) -> list[Unit]:
    indent = _indent(line)
    units = []
    offset = 0
    for match in [*SENTENCE_END.finditer(line), None]:
        end = match.start() if match else len(line)
        piece = line[offset:end]
        if piece.strip():
            units.append(Unit(start + offset, start + end, piece, indent, inline=offset > 0))
        offset = match.end() if match else len(line)
    return units


def _lead(text: str) -> str:
    register = REGISTER_CHUNK_HEAD.match(text)
    if register is None:
        return text.split("\n", 1)[0]
    fields = text.find("\n" + FIELDS_LINE, register.start())
    return text[: fields if fields >= 0 else register.end()].rstrip()
