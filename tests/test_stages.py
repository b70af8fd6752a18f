"""The make-like stage runner: what re-runs after a change, a failure or a deleted output."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from stages import (
    Outcome,
    Runner,
    Stage,
    StageFailed,
    code_closure,
    file_digest,
    format_table,
    run_command,
    stop_children,
    tree_digest,
)


class Pipeline:
    """Two independent chains (a -> ab, b) plus c depending on both; each stage copies text files.

    ``calls`` counts actions, so a test can tell ran from skipped without trusting the runner.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[str] = []
        self.broken: set[str] = set()
        (root / "in").mkdir(parents=True, exist_ok=True)
        for name in ("a", "b"):
            path = root / "in" / f"{name}.txt"
            if not path.exists():
                path.write_text(f"{name}\n")
        self.code = root / "tool.py"
        if not self.code.exists():
            self.code.write_text("VERSION = 1\n")

    def _copy(self, name: str, sources: list[Path]) -> Stage:
        out = self.root / "out" / f"{name}.txt"

        def action() -> Outcome:
            self.calls.append(name)
            if name in self.broken:
                raise StageFailed(f"{name} is broken")
            out.parent.mkdir(exist_ok=True)
            out.write_text("".join(p.read_text() for p in sources))
            return Outcome(f"wrote {out.name}", f"{len(sources)} parts")

        return Stage(
            name,
            action,
            inputs={p.name: (lambda p=p: file_digest(p)) for p in sources if p.parent.name == "in"},
            code=[self.code],
            outputs={"text": lambda: file_digest(out)},
        )

    def stages(self) -> list[Stage]:
        inp, out = self.root / "in", self.root / "out"
        a = self._copy("a", [inp / "a.txt"])
        ab = self._copy("ab", [out / "a.txt"])
        ab.deps = ("a",)
        b = self._copy("b", [inp / "b.txt"])
        c = self._copy("c", [out / "ab.txt", out / "b.txt"])
        c.deps = ("ab", "b")
        return [a, ab, b, c]

    def run(self) -> dict[str, str]:
        self.calls.clear()
        runner = Runner(self.stages(), self.root / "stamps", repo=self.root)
        results = runner.run(runner.select([]), say=lambda _line: None)
        return {r.stage: r.status for r in results}


