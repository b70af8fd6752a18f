"""Make-like stages: skip work whose inputs and code are unchanged, resume where a run stopped.

A stage's key hashes its parameters (pinned commits, chip, store path), the content of its inputs,
the source of the code it runs (the script and every project module it imports) and the outputs of
the stages it depends on. A stamp (JSON in the work dir's ``stamps/``) records that key and a
fingerprint of each output; a stage is skipped only when both still match, so an edited,
truncated or deleted output is rebuilt as well. A failed stage writes no stamp: a re-run resumes
there, its dependants are blocked, and stages that do not depend on it run and keep their stamps.

Background stages (the docs builds, ~40 minutes each and parallel by themselves) run in threads
beside the others; everything else runs one at a time in order, so the embeds never write the
store at once.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent
# Data files a module reads at import or run time: a change to them is a change to that code.
MODULE_DATA = {"chip_vocab.py": ("chips.yaml",)}
READ_BLOCK = 1 << 20


class StageFailed(Exception):
    """A stage could not produce its outputs; the message is the summary line the run shows."""


# --------------------------------------------------------------------------------------------
# Fingerprints


def file_digest(path: Path) -> str | None:
    """sha256 of a file's bytes, or None when it is missing."""
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def tree_digest(root: Path, skip: Iterable[str] = (".git",)) -> str | None:
    """sha256 over every file's relative path and content under ``root`` (None when it is missing)."""
    if not root.is_dir():
        return None
    skipped = set(skip)
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skipped)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update((file_digest(path) or "").encode())
    return digest.hexdigest()


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def code_closure(script: Path, repo: Path = REPO) -> list[Path]:
    """The script, every project module it imports (transitively) and their data files, sorted."""
    seen: set[Path] = set()
    pending = [script]
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        pending.extend(repo / data for data in MODULE_DATA.get(path.name, ()))
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            pending.extend(repo / f"{name.split('.')[0]}.py" for name in names)
    return sorted(seen)


# --------------------------------------------------------------------------------------------
# Stages


@dataclass
class Outcome:
    """What a stage reports: one summary line and its headline count (``12,109 chunks``)."""

    summary: str
    count: str = ""


