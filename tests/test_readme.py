"""The README's and justfile's commands work as written on a fresh clone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import mcp_server

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
JUST = Path(sys.executable).with_name("just")  # rust-just, installed with the project


def shell_lines() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_just_comes_with_the_project_and_every_readme_recipe_exists() -> None:
    assert JUST.is_file(), "rust-just is a dev dependency: uv sync installs .venv/bin/just"
    recipes = set(
        subprocess.run(
            [JUST, "--summary"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.split()
    )
    named = re.findall(r"\buv run just ([a-z][a-z0-9-]*)", README)
    assert named and set(named) <= recipes, set(named) - recipes
    # plain `just` is on no fresh machine's PATH: every command says `uv run just`
    assert not [line for line in shell_lines() if line.startswith("just ")]
    assert not re.search(r"(?<!uv run )`just (?!comes)[a-z]", README)


def test_the_team_server_token_is_read_from_where_it_is_written() -> None:
    written = re.findall(r"> (\S+token)\)", README)
    read = re.findall(r"\$\(cat (\S+)\)", README) + re.findall(r"--token-file (\S+)", README)
    assert written == ["~/.esp32-docs-token"] and read and set(read) == set(written)


def test_transport_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        mcp_server.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--transport {stdio,http} stdio: one client that starts the server" in help_text


def test_the_justfile_says_what_the_demo_first_start_does() -> None:
    justfile = (REPO / "justfile").read_text(encoding="utf-8")
    demo = justfile.split("\ndemo:")[0].rsplit("\n", 1)[-1]
    assert "first start embeds" in demo and "waits silently" not in demo
