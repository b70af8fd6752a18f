"""Follow a store that is refreshed under a running server, one whole table version at a time.

LanceDB (read_consistency_interval None, its default) keeps an opened table at the version it opened,
and the engine's file index, row counts and register caches are built from that table. So a call
that takes ``watch.engine()`` once answers wholly from one version. A daemon thread checks the
store's latest version every ``interval`` seconds; when it moved, it builds a complete new engine
off to the side and only then swaps the reference, so callers see the old corpus until the new one
is whole, never a mix and never an error in between. A store that disappears or stops opening makes
every call a clear error naming the path; the same thread recovers once the store is back.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from object_store import describe_failure, is_remote
from search import SearchEngine
from store import StoreError, open_store

DEFAULT_REFRESH_SECONDS = 5.0


class StoreUnavailable(Exception):
    """No usable store right now; the message says where and how to get one."""


def latest_version(db_uri: str) -> int:
    """The store's newest committed table version (manifest and metadata, not the data)."""
    return open_store(db_uri).version


class StoreWatch:
    """The current engine, replaced whole when another process commits a new table version."""

    def __init__(
        self,
        db_uri: str,
        open_engine: Callable[..., SearchEngine],
        interval: float = DEFAULT_REFRESH_SECONDS,
    ) -> None:
        self.db_uri = db_uri
        self.interval = interval
        self._open = open_engine
        self._engine: SearchEngine | None = None
        self._problem: str | None = None
        self._lock = threading.Lock()  # one rebuild at a time; readers never take it
        self._stop = threading.Event()
        self.refresh()

    def engine(self) -> SearchEngine:
        """The engine to answer one call from; take it once per call so the call sees one version."""
        engine, problem = self._engine, self._problem
        if problem is not None or engine is None:
            raise StoreUnavailable(problem or f"documentation store unavailable at {self.db_uri}")
        return engine

    def refresh(self) -> bool:
        """Check the store once; rebuild and swap when its version moved. True when it swapped."""
        with self._lock:
            try:
                version = latest_version(self.db_uri)
                if (
                    self._engine is not None
                    and self._problem is None
                    and version == self._engine.table.version
                ):
                    return False
                engine = self._open(self.db_uri, reuse=self._engine)
            except StoreError as error:
                retry = f"; the server retries every {self.interval:g} s" if is_remote(self.db_uri) else ""
                self._fail(f"documentation store unavailable: {error}{retry}")
                return False
            except Exception as error:  # a deleted or corrupt store raises whatever lance meets first
                if is_remote(self.db_uri):
                    self._fail(
                        f"documentation store unavailable: {describe_failure(self.db_uri, error)}; the "
                        f"server retries every {self.interval:g} s"
                    )
                    return False
                self._fail(
                    f"documentation store at {self.db_uri} cannot be read ({type(error).__name__}: "
                    f"{str(error)[:200]}); rebuild it with embed_and_store.py or restore it; the server "
                    f"picks it up again within {self.interval:g} s"
                )
                return False
            self._engine, self._problem = engine, None
            print(
                f"store_watch: serving table version {engine.table.version} of {self.db_uri}", file=sys.stderr
            )
            return True

    def _fail(self, message: str) -> None:
        if message != self._problem:
            print(f"store_watch: {message}", file=sys.stderr)
        self._problem = message

    def check_after_failure(self) -> str | None:
        """After a call failed unexpectedly: the store's problem if it has one now (else None)."""
        self.refresh()
        return self._problem

    def start(self) -> None:
        """Poll in a daemon thread; the process exits without waiting for it."""
        threading.Thread(target=self._run, name="store-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()
