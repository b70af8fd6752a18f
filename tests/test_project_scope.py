"""Project scope: detection from real idf.py-generated files, and the real server over stdio using it."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult
from test_search import build_fixture_store

import project_scope
from project_scope import Scope, apply, detect

REPO = Path(__file__).resolve().parent.parent
PROJECTS = Path(__file__).with_name("fixtures") / "projects"


def scope_of(directory: Path | str) -> Scope:
    return detect(str(directory), "test", REPO)


def copy_project(name: str, to: Path) -> Path:
    return Path(shutil.copytree(PROJECTS / name, to))


def notes(scope: Scope) -> str:
    return " | ".join(scope.notes)


# -- detection from the real generated files -------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "chip", "revision", "revision_range"),
    [
        ("esp32c3", "esp32c3", None, "v0.3 to v1.99"),
        ("esp32c6", "esp32c6", None, "v0.0 to v0.99"),
        ("esp32", "esp32", None, "v0.0 to v3.99"),
        ("esp32p4-v1.3", "esp32p4", "v1.3", "v1.0 to v1.99"),
        ("esp32p4-mainline", "esp32p4", "mainline", "v3.1 to v3.99"),
    ],
)
def test_each_generated_project_gives_its_chip_revision_and_release(
    fixture: str, chip: str, revision: str | None, revision_range: str
) -> None:
    scope = scope_of(PROJECTS / fixture)
    assert (scope.chip, scope.revision, scope.revision_range) == (chip, revision, revision_range)
    assert (scope.chip_from, scope.revision_from) == ("sdkconfig", "sdkconfig")
    assert scope.projects == (".",) and scope.directory == str(PROJECTS / fixture)
    # the build's git describe is exact; the sdkconfig header (6.2.0 on that master) disagrees, said so
    assert scope.idf_version == "v6.1-dev-6734-g102122904ad-dirt" and scope.idf_series == "v6.1-dev"
    assert scope.idf_version_from == "build/project_description.json"
    assert "sdkconfig says 6.2.0" in notes(scope)


def test_each_source_file_fills_in_when_the_others_are_absent(tmp_path: Path) -> None:
    project = copy_project("esp32", tmp_path / "p")
    (project / "build" / "project_description.json").unlink()
    scope = scope_of(project)
    assert (scope.idf_version, scope.idf_series, scope.idf_version_from) == ("6.2.0", "v6.2", "sdkconfig")
    assert "dependencies.lock" not in notes(scope)  # 6.2.0 there too: nothing to report
    (project / "sdkconfig").unlink()
    scope = scope_of(project)
    assert (scope.chip, scope.idf_version, scope.idf_version_from) == (None, "6.2.0", "dependencies.lock")
    assert "no target set yet (no CONFIG_IDF_TARGET in sdkconfig or sdkconfig.defaults)" in notes(scope)

    p4 = copy_project("esp32p4-v1.3", tmp_path / "p4")
    (p4 / "sdkconfig").unlink()
    scope = scope_of(p4)  # the build's record of target and revision range
    assert (scope.chip, scope.chip_from, scope.revision) == (
        "esp32p4",
        "build/project_description.json",
        "v1.3",
    )
    shutil.rmtree(p4 / "build")
    (p4 / "sdkconfig.defaults").write_text(
        'CONFIG_IDF_TARGET="esp32p4"\nCONFIG_ESP32P4_SELECTS_REV_LESS_V3=y\n'
    )
    scope = scope_of(p4)  # only the defaults are left
    assert (scope.chip, scope.chip_from, scope.revision) == ("esp32p4", "sdkconfig.defaults", "v1.3")


def test_a_changed_sdkconfig_is_read_again_on_the_next_call(tmp_path: Path) -> None:
    project = copy_project("esp32c3", tmp_path / "p")
    assert scope_of(project).chip == "esp32c3"
    sdkconfig = project / "sdkconfig"
    before = sdkconfig.stat().st_mtime_ns
    # what idf.py set-target esp32c6 changes: the target lines (the size stays the same here)
    sdkconfig.write_text(sdkconfig.read_text().replace("esp32c3", "esp32c6").replace("ESP32C3", "ESP32C6"))
    os.utime(sdkconfig, ns=(before + 10**9, before + 10**9))
    scope = scope_of(project)
    assert scope.chip == "esp32c6"
    assert "sdkconfig says 'esp32c6' but build/project_description.json says 'esp32c3'" in notes(scope)


def test_the_p4_revision_rule_follows_the_range_and_reports_a_span(tmp_path: Path) -> None:
    project = copy_project("esp32p4-mainline", tmp_path / "p")
    sdkconfig = project / "sdkconfig"
    text = sdkconfig.read_text()
    sdkconfig.write_text(text.replace("CONFIG_ESP_REV_MIN_FULL=301", "CONFIG_ESP_REV_MIN_FULL=100"))
    scope = scope_of(project)
    assert scope.revision is None and scope.revision_range == "v1.0 to v3.99"
    assert "across the v1.3 and mainline manuals; no revision default" in notes(scope)
    assert "build/project_description.json records v3.1 to v3.99; using sdkconfig" in notes(scope)


def test_projects_with_different_targets_are_reported_not_guessed() -> None:
    scope = scope_of(PROJECTS)
    assert scope.chip is None and scope.revision is None
    assert scope.projects == ("esp32", "esp32c3", "esp32c6", "esp32p4-mainline", "esp32p4-v1.3")
    assert f"5 projects under {PROJECTS}, with different targets" in notes(scope)
    assert "esp32c3 (esp32c3)" in notes(scope) and "pass project_dir=" in notes(scope)


def test_projects_sharing_a_target_give_it(tmp_path: Path) -> None:
    copy_project("esp32c3", tmp_path / "apps" / "a")
    copy_project("esp32c3", tmp_path / "apps" / "b")
    scope = scope_of(tmp_path)
    assert scope.chip == "esp32c3" and scope.projects == ("apps/a", "apps/b")
    assert "2 projects under" in notes(scope) and "all esp32c3" in notes(scope)


def test_projects_sharing_a_chip_but_not_a_p4_revision_give_no_revision(tmp_path: Path) -> None:
    copy_project("esp32p4-v1.3", tmp_path / "old-board")
    copy_project("esp32p4-mainline", tmp_path / "new-board")
    scope = scope_of(tmp_path)
    assert (scope.chip, scope.revision) == ("esp32p4", None)
    assert "differ in esp32p4 revision (mainline, v1.3); no revision default" in notes(scope)


def test_projects_without_a_target_are_reported(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        shutil.copy(PROJECTS / "esp32c3" / "CMakeLists.txt", tmp_path / name)
    scope = scope_of(tmp_path)
    assert scope.chip is None and scope.projects == ("a", "b")
    assert "2 projects under" in notes(scope) and "none with a target set" in notes(scope)


def test_the_search_skips_build_dirs_symlinks_and_deep_folders(tmp_path: Path) -> None:
    outside = copy_project("esp32p4-v1.3", tmp_path / "outside")
    root = tmp_path / "root"
    for skipped in ("build", "managed_components", ".git"):
        copy_project("esp32c3", root / skipped / "p")
    copy_project("esp32c6", root / "a" / "b" / "c" / "too-deep")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    scope = scope_of(root)
    assert scope.projects == () and scope.chip is None
    assert "no ESP-IDF project" in notes(scope)
    # the search below is cached by folder mtimes: a project added or removed shows on the next call
    copy_project("esp32c6", root / "a" / "b" / "found")
    assert scope_of(root).projects == ("a/b/found",)
    shutil.rmtree(root / "a" / "b" / "found")
    assert scope_of(root).projects == ()


def test_a_file_symlinked_out_of_the_project_is_not_read(tmp_path: Path) -> None:
    project = copy_project("esp32c3", tmp_path / "p")
    (project / "sdkconfig").unlink()
    shutil.rmtree(project / "build")
    (project / "sdkconfig").symlink_to(PROJECTS / "esp32p4-v1.3" / "sdkconfig")
    scope = scope_of(project)
    assert scope.chip is None and "sdkconfig is a symlink out of the project; not read" in notes(scope)


def test_the_search_stops_at_its_entry_limit(tmp_path: Path) -> None:
    for i in range(project_scope.MAX_ENTRIES + 5):
        (tmp_path / f"d{i:05d}").mkdir()
    scope = scope_of(tmp_path)
    assert f"stopped looking for projects after {project_scope.MAX_ENTRIES}" in notes(scope)


# -- bad input: a note, never an exception ---------------------------------------------------------------


def test_bad_directories_get_a_note(tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    cases: list[tuple[Any, str]] = [
        (str(tmp_path / "missing"), "does not exist"),
        (str(a_file), "is a file, not a directory"),
        (str(tmp_path), "no ESP-IDF project"),
        ("", "must be a directory path"),
        (42, "must be a directory path"),
        ("/tmp/\x00evil", "not a usable path"),
        ("/tmp/line\nbreak", "not a usable path"),
        ("x" * 5000, "not a usable path"),
    ]
    for raw, expected in cases:
        scope = detect(raw, "test", REPO)
        assert scope.chip is None and expected in notes(scope), (raw, scope)


def test_dot_dot_and_special_characters_resolve_with_a_note(tmp_path: Path) -> None:
    odd = tmp_path / "my proj $(touch pwned) ü;'"
    copy_project("esp32c3", odd)
    scope = scope_of(str(odd / ".." / odd.name))
    assert scope.chip == "esp32c3" and scope.directory == str(odd)
    assert "resolves to" in notes(scope)
    assert not (tmp_path / "pwned").exists()
    relative = detect("tests/fixtures/projects/esp32c6", "test", REPO)
    assert relative.chip == "esp32c6" and "is relative" in notes(relative)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'CONFIG_IDF_TARGET="esp32c3"\n' + b"# padding\n" * 120_000, "is larger than 1024 KiB; not read"),
        (b'\x7fELF\x00\x01\x02CONFIG_IDF_TARGET="esp32c3"', "is a binary file; not read"),
        (b'CONFIG_IDF_TARGET="esp32c3\xff"\n', "is not UTF-8 text"),
        (b'CONFIG_IDF_TARGET="linux"\n', "names target 'linux', which is not a chip documented here"),
        (b'CONFIG_IDF_TARGET="esp32c7"\n', "names target 'esp32c7'"),
    ],
)
def test_bad_sdkconfig_files_get_a_note(tmp_path: Path, content: bytes, expected: str) -> None:
    (tmp_path / "sdkconfig").write_bytes(content)
    scope = scope_of(tmp_path)
    assert scope.chip is None and expected in notes(scope)


def test_nonsense_revision_values_are_ignored_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "sdkconfig").write_text(
        'CONFIG_IDF_TARGET="esp32p4"\nCONFIG_ESP_REV_MIN_FULL='
        + "9" * 5000
        + "\nCONFIG_ESP_REV_MAX_FULL=\u00b2\n"
    )
    scope = scope_of(tmp_path)
    assert (scope.chip, scope.revision, scope.revision_range) == ("esp32p4", None, None)
    assert "states no ESP32-P4 revision range" in notes(scope)


def test_broken_build_files_get_a_note_and_the_rest_still_counts(tmp_path: Path) -> None:
    project = copy_project("esp32", tmp_path / "p")
    (project / "build" / "project_description.json").write_text('{"target": ')
    (project / "dependencies.lock").write_text("dependencies: [unclosed\n")
    scope = scope_of(project)
    assert scope.chip == "esp32" and scope.idf_version == "6.2.0"
    assert "build/project_description.json is not valid JSON" in notes(scope)
    assert "dependencies.lock is not valid YAML" in notes(scope)


# -- applying the scope to one call ---------------------------------------------------------------------


def test_an_explicit_argument_always_wins_and_any_turns_the_scope_off() -> None:
    p4 = scope_of(PROJECTS / "esp32p4-v1.3")
    scoped = apply(p4, None, None)
    assert (scoped.chip, scoped.revision, scoped.from_scope) == ("esp32p4", "v1.3", True)
    assert scoped.envelope["applied"] == {"chip": "esp32p4", "revision": "v1.3"}
    assert scoped.envelope["chip_from"] == "sdkconfig" and scoped.envelope["project_dir_from"] == "test"
    assert (apply(p4, None, "mainline").chip, apply(p4, None, "mainline").revision) == ("esp32p4", "mainline")
    assert (apply(p4, "ESP32-P4", None).revision, apply(p4, "esp32c3", None).revision) == ("v1.3", None)
    off = apply(p4, "any", None)
    assert (off.chip, off.revision, off.from_scope) == (None, None, False)
    assert "chip='any' turned the project scope off" in off.envelope["how"]
    assert apply(p4, None, "any").revision is None


# -- a real ESP-IDF checkout ---------------------------------------------------------------------------------


def test_the_p4_rule_matches_the_esp_idf_kconfig() -> None:
    idf = os.environ.get("IDF_PATH")
    if not idf:
        pytest.skip(
            "IDF_PATH is not set: point it at an ESP-IDF checkout to check the ESP32-P4 revision rule"
        )
    kconfig = (Path(idf) / "components/esp_hw_support/port/esp32p4/Kconfig.hw_support").read_text()
    less_v3_max = re.search(r"default (\d+) if ESP32P4_SELECTS_REV_LESS_V3", kconfig)
    v3_max = re.search(r"default (\d+) if !ESP32P4_SELECTS_REV_LESS_V3", kconfig)
    v3_mins = [
        int(v) for v in re.findall(r"config ESP32P4_REV_MIN_(\d+)\s+bool[^\n]*\n\s+depends on !", kconfig)
    ]
    v3_mins += [int(v) for v in re.findall(r"config ESP32P4_REV_MIN_(\d+)\s+depends on !", kconfig)]
    assert less_v3_max and v3_max and v3_mins
    assert int(less_v3_max.group(1)) < project_scope.P4_MAINLINE_FROM <= min(v3_mins)
    cmake = (Path(idf) / "components/soc/CMakeLists.txt").read_text()
    selects_hw_ver1 = (
        r"if\(CONFIG_ESP32P4_SELECTS_REV_LESS_V3\)\s+"
        r'list\(APPEND includes "\$\{target_folder\}/register/hw_ver1"'
    )
    assert re.search(selects_hw_ver1, cmake)


# -- the real server over stdio -----------------------------------------------------------------------------

Call = Callable[[str, dict[str, Any]], CallToolResult]


@asynccontextmanager
async def connected(
    command: list[str], cwd: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=cwd, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fixture_store(tmp_path_factory.getbasetemp() / "search-store")


@pytest.fixture(scope="module")
def c6_server(store: Path) -> Iterator[tuple[ClientSession, BlockingPortal]]:
    """The server started inside the esp32c6 project, as a client launched in it would."""
    command = [sys.executable, str(REPO / "mcp_server.py"), "--db", str(store)]
    env = {k: v for k, v in os.environ.items() if k != project_scope.PROJECT_ENV_VAR}
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(command, PROJECTS / "esp32c6", env)) as session,
    ):
        yield session, portal


@pytest.fixture
def call(c6_server: tuple[ClientSession, BlockingPortal]) -> Call:
    session, portal = c6_server
    return lambda name, arguments: portal.call(session.call_tool, name, arguments)


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_a_bare_search_answers_for_the_project_the_server_started_in(call: Call) -> None:
    answer = ok(call("esp32_docs_search", {"query": "I2C SCL low period register address"}))
    scope = answer["scope"]
    assert answer["filters"] == {"chip": "esp32c6"} and scope["applied"] == {
        "chip": "esp32c6",
        "revision": None,
    }
    assert scope["project_dir"] == str(PROJECTS / "esp32c6") and scope["chip_from"] == "sdkconfig"
    assert scope["project_dir_from"].startswith("the server's working directory")
    assert answer["results"] and all("esp32c6" in r["chips"] for r in answer["results"])


def test_project_dir_scopes_one_call_to_another_project(call: Call) -> None:
    answer = ok(
        call(
            "esp32_docs_search",
            {"query": "ECDSA interrupt enable", "project_dir": str(PROJECTS / "esp32p4-v1.3")},
        )
    )
    assert answer["filters"] == {"chip": "esp32p4", "revision": "v1.3"}
    assert answer["scope"]["project_dir_from"] == "project_dir argument"
    assert answer["results"]
    for result in answer["results"]:
        assert "esp32p4" in result["chips"] and (not result["revisions"] or "v1.3" in result["revisions"])
    # the next call without project_dir is back on the server's project: no session state
    assert ok(call("esp32_docs_search", {"query": "ECDSA"}))["filters"] == {"chip": "esp32c6"}


def test_explicit_chip_wins_and_any_searches_every_chip(call: Call) -> None:
    explicit = ok(call("esp32_docs_search", {"query": "UART clock divider", "chip": "esp32c3"}))
    assert (
        explicit["filters"] == {"chip": "esp32c3"} and explicit["scope"]["how"] == "chip given by the caller"
    )
    everything = ok(call("esp32_docs_search", {"query": "UART clock divider", "chip": "any"}))
    assert everything["filters"] == {} and everything["scope"]["applied"]["chip"] is None
    assert {chip for r in everything["results"] for chip in r["chips"]} - {"esp32c6"}


def test_find_symbol_register_and_read_take_the_scope(call: Call) -> None:
    p4 = str(PROJECTS / "esp32p4-v1.3")
    found = ok(call("esp32_docs_find_symbol", {"symbol": "ECDSA_INT_ENA_REG", "project_dir": p4}))
    assert found["filters"] == {"chip": "esp32p4"} and found["results"]
    register = ok(call("esp32_docs_register", {"name": "ECDSA_INT_ENA_REG", "project_dir": p4}))
    assert (register["chip"], register["revision"]) == ("esp32p4", "v1.3")
    assert register["scope"]["applied"] == {"chip": "esp32p4", "revision": "v1.3"}
    mainline = ok(
        call("esp32_docs_register", {"name": "ECDSA_INT_ENA_REG", "project_dir": p4, "revision": "mainline"})
    )
    assert mainline["revision"] == "mainline" and len(mainline["fields"]) == 5
    c3 = ok(
        call("esp32_docs_register", {"name": "UART_CLKDIV_REG", "project_dir": str(PROJECTS / "esp32c3")})
    )
    assert c3["address_absolute"] == "0x60000014"
    # a hit found with chip='any' reads back even though the project's chip has no row for it
    hit = ok(call("esp32_docs_search", {"query": "UART clock divider", "chip": "esp32c3"}))["results"][0]
    read = ok(call("esp32_docs_read", {"file_path": hit["file_path"], "chunk_index": hit["chunk_index"]}))
    assert read["chunks"] and read["scope"]["applied"]["chip"] is None
    assert "no chunk" in read["scope"]["how"] and "esp32c6" in read["scope"]["how"]


def test_register_without_a_chip_or_scope_names_the_valid_chips(call: Call) -> None:
    result = call("esp32_docs_register", {"name": "UART_CLKDIV_REG", "chip": "any"})
    assert (
        result.is_error
        and "chip is required" in result.content[0].text
        and "esp32c3" in result.content[0].text
    )


def test_the_scope_tool_reports_values_sources_and_overrides(call: Call) -> None:
    own = ok(call("esp32_docs_scope", {}))
    assert (own["chip"], own["revision_range"], own["idf_series"]) == ("esp32c6", "v0.0 to v0.99", "v6.1-dev")
    assert own["idf_version_from"] == "build/project_description.json" and "chip='any'" in own["override"]
    p4 = ok(call("esp32_docs_scope", {"project_dir": str(PROJECTS / "esp32p4-v1.3")}))
    assert (p4["chip"], p4["revision"], p4["revision_from"]) == ("esp32p4", "v1.3", "sdkconfig")
    assert p4["idf_series"] == "v6.1-dev"


def test_bad_project_dirs_give_a_note_never_a_failed_search(call: Call, tmp_path: Path) -> None:
    binary, empty = tmp_path / "binary", tmp_path / "empty"
    binary.mkdir()
    empty.mkdir()
    (binary / "sdkconfig").write_bytes(b"\x00" * 10)
    for project_dir, expected in [
        (str(tmp_path / "missing"), "does not exist"),
        (str(PROJECTS / "SOURCE.md"), "is a file"),
        (str(empty), "no ESP-IDF project"),
        (str(binary), "binary"),
        ("../../etc/\x07bell", "not a usable path"),
    ]:
        answer = ok(call("esp32_docs_search", {"query": "UART", "project_dir": project_dir}))
        assert answer["filters"] == {} and answer["results"]
        assert any(expected in note for note in answer["scope"]["notes"]), (project_dir, answer["scope"])


def test_scope_chip_with_a_revision_it_lacks_says_where_the_chip_came_from(call: Call) -> None:
    result = call("esp32_docs_search", {"query": "UART", "revision": "v1.3"})
    text = result.content[0].text
    assert (
        result.is_error and "unknown revision 'v1.3' for esp32c6" in text and "from the project scope" in text
    )


def test_registered_as_the_readme_says_the_server_keeps_the_clients_directory(store: Path) -> None:
    """README: uv run --project <clone> <clone>/mcp_server.py, launched in the user's project."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: the README's registration runs the server with uv")
    command = [uv, "run", "--project", str(REPO), str(REPO / "mcp_server.py"), "--db", str(store)]
    env = {k: v for k, v in os.environ.items() if k not in (project_scope.PROJECT_ENV_VAR, "VIRTUAL_ENV")}

    async def bare_search() -> dict[str, Any]:
        async with connected(command, PROJECTS / "esp32c6", env) as session:
            return ok(
                await session.call_tool("esp32_docs_search", {"query": "I2C SCL low period register address"})
            )

    with start_blocking_portal() as portal:
        answer = portal.call(bare_search)
    assert answer["filters"] == {"chip": "esp32c6"} and answer["scope"]["project_dir"] == str(
        PROJECTS / "esp32c6"
    )


def test_project_option_and_environment_set_the_default(store: Path) -> None:
    command = [sys.executable, str(REPO / "mcp_server.py"), "--db", str(store)]
    env = {**os.environ, project_scope.PROJECT_ENV_VAR: str(PROJECTS / "esp32p4-v1.3")}

    async def scopes() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connected(command, REPO, env) as session:
            from_env = ok(await session.call_tool("esp32_docs_scope", {}))
        async with connected([*command, "--project", str(PROJECTS / "esp32")], REPO, env) as session:
            from_option = ok(await session.call_tool("esp32_docs_scope", {}))
        return from_env, from_option

    with start_blocking_portal() as portal:
        from_env, from_option = portal.call(scopes)
    assert (from_env["chip"], from_env["revision"], from_env["project_dir_from"]) == (
        "esp32p4",
        "v1.3",
        "$ESP32_DOCS_PROJECT",
    )
    assert (from_option["chip"], from_option["project_dir_from"]) == ("esp32", "--project")
