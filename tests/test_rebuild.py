"""rebuild.py end to end on small fixtures: a real git ESP-IDF tree in tmp, fixture XML reused from a
folder and an archive, a stand-in docs builder, and the real ingest and dedup scripts."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import lancedb
import pytest
import yaml

import rebuild
from embed_and_store import ROW_KEY
from sources import Release, Tree

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_REVISION = "102122904ad"  # the revision the fixture pages link to
CHIPS = ["esp32", "esp32c3", "esp32c6"]
INGEST_STAGES = ["dedup-idf", "dedup-src", "ingest-trm"]

FAKE_BUILDER = """#!/usr/bin/env bash
# Stand-in for build_idf_docs.sh: writes the fixture's pages as CHIP's build, except for $FAIL_CHIPS.
failed=0
for arg in "$@"; do
    case "$arg" in -*|[0-9]*|/*) continue ;; esac
    case " $FAIL_CHIPS " in
        *" $arg "*) echo "$arg: FAILED, 0 pages written (minimum 1)"; failed=1; continue ;;
    esac
    out="$IDF_PATH/docs/_build/en/$arg/xml"
    mkdir -p "$out"
    cp -r "$FAKE_XML"/. "$out"
    upper="ESP32-$(echo "${arg#esp32}" | tr a-z A-Z)"
    find "$out" -name '*.xml' -exec sed -i -e "s/ESP32-C3/$upper/g" -e "s/esp32c3/$arg/g" {} +
    echo "$arg: 3 pages written in 0 min"
done
exit $failed
"""


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.invalid"}
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def relinked_copy(source: Path, dest: Path, revision: str) -> Path:
    """The fixture build as if built at ``revision`` (its GitHub links say so)."""
    shutil.copytree(source, dest)
    for page in dest.rglob("*.xml"):
        page.write_text(page.read_text().replace(FIXTURE_REVISION, revision))
    return dest


class World:
    """Pinned sources and reusable XML for a three-chip ESP-IDF 'master' and a plain TRM copy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.idf = root / "esp-idf"
        shutil.copytree(FIXTURES / "src" / "idf", self.idf)
        (self.idf / "docs").mkdir(exist_ok=True)  # the fixture tree has docs/en sources
        (self.idf / "docs" / "conf_common.py").write_text(f"idf_targets = {CHIPS!r}\n")
        git(self.idf, "init", "-q")
        git(self.idf, "add", "-A")
        git(self.idf, "commit", "-q", "-m", "idf")
        git(self.idf, "tag", "v9.9")
        self.commit = git(self.idf, "rev-parse", "HEAD")
        self.trm = root / "trm"
        shutil.copytree(FIXTURES / "trm", self.trm)
        (self.trm / "SOURCE.md").write_text(f"- Commit: {'7' * 40}\n")
        self.sources = root / "sources.yaml"
        self.sources.write_text(
            yaml.safe_dump(
                {
                    "trm": {"url": "https://example.invalid/trm", "commit": "7" * 40},
                    "idf": {
                        "url": "https://example.invalid/esp-idf",
                        "releases": {"master": {"commit": self.commit, "describe": "v9.9", "targets": CHIPS}},
                    },
                }
            )
        )
        self.xml = root / "xml"
        c3 = relinked_copy(FIXTURES / "idf" / "esp32c3", self.xml / "esp32c3", self.commit[:11])
        (c3 / "SOURCE.md").write_text(f"- Version: v9.9\n- Commit: {self.commit}\n")
        staged = relinked_copy(FIXTURES / "idf" / "esp32", root / "staging" / "esp32", self.commit[:11])
        with tarfile.open(self.xml / "esp32.tar.xz", "w:xz") as tar:
            tar.add(staged, arcname="esp32")
        self.built_pages = relinked_copy(
            FIXTURES / "idf" / "esp32c3", root / "staging" / "c3", self.commit[:11]
        )
        self.builder = root / "fake_build_idf_docs.sh"
        self.builder.write_text(FAKE_BUILDER)
        self.work = root / "work"

    def argv(self, *extra: str) -> list[str]:
        return [
            *extra,
            "--sources",
            str(self.sources),
            "--offline",
            "--trm-path",
            str(self.trm),
            "--idf-path",
            str(self.idf),
            "--xml",
            str(self.xml),
            "--work-dir",
            str(self.work),
            "--db",
            str(self.root / "store.lancedb"),
            "--min-pages",
            "1",
        ]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    made = World(tmp_path)
    for name in ("TRM_PATH", "IDF_PATH", "IDF_PATHS", "IDF_XML_PATH", "ESP32_DOCS_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("EVAL_QUERIES", raising=False)  # a fresh clone has no dev questions
    monkeypatch.setenv("FAKE_XML", str(made.built_pages))
    monkeypatch.setenv("FAIL_CHIPS", "")
    monkeypatch.setattr(rebuild, "DOCS_BUILDER", made.builder)
    return made


def table(output: str) -> dict[str, str]:
    """{stage: status} from the closing table."""
    rows = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("ran", "skipped", "failed", "blocked", "run", "skip"):
            rows[parts[0]] = parts[1]
    return rows


def test_dry_run_prints_the_plan_and_changes_nothing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rebuild.main(world.argv("--dry-run")) == 0
    out = capsys.readouterr().out
    assert f"reuse {world.xml / 'esp32c3'}" in out
    assert f"unpack {world.xml / 'esp32.tar.xz'}" in out
    assert "build with build_idf_docs.sh" in out  # esp32c6 has no XML anywhere
    # said once, and not a failure
    assert out.count("no dev questions") == 1 and "eval: no dev questions given" in out
    plan = table(out)
    assert plan["docs/master/esp32c6"] == "run"
    assert set(plan) >= {"ingest-idf/master/esp32", "dedup-idf", "embed-idf", "validate"}
    assert "plan: 14 of 14 stages would run" in out
    assert not world.work.exists()


def test_rebuild_runs_then_skips_then_reruns_only_what_changed(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rebuild.main(world.argv(*INGEST_STAGES)) == 0
    first = table(capsys.readouterr().out)
    assert set(first.values()) == {"ran"}
    assert len(first) == 10  # 3 docs, 3 chip ingests, dedup-idf, ingest-src, dedup-src, ingest-trm
    chunks = world.work / "chunks"
    assert (chunks / "idf_chunks.jsonl").stat().st_size > 0
    assert (chunks / "chunks_master_esp32c6.jsonl").is_file()
    assert "Commit: " + world.commit in (world.work / "xml" / "master" / "esp32" / "SOURCE.md").read_text()
    built = world.idf / "docs" / "_build" / "en" / "esp32c6" / "xml"
    assert "recorded by rebuild.py" in (built / "SOURCE.md").read_text()

    assert rebuild.main(world.argv(*INGEST_STAGES)) == 0
    second = table(capsys.readouterr().out)
    assert set(second.values()) == {"skipped"}

    page = world.xml / "esp32c3" / "api-guides" / "bootloader.xml"
    page.write_text(page.read_text().replace("</document>", "<paragraph>New words.</paragraph></document>"))
    assert rebuild.main(world.argv(*INGEST_STAGES)) == 0
    third = table(capsys.readouterr().out)
    assert {stage for stage, status in third.items() if status == "ran"} == {
        "docs/master/esp32c3",
        "ingest-idf/master/esp32c3",
        "dedup-idf",
    }

    # the headers' ingest reads acronym spellings from the docs sources: an edit there re-runs it
    rst = world.idf / "docs" / "en" / "api-reference" / "peripherals" / "uart.rst"
    rst.write_text(rst.read_text() + "\nThe Pulse Counter (PCNT) counts edges.\n")
    assert rebuild.main(world.argv(*INGEST_STAGES, "--allow-dirty")) == 0  # a deliberate local edit
    fourth = table(capsys.readouterr().out)
    assert {stage for stage, status in fourth.items() if status == "ran"} == {
        "ingest-src/master",
        "dedup-src",
    }


def test_a_failed_docs_build_stops_its_chip_only_and_a_rerun_resumes(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIL_CHIPS", "esp32c6")
    assert rebuild.main(world.argv(*INGEST_STAGES)) == 1
    out = capsys.readouterr().out
    first = table(out)
    assert first["docs/master/esp32c6"] == "failed"
    assert first["ingest-idf/master/esp32c6"] == "blocked"
    assert first["dedup-idf"] == "blocked"
    assert first["ingest-idf/master/esp32c3"] == first["ingest-idf/master/esp32"] == "ran"
    assert first["dedup-src"] == first["ingest-trm"] == "ran"
    assert "esp32c6: FAILED, 0 pages written" in out
    assert "rebuild: FAILED" in out and "docs/master/esp32c6" in out.splitlines()[-1]

    monkeypatch.setenv("FAIL_CHIPS", "")
    assert rebuild.main(world.argv(*INGEST_STAGES)) == 0
    second = table(capsys.readouterr().out)
    assert {stage for stage, status in second.items() if status == "ran"} == {
        "docs/master/esp32c6",
        "ingest-idf/master/esp32c6",
        "dedup-idf",
    }


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_checkout_with_local_changes_is_refused_before_any_stage(
    world: World, capsys: pytest.CaptureFixture[str], dry_run: bool
) -> None:
    """A tracked file edited in the ESP-IDF checkout: refused up front, naming the file and the way
    out, instead of failing validate after the whole embed (its rows would say -dirty)."""
    rst = world.idf / "docs" / "en" / "api-reference" / "peripherals" / "uart.rst"
    rst.write_text(rst.read_text() + "\nA local note.\n")
    assert rebuild.main(world.argv(*(["--dry-run"] if dry_run else []))) == 2
    err = capsys.readouterr().err
    assert f"idf master at {world.idf}: 1 tracked file(s) differ from its commit {world.commit[:12]}" in err
    assert "M docs/en/api-reference/peripherals/uart.rst" in err
    assert "git -C PATH stash" in err and "--allow-dirty" in err
    assert not world.work.exists()


def test_dry_run_offline_plans_no_fetch(
    world: World, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without a checkout of the pinned release, a dry run with --offline fails as the real run
    would, rather than planning a fetch the real run never makes."""
    argv = world.argv("--dry-run", "--cache-dir", str(tmp_path / "cache"))
    at = argv.index("--idf-path")
    without_checkout = argv[:at] + argv[at + 2 :]
    assert rebuild.main(without_checkout) == 2
    captured = capsys.readouterr()
    assert "no checkout of ESP-IDF master" in captured.err and "fetch" not in captured.out
    online = [arg for arg in without_checkout if arg != "--offline"]
    assert rebuild.main(online) == 0
    assert "to fetch https://example.invalid/esp-idf (blobless)" in capsys.readouterr().out


def test_named_dev_questions_that_are_missing_are_refused_up_front(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EVAL_QUERIES", str(tmp_path / "absent.jsonl"))
    assert rebuild.main(world.argv("--dry-run")) == 2
    assert f"no file at {tmp_path / 'absent.jsonl'}" in capsys.readouterr().err
    (tmp_path / "absent.jsonl").write_text("")
    assert rebuild.main(world.argv("--dry-run")) == 0
    assert "eval " in capsys.readouterr().out


def test_unknown_chip_and_stage_are_clear_errors(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert rebuild.main(world.argv("--chips", "esp32c3,esp32zz", "--dry-run")) == 2
    assert "esp32zz not a pinned docs target; valid: esp32, esp32c3, esp32c6" in capsys.readouterr().err
    assert rebuild.main(world.argv("nonsense", "--dry-run")) == 2
    assert "no stage matches nonsense; stages: docs/master/esp32," in capsys.readouterr().err


def test_chips_option_narrows_the_plan(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert rebuild.main(world.argv("--chips", "esp32c3", "--dry-run")) == 0
    plan = table(capsys.readouterr().out)
    assert [stage for stage in plan if stage.startswith("docs/")] == ["docs/master/esp32c3"]


# --- finding XML of the pinned commit ---------------------------------------------------------


def release(commit: str = "a" * 40) -> Release:
    return Release("v9.9", commit, "v9.9", ("esp32c3",))


def test_matches_release_by_commit_prefix_or_tag() -> None:
    pinned = release("0123456789abcdef" + "0" * 24)
    assert rebuild.matches_release("0123456789a", pinned)
    assert rebuild.matches_release("v9.9", pinned)
    assert not rebuild.matches_release("012345", pinned)  # too short to be sure
    assert not rebuild.matches_release("fedcba98765", pinned)


def test_find_xml_refuses_other_commits_and_unfinished_builds(tmp_path: Path) -> None:
    pinned = release()
    checkout = tmp_path / "esp-idf"
    tree = Tree("idf v9.9", checkout, pinned.commit, "v9.9", "checkout")
    other = relinked_copy(FIXTURES / "idf" / "esp32c3", tmp_path / "xml" / "esp32c3", "b" * 11)
    partial = relinked_copy(
        FIXTURES / "idf" / "esp32c3", checkout / "docs" / "_build" / "en" / "esp32c3" / "xml", "a" * 11
    )
    source, rejected = rebuild.find_xml(pinned, tree, "esp32c3", [tmp_path / "xml"], min_pages=10)
    assert source.kind == "build"
    assert rejected == [
        f"{other}: from bbbbbbbbbbb (page links), not v9.9 (aaaaaaaaaaaa)",
        f"{partial}: an unfinished build (3 pages)",
    ]
    source, _ = rebuild.find_xml(pinned, tree, "esp32c3", [tmp_path / "xml"], min_pages=3)
    assert (source.kind, source.path) == ("copy", partial)


def test_find_xml_reads_an_archive_under_its_release_folder(tmp_path: Path) -> None:
    pinned = release()
    staged = relinked_copy(FIXTURES / "idf" / "esp32c3", tmp_path / "staged" / "esp32c3", "v9.9")
    (tmp_path / "versions" / "v9.9").mkdir(parents=True)
    archive = tmp_path / "versions" / "v9.9" / "esp32c3.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(staged, arcname="esp32c3")
    tree = Tree("idf v9.9", tmp_path / "none", pinned.commit, "", "cache", pending="fetch")
    source, rejected = rebuild.find_xml(pinned, tree, "esp32c3", [tmp_path / "versions"])
    assert (source.kind, source.path, rejected) == ("archive", archive, [])
    assert source.evidence == "archive page links: v9.9"


def test_model_option_reaches_the_embed_stages_and_names_the_valid_ids(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = rebuild.embed_argv(Path("trm.jsonl"), "trm", Path("/trm"), "db", "all-MiniLM-L6-v2-int8")
    assert argv[-2:] == ["--model", "all-MiniLM-L6-v2-int8"]
    assert "--model" not in rebuild.embed_argv(Path("trm.jsonl"), "trm", Path("/trm"), "db")
    assert rebuild.main(world.argv("--model", "all-MiniLM-L6-v2-int8", "--dry-run")) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        rebuild.main(world.argv("--model", "bge-small", "--dry-run"))
    assert exited.value.code == 2
    assert "all-MiniLM-L6-v2-int8" in capsys.readouterr().err


def test_an_embeds_output_is_read_from_the_table_as_written(tmp_path: Path) -> None:
    """A corpus's rows are its embed's output even while another corpus's rows still wait for a
    migrated column (the server refuses that store until every embed has run)."""
    missing = tmp_path / "none.lancedb"
    assert rebuild.store_digest(str(missing), "trm") is None and not missing.exists()
    row = {"doc_type": "trm", "file_path": "a", "chunk_index": 0, "content_hash": "h", "chips": ["esp32"]}
    row["revisions"] = []
    assert set(row) == set(ROW_KEY)
    db = tmp_path / "db.lancedb"
    lancedb.connect(db).create_table("chunks", [row, {**row, "doc_type": "idf", "file_path": "b"}])
    first = rebuild.store_digest(str(db), "trm")
    assert first is not None and rebuild.store_digest(str(db), "src") is None
    assert first != rebuild.store_digest(str(db), "idf")
