"""sources.py against real git repositories made in a temp folder (no network)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import sources
from releases import release_series
from sources import DocsTooling, GitMissingError, SourcesError, load_pins, parse_chip_selection, resolve

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
MQTT_PATH = "components/mqtt/esp-mqtt"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **GIT_ENV},
    )
    return done.stdout.strip()


def commit_all(repo: Path, message: str, gitlink: tuple[str, str] | None = None) -> str:
    """Commit every file, plus a submodule entry (path, commit) whose folder is not there."""
    git(repo, "add", "-A")
    if gitlink:
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{gitlink[1]},{gitlink[0]}")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def new_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "config", "uploadpack.allowFilter", "true")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


class Upstreams:
    """A TRM repo, an esp-mqtt repo and an ESP-IDF repo with a tag, a gitlink and two commits."""

    def __init__(self, root: Path) -> None:
        self.trm = new_repo(root / "trm", {"ESP32/01-PCNT__EN.tex": "\\chapter{PCNT}\n"})
        self.trm_commit = commit_all(self.trm, "trm")
        self.mqtt = new_repo(root / "esp-mqtt", {"CMakeLists.txt": "# mqtt\n"})
        self.mqtt_commit = commit_all(self.mqtt, "mqtt")
        self.idf = new_repo(
            root / "esp-idf",
            {
                "docs/conf_common.py": "languages = ['en']\nidf_targets = ['esp32', 'esp32c3']\n",
                "components/soc/esp32/include/soc/soc.h": "#define DR_REG_X_BASE 0x3ff00000\n",
                ".gitmodules": f'[submodule "{MQTT_PATH}"]\n\tpath = {MQTT_PATH}\n\turl = ../esp-mqtt\n',
            },
        )
        self.release_commit = commit_all(self.idf, "release", gitlink=(MQTT_PATH, self.mqtt_commit))
        git(self.idf, "tag", "v9.9")
        (self.idf / "docs" / "conf_common.py").write_text("idf_targets = ['esp32', 'esp32c3', 'esp32c6']\n")
        git(self.idf, "commit", "-q", "-am", "master")
        self.master_commit = git(self.idf, "rev-parse", "HEAD")
        self.master_describe = f"v9.9-1-g{self.master_commit[:7]}"


@pytest.fixture
def upstreams(tmp_path: Path) -> Upstreams:
    return Upstreams(tmp_path / "upstream")


def write_pins(path: Path, up: Upstreams, **release_overrides: dict[str, object]) -> Path:
    releases: dict[str, dict[str, object]] = {
        "master": {
            "commit": up.master_commit,
            "describe": up.master_describe,
            "targets": ["esp32", "esp32c3", "esp32c6"],
        },
        "v9.9": {
            "commit": up.release_commit,
            "describe": "v9.9",
            "targets": ["esp32", "esp32c3"],
            "submodules": [{"path": MQTT_PATH, "url": str(up.mqtt), "commit": up.mqtt_commit}],
        },
    }
    for name, changes in release_overrides.items():
        releases[name] = {**releases[name], **changes}
    document = {
        "trm": {"url": str(up.trm), "commit": up.trm_commit},
        "idf": {"url": f"file://{up.idf}", "releases": releases},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_fetch_into_the_cache_then_reuse_it_offline(tmp_path: Path, upstreams: Upstreams) -> None:
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams))
    cache = tmp_path / "cache"
    found, skipped = resolve(pins, cache=cache, trm_path=None, idf_paths=[], mode="fetch")
    assert skipped == []
    assert found.trm.commit == upstreams.trm_commit
    assert (found.trm.path / "ESP32" / "01-PCNT__EN.tex").is_file()
    assert found.releases["master"].version == upstreams.master_describe
    release = found.releases["v9.9"]
    assert release.version == "v9.9"
    assert git(release.path / MQTT_PATH, "rev-parse", "HEAD") == upstreams.mqtt_commit
    assert any("fetched submodule" in note for note in release.notes)
    assert sources.doc_targets(found.releases["master"].path) == ["esp32", "esp32c3", "esp32c6"]

    shutil.move(upstreams.idf.parent, tmp_path / "gone")  # no upstream any more: nothing may fetch
    again, _ = resolve(pins, cache=cache, trm_path=None, idf_paths=[], mode="offline")
    assert again.releases["v9.9"].path == release.path
    assert again.releases["v9.9"].missing_submodules == []


def test_plan_mode_fetches_nothing(tmp_path: Path, upstreams: Upstreams) -> None:
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams))
    found, _ = resolve(pins, cache=tmp_path / "cache", trm_path=None, idf_paths=[], mode="plan")
    assert found.trm.pending.startswith("fetch ")
    assert not found.releases["master"].ready
    assert not (tmp_path / "cache").exists()


def test_a_pinned_commit_that_cannot_be_fetched_is_a_clear_error(
    tmp_path: Path, upstreams: Upstreams
) -> None:
    path = write_pins(tmp_path / "sources.yaml", upstreams)
    document = yaml.safe_load(path.read_text())
    document["trm"]["commit"] = "0" * 40
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(SourcesError, match=f"cannot fetch pinned commit {'0' * 40} from"):
        resolve(load_pins(path), cache=tmp_path / "cache", trm_path=None, idf_paths=[], mode="fetch")

    path = write_pins(tmp_path / "sources.yaml", upstreams, master={"commit": "1" * 40})
    with pytest.raises(SourcesError, match=f"pinned commit {'1' * 40} of ESP-IDF master is not in"):
        resolve(load_pins(path), cache=tmp_path / "cache", trm_path=upstreams.trm, idf_paths=[], mode="fetch")


def test_offline_uses_given_checkouts_matched_by_commit(tmp_path: Path, upstreams: Upstreams) -> None:
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams))
    old = tmp_path / "idf-old"
    new = tmp_path / "idf-new"
    other = tmp_path / "idf-other"
    for path, commit in [(old, upstreams.release_commit), (new, upstreams.master_commit)]:
        git(tmp_path, "clone", "-q", str(upstreams.idf), str(path))
        git(path, "-c", "advice.detachedHead=false", "checkout", "-q", commit)
    git(tmp_path, "clone", "-q", str(upstreams.mqtt), str(old / MQTT_PATH))
    git(tmp_path, "clone", "-q", str(upstreams.trm), str(other))  # a git tree, but not ESP-IDF
    found, skipped = resolve(
        pins,
        cache=tmp_path / "cache",
        trm_path=upstreams.trm,
        idf_paths=[(other, "IDF_PATH"), (new, "IDF_PATHS"), (old, "IDF_PATHS")],
        mode="offline",
    )
    assert found.trm.origin == "TRM_PATH"
    assert {name: tree.path for name, tree in found.releases.items()} == {"master": new, "v9.9": old}
    assert skipped == [
        f"IDF_PATH {other} is at {upstreams.trm_commit[:12]}, which no release in sources.yaml pins"
    ]
    assert not (tmp_path / "cache").exists()


def test_offline_without_a_checkout_says_how_to_get_one(tmp_path: Path, upstreams: Upstreams) -> None:
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams))
    with pytest.raises(
        SourcesError, match=r"no checkout of ESP-IDF master .*--idf-path, IDF_PATH or IDF_PATHS"
    ):
        resolve(pins, cache=tmp_path / "cache", trm_path=upstreams.trm, idf_paths=[], mode="offline")


def test_a_plain_trm_copy_is_verified_by_its_source_note(tmp_path: Path, upstreams: Upstreams) -> None:
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams))
    copy = tmp_path / "trm-copy"
    shutil.copytree(upstreams.trm, copy, ignore=shutil.ignore_patterns(".git"))
    (copy / "SOURCE.md").write_text(f"- Commit: {upstreams.trm_commit} (2026-08-21)\n")
    found, _ = resolve(pins, cache=tmp_path / "c", trm_path=copy, idf_paths=[], releases=[], mode="offline")
    assert found.trm.commit == upstreams.trm_commit
    assert found.releases == {}
    (copy / "SOURCE.md").write_text(f"- Commit: {'a' * 40}\n")
    with pytest.raises(SourcesError, match=f"is at {'a' * 40}, but sources.yaml pins {upstreams.trm_commit}"):
        resolve(pins, cache=tmp_path / "c", trm_path=copy, idf_paths=[], releases=[], mode="offline")
    (copy / "SOURCE.md").unlink()
    with pytest.raises(SourcesError, match=r"neither a git checkout nor a copy whose SOURCE\.md"):
        resolve(pins, cache=tmp_path / "c", trm_path=copy, idf_paths=[], releases=[], mode="offline")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"describe": "v9.8"}, "describes itself as 'v9.9', sources.yaml expects 'v9.8'"),
        ({"targets": ["esp32"]}, "lists targets esp32, esp32c3; sources.yaml pins esp32; make them the same"),
        (
            {"submodules": [{"path": MQTT_PATH, "url": "x", "commit": "2" * 40}]},
            f"pins {MQTT_PATH} at 222222222222 but ESP-IDF v9.9 records",
        ),
    ],
)
def test_a_pin_that_disagrees_with_the_tree_is_refused(
    tmp_path: Path, upstreams: Upstreams, override: dict[str, object], message: str
) -> None:
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams, **{"v9.9": override}))
    with pytest.raises(SourcesError, match=message):
        resolve(
            pins, cache=tmp_path / "c", trm_path=upstreams.trm, idf_paths=[], releases=["v9.9"], mode="fetch"
        )


def test_offline_missing_submodule_is_reported_with_the_command(
    tmp_path: Path, upstreams: Upstreams, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_pins(tmp_path / "sources.yaml", upstreams)
    checkout = tmp_path / "idf-old"
    git(tmp_path, "clone", "-q", str(upstreams.idf), str(checkout))
    git(checkout, "-c", "advice.detachedHead=false", "checkout", "-q", upstreams.release_commit)
    found, _ = resolve(
        load_pins(path),
        cache=tmp_path / "c",
        trm_path=upstreams.trm,
        idf_paths=[(checkout, "IDF_PATH")],
        releases=["v9.9"],
        mode="offline",
    )
    assert [sub.path for sub in found.releases["v9.9"].missing_submodules] == [MQTT_PATH]
    assert f"git -C {checkout} submodule update --init {MQTT_PATH}" in found.releases["v9.9"].notes[-1]

    monkeypatch.setenv("TRM_PATH", str(upstreams.trm))
    monkeypatch.setenv("IDF_PATH", str(checkout))
    monkeypatch.delenv("IDF_PATHS", raising=False)
    argv = ["--sources", str(path), "--cache-dir", str(tmp_path / "c"), "--releases", "v9.9", "--offline"]
    assert sources.main(argv) == 1
    assert f"idf v9.9: {MQTT_PATH} at {upstreams.mqtt_commit[:12]}" in capsys.readouterr().err


def test_pins_file_errors_name_the_valid_values(tmp_path: Path, upstreams: Upstreams) -> None:
    path = write_pins(tmp_path / "sources.yaml", upstreams, master={"targets": ["esp32", "esp99"]})
    with pytest.raises(SourcesError, match=r"unknown chip\(s\) esp99; valid: esp32, esp32s2"):
        load_pins(path)
    path = write_pins(tmp_path / "sources.yaml", upstreams, master={"commit": "abc123"})
    with pytest.raises(SourcesError, match="must be a full 40-hex commit, got 'abc123'"):
        load_pins(path)
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams))
    with pytest.raises(SourcesError, match=r"unknown release.* v1; sources\.yaml pins: master, v9\.9"):
        resolve(pins, cache=tmp_path, trm_path=upstreams.trm, idf_paths=[], releases=["v1"], mode="plan")


def test_the_repository_pins_are_well_formed() -> None:
    pins = load_pins()
    assert "master" in pins.releases
    series = [release_series(release.describe) for release in pins.releases.values()]
    assert len(series) == len(set(series)), "one build per series"
    for release in pins.releases.values():
        assert {"esp32", "esp32s3"} <= set(release.targets)
        assert release.docs_tooling is not None and release.docs_tooling.packages


def test_docs_tooling_is_read_and_checked(tmp_path: Path, upstreams: Upstreams) -> None:
    tooling = {"python": "python3.11", "packages": ["esp-docs~=1.1.0", "Pillow<10"]}
    pins = load_pins(write_pins(tmp_path / "ok.yaml", upstreams, master={"docs_tooling": tooling}))
    assert pins.releases["master"].docs_tooling == DocsTooling("python3.11", ("esp-docs~=1.1.0", "Pillow<10"))
    assert pins.releases["v9.9"].docs_tooling is None
    bad = {"python": "python3.11", "packages": ["esp-docs; rm -rf /"]}
    with pytest.raises(SourcesError, match=r"not a pip requirement such as 'esp-docs~=1.1.0'"):
        load_pins(write_pins(tmp_path / "bad.yaml", upstreams, master={"docs_tooling": bad}))
    with pytest.raises(SourcesError, match=r"must name an interpreter"):
        load_pins(
            write_pins(
                tmp_path / "py.yaml", upstreams, master={"docs_tooling": {**tooling, "python": "py $(x)"}}
            )
        )


def test_chip_selection_per_release(tmp_path: Path, upstreams: Upstreams) -> None:
    pins = load_pins(write_pins(tmp_path / "sources.yaml", upstreams))
    everything = parse_chip_selection(None, pins)
    assert everything.wants("v9.9", "esp32c3") and everything.wants("master", "esp32c6")
    plain = parse_chip_selection("esp32", pins)
    assert plain.wants("master", "esp32") and not plain.wants("master", "esp32c3")
    one = parse_chip_selection("master:esp32,master:esp32c6", pins)
    assert one.wants("master", "esp32c6") and not one.wants("v9.9", "esp32")
    with pytest.raises(
        SourcesError,
        match=r"v9\.9:esp32c6: ESP-IDF v9\.9 has no docs target esp32c6; its targets: esp32, esp32c3",
    ):
        parse_chip_selection("v9.9:esp32c6", pins)
    with pytest.raises(SourcesError, match=r"v1 is not a pinned release; pinned: master, v9\.9"):
        parse_chip_selection("v1:esp32", pins)
    with pytest.raises(SourcesError, match=r"esp99 not a pinned docs target; valid: esp32, esp32c3, esp32c6"):
        parse_chip_selection("esp99", pins)


def test_files_whose_blobs_are_absent_are_hidden_not_edits(tmp_path: Path) -> None:
    origin = new_repo(tmp_path / "origin", {"big.bin": "large\n", "kept.txt": "kept\n", "a.txt": "a\n"})
    commit_all(origin, "files")
    blob = git(origin, "rev-parse", "HEAD:big.bin")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(origin), str(clone))
    (origin / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # a mirror without that blob
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "HEAD"], capture_output=True, check=False)
    assert not (clone / "big.bin").exists()
    (clone / "kept.txt").unlink()  # deleted by someone: its content exists, so it stays visible
    notes = sources.hide_absent_blobs(clone)
    assert notes == ["1 file(s) whose contents the object store lacks marked skip-worktree (big.bin)"]
    assert git(clone, "status", "--porcelain") == "D kept.txt"
    assert sources.hide_absent_blobs(clone) == []


def test_missing_git_is_named_with_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GitMissingError, match="apt-get install git"):
        sources.git("--version")