@dataclass(eq=False)
class Stage:
    """One step of the pipeline and everything its key is made of.

    ``inputs`` and ``outputs`` map a label to a fingerprint function returning None for "missing".
    """

    name: str
    action: Callable[[], Outcome]
    plan: str = ""  # what running it means, for --dry-run
    deps: tuple[str, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    inputs: Mapping[str, Callable[[], str | None]] = field(default_factory=dict)
    code: Sequence[Path] = ()
    outputs: Mapping[str, Callable[[], str | None]] = field(default_factory=dict)
    background: bool = False


@dataclass
class Result:
    stage: str
    status: str  # ran, skipped, failed, blocked; run or skip in a plan
    seconds: float = 0.0
    count: str = ""
    summary: str = ""


@dataclass
class _Key:
    key: str
    parts: dict[str, dict[str, str]]


def _relative(path: Path, repo: Path) -> str:
    try:
        return path.relative_to(repo).as_posix()
    except ValueError:
        return str(path)


class Runner:
    """Runs stages in dependency order against their stamps in ``stamp_dir``."""

    def __init__(self, stages: Sequence[Stage], stamp_dir: Path, repo: Path = REPO) -> None:
        self.stages = {stage.name: stage for stage in stages}
        for stage in stages:
            missing = [dep for dep in stage.deps if dep not in self.stages]
            if missing:
                raise ValueError(f"stage {stage.name} depends on unknown stage(s) {', '.join(missing)}")
        self.stamp_dir = stamp_dir
        self.repo = repo
        self._code_digests: dict[Path, str | None] = {}

    # keys and stamps -----------------------------------------------------------------------------
    def _stamp_path(self, name: str) -> Path:
        return self.stamp_dir / f"{name.replace('/', '--')}.json"

    def stamp(self, name: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._stamp_path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def output_digest(self, name: str) -> str | None:
        """What a finished stage hands its dependants: its outputs' fingerprints, or its key."""
        stamp = self.stamp(name)
        if stamp is None:
            return None
        return text_digest(json.dumps(stamp["outputs"], sort_keys=True)) if stamp["outputs"] else stamp["key"]

    def _key(self, stage: Stage) -> _Key:
        code = {}
        for path in stage.code:
            if path not in self._code_digests:
                self._code_digests[path] = file_digest(path)
            code[_relative(path, self.repo)] = self._code_digests[path] or "missing"
        parts = {
            "params": dict(stage.params),
            "inputs": {label: fingerprint() or "missing" for label, fingerprint in stage.inputs.items()},
            "code": code,
            "deps": {dep: self.output_digest(dep) or "missing" for dep in stage.deps},
        }
        return _Key(text_digest(json.dumps(parts, sort_keys=True)), parts)

    def why_stale(self, stage: Stage) -> tuple[str | None, _Key]:
        """None when the stamp still holds (same key, same outputs); else the reason to run."""
        key = self._key(stage)
        stamp = self.stamp(stage.name)
        if stamp is None:
            return "not built yet", key
        if stamp["key"] != key.key:
            changed = []
            for group, values in key.parts.items():
                old = stamp["parts"].get(group, {})
                names = sorted(n for n in set(values) | set(old) if values.get(n) != old.get(n))
                if names:
                    changed.append(f"{group} changed: {', '.join(names)}")
            return "; ".join(changed) or "key changed", key
        for label, fingerprint in stage.outputs.items():
            now = fingerprint()
            if now != stamp["outputs"].get(label):
                return f"output {label} {'missing' if now is None else 'changed since it was made'}", key
        return None, key

    def _write_stamp(self, stage: Stage, key: _Key, outputs: dict[str, str], result: Result) -> None:
        self.stamp_dir.mkdir(parents=True, exist_ok=True)
        record = {
            "stage": stage.name,
            "key": key.key,
            "parts": key.parts,
            "outputs": outputs,
            "count": result.count,
            "summary": result.summary,
            "seconds": round(result.seconds, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        path = self._stamp_path(stage.name)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        temporary.replace(path)

    # order -----------------------------------------------------------------------------------------
    def select(self, patterns: Sequence[str]) -> list[str]:
        """Stage names matching any pattern (fnmatch) or prefix, plus everything they depend on."""
        wanted = [
            name
            for name in self.stages
            if not patterns
            or any(fnmatchcase(name, p) or name.startswith(p.rstrip("/") + "/") for p in patterns)
        ]
        if not wanted:
            raise ValueError(f"no stage matches {', '.join(patterns)}; stages: {', '.join(self.stages)}")
        chosen: set[str] = set()
        pending = list(wanted)
        while pending:
            name = pending.pop()
            if name not in chosen:
                chosen.add(name)
                pending.extend(self.stages[name].deps)
        return self._ordered(chosen)

    def _ordered(self, chosen: set[str]) -> list[str]:
        """``chosen`` in the given stage order, moved only where a dependency must come first."""
        ordered: list[str] = []
        placed: set[str] = set()

        def place(name: str, trail: tuple[str, ...]) -> None:
            if name in placed:
                return
            if name in trail:
                raise ValueError(f"dependency cycle: {' -> '.join((*trail, name))}")
            for dep in self.stages[name].deps:
                place(dep, (*trail, name))
            placed.add(name)
            ordered.append(name)

        for name in self.stages:
            if name in chosen:
                place(name, ())
        return ordered

    # plan ------------------------------------------------------------------------------------------
    def plan(self, names: Sequence[str]) -> list[Result]:
        """What a run would do, without doing it: stages after one that runs run too."""
        runs: set[str] = set()
        rows = []
        for name in names:
            stage = self.stages[name]
            after = [dep for dep in stage.deps if dep in runs]
            if after:
                reason: str | None = f"after {after[0]}" + (
                    f" and {len(after) - 1} more" if len(after) > 1 else ""
                )
            else:
                reason, _ = self.why_stale(stage)
            stamp = self.stamp(name) or {}
            if reason is None:
                rows.append(
                    Result(name, "skip", count=stamp.get("count", ""), summary=stamp.get("summary", ""))
                )
            else:
                runs.add(name)
                rows.append(Result(name, "run", summary=f"{stage.plan} ({reason})" if stage.plan else reason))
        return rows

    # run -------------------------------------------------------------------------------------------
    def _execute(self, stage: Stage, say: Callable[[str], None]) -> Result:
        started = time.monotonic()
        reason, key = self.why_stale(stage)
        if reason is None:
            stamp = self.stamp(stage.name) or {}
            return Result(
                stage.name, "skipped", time.monotonic() - started, stamp.get("count", ""), "up to date"
            )
        say(f"── {stage.name}: {stage.plan or 'running'} ({reason})")
        try:
            outcome = stage.action()
            outputs = {label: fingerprint() for label, fingerprint in stage.outputs.items()}
            missing = [label for label, digest in outputs.items() if digest is None]
            if missing:
                raise StageFailed(f"finished without writing its {', '.join(missing)}")
        except StageFailed as error:
            return Result(stage.name, "failed", time.monotonic() - started, summary=str(error))
        except Exception as error:  # a bug in one stage must not lose the others' results
            traceback.print_exc()
            return Result(
                stage.name, "failed", time.monotonic() - started, summary=f"{type(error).__name__}: {error}"
            )
        result = Result(stage.name, "ran", time.monotonic() - started, outcome.count, outcome.summary)
        self._write_stamp(stage, key, {k: v for k, v in outputs.items() if v is not None}, result)
        return result

    def run(self, names: Sequence[str], say: Callable[[str], None] = print) -> list[Result]:
        """Run the named stages (a dependency-closed selection, see ``select``) and report each.

        Background stages start in threads as soon as their dependencies are done; the others run
        one at a time in the given order, so the order is also the priority.
        """
        results: dict[str, Result] = {}
        done: queue.Queue[Result] = queue.Queue()
        running: set[str] = set()

        def finish(result: Result) -> None:
            results[result.stage] = result
            running.discard(result.stage)
            line = f"── {result.stage}: {result.status} in {format_seconds(result.seconds)}"
            say(line + (f" — {result.summary}" if result.summary else ""))

        def status(name: str) -> str:
            return results[name].status if name in results else ""

        while True:
            while not done.empty():
                finish(done.get())
            ready = []
            for name in names:
                if name in results or name in running:
                    continue
                deps = self.stages[name].deps
                bad = [dep for dep in deps if status(dep) in ("failed", "blocked")]
                if bad:
                    finish(Result(name, "blocked", summary=f"not run: {bad[0]} did not finish"))
                elif all(status(dep) in ("ran", "skipped") for dep in deps):
                    ready.append(self.stages[name])
            for stage in [s for s in ready if s.background]:
                running.add(stage.name)
                threading.Thread(target=lambda s=stage: done.put(self._execute(s, say)), daemon=True).start()
            foreground = [s for s in ready if not s.background]
            if foreground:
                finish(self._execute(foreground[0], say))
            elif running:
                finish(done.get())
            else:
                return [results[name] for name in names if name in results]


# --------------------------------------------------------------------------------------------
# Commands and reports


@dataclass
class CommandResult:
    returncode: int
    stdout: list[str]
    stderr: list[str]


_CHILDREN: set[subprocess.Popen[bytes]] = set()
_CHILDREN_LOCK = threading.Lock()


def _pump(
    stream: IO[bytes], console: IO[bytes], log: IO[bytes], lines: list[str] | None, prefix: bytes
) -> None:
    """Copy a child's stream to the log as is, and to the console raw or, with a prefix, by line."""
    pending = b""
    for block in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
        log.write(block)
        log.flush()
        if not prefix:
            console.write(block)
            console.flush()
        pending += block
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if prefix:
                console.write(prefix + line.split(b"\r")[-1] + b"\n")
                console.flush()
            lines.append(line.split(b"\r")[-1].decode("utf-8", "replace"))
    if pending:
        lines.append(pending.split(b"\r")[-1].decode("utf-8", "replace"))


def run_command(
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    prefix: str = "",
) -> CommandResult:
    """Run a child with its output shown live and kept in ``log_path``; stdout lines are returned.

    With ``prefix`` (a background stage) only whole lines are shown, each prefixed, so progress
    bars of two stages running at once do not mangle each other.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"$ {' '.join(map(str, argv))}\n".encode())
        log.flush()
        child = subprocess.Popen(
            list(map(str, argv)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,  # its own process group, so stop_children reaches its children too
        )
        with _CHILDREN_LOCK:
            _CHILDREN.add(child)
        stdout_lines: list[str] = []
        stderr_lines: list[str] = []
        tag = prefix.encode()
        pumps = [
            threading.Thread(target=_pump, args=(child.stdout, sys.stdout.buffer, log, stdout_lines, tag)),
            threading.Thread(target=_pump, args=(child.stderr, sys.stderr.buffer, log, stderr_lines, tag)),
        ]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        returncode = child.wait()
        with _CHILDREN_LOCK:
            _CHILDREN.discard(child)
    return CommandResult(returncode, stdout_lines, stderr_lines)


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, sig)


def stop_children() -> None:
    """Stop every child still running and its own children (after Ctrl-C), so none outlives the run."""
    with _CHILDREN_LOCK:
        children = list(_CHILDREN)
    for child in children:
        _signal_group(child, signal.SIGTERM)
    try:
        for child in children:
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
    except KeyboardInterrupt:
        # a second Ctrl-C: the user will not wait for a clean stop, and must not get a traceback
        for child in children:
            _signal_group(child, signal.SIGKILL)


def last_line(lines: Sequence[str]) -> str:
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def failure_line(done: CommandResult) -> str:
    """Why a child failed, in one line: its last "error" line, else its summary, else anything."""
    errors = [line for line in done.stderr if line.lstrip().lower().startswith("error")]
    return last_line(errors) or last_line(done.stdout) or last_line(done.stderr) or "no output"


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def format_table(results: Sequence[Result], width: int = 100) -> str:
    """The closing table: one line per stage with status, time, count and summary."""
    name_width = max([len("stage"), *(len(r.stage) for r in results)])
    header = f"{'stage':<{name_width}}  {'status':<7}  {'time':>7}  {'count':<16}  summary"
    lines = [header, "-" * len(header)]
    for r in results:
        summary = r.summary if len(r.summary) <= width else r.summary[: width - 1] + "…"
        time_cell = format_seconds(r.seconds) if r.status not in ("run", "skip", "blocked") else ""
        lines.append(f"{r.stage:<{name_width}}  {r.status:<7}  {time_cell:>7}  {r.count:<16}  {summary}")
    return "\n".join(lines)