def test_second_run_skips_everything(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    assert pipeline.run() == {"a": "ran", "ab": "ran", "b": "ran", "c": "ran"}
    assert pipeline.run() == {"a": "skipped", "ab": "skipped", "b": "skipped", "c": "skipped"}
    assert pipeline.calls == []


def test_changed_input_reruns_that_stage_and_its_dependants_only(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    pipeline.run()
    (tmp_path / "in" / "a.txt").write_text("A changed\n")
    assert pipeline.run() == {"a": "ran", "ab": "ran", "b": "skipped", "c": "ran"}
    assert (tmp_path / "out" / "c.txt").read_text() == "A changed\nb\n"


def test_unchanged_output_stops_the_cascade(tmp_path: Path) -> None:
    """A stage that re-runs but writes the same bytes leaves its dependants alone."""
    pipeline = Pipeline(tmp_path)
    pipeline.run()
    (tmp_path / "in" / "a.txt").write_text("a\n")  # same content, new mtime
    (tmp_path / "stamps" / "a.json").unlink()
    assert pipeline.run() == {"a": "ran", "ab": "skipped", "b": "skipped", "c": "skipped"}


def test_changed_code_reruns(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    pipeline.run()
    pipeline.code.write_text("VERSION = 2\n")
    assert set(pipeline.run().values()) == {"ran"}


def test_deleted_or_edited_output_is_rebuilt(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    pipeline.run()
    (tmp_path / "out" / "b.txt").unlink()
    (tmp_path / "out" / "ab.txt").write_text("truncated")
    statuses = pipeline.run()
    assert statuses == {"a": "skipped", "ab": "ran", "b": "ran", "c": "skipped"}
    assert (tmp_path / "out" / "c.txt").read_text() == "a\nb\n"


def test_failure_blocks_dependants_not_independent_stages_and_a_rerun_resumes(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    pipeline.broken = {"ab"}
    assert pipeline.run() == {"a": "ran", "ab": "failed", "b": "ran", "c": "blocked"}
    assert not (tmp_path / "stamps" / "ab.json").exists()
    pipeline.broken = set()
    assert pipeline.run() == {"a": "skipped", "ab": "ran", "b": "skipped", "c": "ran"}
    assert pipeline.calls == ["ab", "c"]


def test_a_stage_that_writes_nothing_fails(tmp_path: Path) -> None:
    stage = Stage(
        "lazy", lambda: Outcome("did nothing"), outputs={"file": lambda: file_digest(tmp_path / "x")}
    )
    results = Runner([stage], tmp_path / "stamps").run(["lazy"], say=lambda _line: None)
    assert results[0].status == "failed"
    assert "without writing its file" in results[0].summary


def test_an_unexpected_exception_is_one_failed_stage(tmp_path: Path) -> None:
    def explode() -> Outcome:
        raise KeyError("bug")

    ok = Stage("ok", lambda: Outcome("fine"))
    results = Runner([Stage("bad", explode), ok], tmp_path / "stamps").run(["bad", "ok"], say=lambda _l: None)
    assert [(r.stage, r.status) for r in results] == [("bad", "failed"), ("ok", "ran")]
    assert "KeyError" in results[0].summary


def test_plan_says_why_and_changes_nothing(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    runner = Runner(pipeline.stages(), tmp_path / "stamps", repo=tmp_path)
    plan = {row.stage: (row.status, row.summary) for row in runner.plan(runner.select([]))}
    assert plan["a"] == ("run", "not built yet")
    assert plan["c"][0] == "run"
    assert not (tmp_path / "stamps").exists()
    pipeline.run()
    (tmp_path / "in" / "b.txt").write_text("B\n")
    pipeline.code.write_text("VERSION = 3\n")
    runner = Runner(pipeline.stages(), tmp_path / "stamps", repo=tmp_path)
    plan = {row.stage: (row.status, row.summary) for row in runner.plan(runner.select(["b"]))}
    assert plan == {"b": ("run", "inputs changed: b.txt; code changed: tool.py")}
    plan = {row.stage: (row.status, row.summary) for row in runner.plan(runner.select([]))}
    assert plan["c"] == ("run", "after ab and 1 more")
    assert "a" in format_table(runner.plan(["a"]))


def test_select_takes_names_prefixes_and_globs_with_their_dependencies(tmp_path: Path) -> None:
    runner = Runner(Pipeline(tmp_path).stages(), tmp_path / "stamps")
    assert runner.select(["ab"]) == ["a", "ab"]
    assert runner.select(["c"]) == ["a", "ab", "b", "c"]
    assert runner.select(["a*"]) == ["a", "ab"]
    with pytest.raises(ValueError, match="no stage matches zz; stages: a, ab, b, c"):
        runner.select(["zz"])


def test_unknown_dependency_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="depends on unknown stage"):
        Runner([Stage("x", lambda: Outcome(""), deps=("nope",))], tmp_path)


def test_background_stages_run_beside_the_foreground(tmp_path: Path) -> None:
    """Two background stages and a foreground one must all be running at once to pass the barrier."""
    barrier = threading.Barrier(3, timeout=10)

    def meet() -> Outcome:
        barrier.wait()
        return Outcome("met")

    stages = [Stage(f"bg{i}", meet, background=True) for i in range(2)] + [Stage("fg", meet)]
    results = Runner(stages, tmp_path / "stamps").run(["bg0", "bg1", "fg"], say=lambda _l: None)
    assert {r.stage: r.status for r in results} == {"bg0": "ran", "bg1": "ran", "fg": "ran"}


def test_code_closure_follows_project_imports_and_data(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("import os\nimport helper\nfrom chip_vocab import chips\n")
    (tmp_path / "helper.py").write_text("from json import dumps\n")
    (tmp_path / "chip_vocab.py").write_text("")
    (tmp_path / "chips.yaml").write_text("chips: {}\n")
    (tmp_path / "unused.py").write_text("")
    found = [p.name for p in code_closure(tmp_path / "main.py", repo=tmp_path)]
    assert found == ["chip_vocab.py", "chips.yaml", "helper.py", "main.py"]


def test_tree_digest_sees_content_and_names_not_git(tmp_path: Path) -> None:
    (tmp_path / "t" / ".git").mkdir(parents=True)
    (tmp_path / "t" / "x.txt").write_text("1")
    first = tree_digest(tmp_path / "t")
    (tmp_path / "t" / ".git" / "HEAD").write_text("ref")
    assert tree_digest(tmp_path / "t") == first
    (tmp_path / "t" / "x.txt").write_text("2")
    assert tree_digest(tmp_path / "t") != first
    assert tree_digest(tmp_path / "missing") is None


def test_run_command_shows_keeps_and_returns_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = "import sys; print('one'); print('progress\\r50%\\rdone', file=sys.stderr); print('summary')"
    log = tmp_path / "logs" / "x.log"
    done = run_command([sys.executable, "-c", script], log, prefix="[bg] ")
    assert done.returncode == 0
    assert done.stdout == ["one", "summary"]
    assert done.stderr == ["done"]
    shown = capfd.readouterr()
    assert "[bg] summary" in shown.out
    assert "[bg] done" in shown.err
    assert "summary" in log.read_text()


def test_an_interrupted_run_keeps_what_finished_and_resumes(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    stages = pipeline.stages()
    original = stages[1].action

    def interrupted() -> Outcome:
        raise KeyboardInterrupt

    stages[1].action = interrupted  # "ab", after "a" finished
    runner = Runner(stages, tmp_path / "stamps", repo=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        runner.run(runner.select([]), say=lambda _line: None)
    assert (tmp_path / "stamps" / "a.json").is_file()
    assert not (tmp_path / "stamps" / "ab.json").exists()
    stages[1].action = original
    results = runner.run(runner.select([]), say=lambda _line: None)
    assert {r.stage: r.status for r in results} == {"a": "skipped", "ab": "ran", "b": "ran", "c": "ran"}


def _start_child(tmp_path: Path, script: str) -> tuple[threading.Thread, int]:
    """Run ``script`` through run_command in a thread, as a stage would; return it and the child's pid."""
    pid_file = tmp_path / "child.pid"
    code = "\n".join(
        [
            "import os, pathlib, signal, time",
            script,
            f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))",
            "time.sleep(60)",
        ]
    )
    thread = threading.Thread(target=run_command, args=([sys.executable, "-c", code], tmp_path / "child.log"))
    thread.start()
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    return thread, int(pid_file.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_children_stops_a_running_child(tmp_path: Path) -> None:
    thread, pid = _start_child(tmp_path, "")
    stop_children()
    thread.join(timeout=20)
    assert not thread.is_alive() and not _alive(pid)


def test_a_second_interrupt_while_stopping_kills_without_a_traceback(tmp_path: Path) -> None:
    """A child that ignores SIGTERM would hold the stop for 30 s; a second Ctrl-C kills it at once."""
    thread, pid = _start_child(tmp_path, "signal.signal(signal.SIGTERM, signal.SIG_IGN)")

    def second_ctrl_c(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, second_ctrl_c)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        started = time.monotonic()
        stop_children()  # must not raise
        waited = time.monotonic() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    thread.join(timeout=20)
    assert waited < 20
    assert not thread.is_alive() and not _alive(pid)
