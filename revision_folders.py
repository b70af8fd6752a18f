"""Which silicon revisions a header under ``components/soc/<chip>/hw_ver*/`` describes.

A revision folder decides the revision every register in it is labelled with, and a wrong label is
a wrong answer about hardware; so each numbered folder is mapped by hand, two kinds go by rule, and
anything else is refused by name before a header is read (docs/soc-headers.md).
"""

from __future__ import annotations

import re
from collections import Counter

from chip_vocab import chips

# A numbered folder means a chip-specific revision (ESP32-P4: hw_ver1 is v1.x silicon, selected
# by CONFIG_ESP32P4_SELECTS_REV_LESS_V3), so each must be named here: a wrong revision on a register
# is a wrong answer about hardware. The sample and production folders below go by rule instead.
HW_VERSION_DIRS: dict[tuple[str, str], tuple[str, ...]] = {
    ("esp32p4", "hw_ver1"): ("v1.3",),
    ("esp32p4", "hw_ver3"): ("mainline",),
}
# Engineering-sample silicon (ESP32-H21 hw_ver_beta1, ESP32-H4 hw_ver_beta5): ESP-IDF builds these
# headers only when a project does not select the production silicon. No revision in chips.yaml
# names such samples, so they are left out, and said so.
ENGINEERING_SAMPLE_DIR = re.compile(r"hw_ver_beta\d*")
# The production silicon (hw_ver_mp) of a chip with one revision in chips.yaml is that revision's
# chip as sold: its rows carry no revision restriction. With several revisions it is ambiguous.
PRODUCTION_DIR = "hw_ver_mp"


def revisions_for(
    chip: str, parts: tuple[str, ...], skip_folders: frozenset[str] = frozenset()
) -> tuple[str, ...] | None:
    """The revisions a header under ``components/soc/<chip>/<parts>`` describes; None = left out.
    KeyError for a revision folder no mapping or rule covers."""
    hw_dirs = [p for p in parts[:-1] if p.startswith("hw_ver")]
    if not hw_dirs:
        return ()
    folder = hw_dirs[0]
    if (chip, folder) in HW_VERSION_DIRS:
        return HW_VERSION_DIRS[(chip, folder)]
    if ENGINEERING_SAMPLE_DIR.fullmatch(folder) or f"{chip}/{folder}" in skip_folders:
        return None
    if folder == PRODUCTION_DIR and len(chips()[chip].revisions) == 1:
        return ()
    raise KeyError((chip, folder))


def revision_folder(rel_path: str) -> str:
    """``components/soc/esp32h4/register/hw_ver_beta5/soc/x.h`` -> ``esp32h4/hw_ver_beta5``."""
    parts = rel_path.split("/")
    return f"{parts[2]}/{next(p for p in parts[3:-1] if p.startswith('hw_ver'))}"


def unknown_folders_message(unknown: Counter[str]) -> str:
    """Names each unmapped revision folder, the chip's known revisions, and the two ways on."""
    lines = []
    for key, count in sorted(unknown.items()):
        chip = key.split("/")[0]
        lines.append(
            f"  {key} ({count} headers); chips.yaml revisions of {chip}: {', '.join(chips()[chip].revisions)}"
        )
    known = ", ".join(f"{c}/{d}" for c, d in HW_VERSION_DIRS)
    return (
        "unknown silicon-revision folder(s); their headers would be labelled with a guessed revision:\n"
        + "\n".join(lines)
        + "\nMap each in revision_folders.HW_VERSION_DIRS to the chips.yaml revisions its headers describe "
        "(ESP-IDF's components/soc/CMakeLists.txt names the Kconfig option that selects it; "
        f"mapped: {known}; hw_ver_beta* and a one-revision chip's hw_ver_mp are read by rule), "
        "or leave them out with " + " ".join(f"--skip-revision-folder {key}" for key in sorted(unknown))
    )
