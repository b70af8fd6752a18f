"""Run embed_and_store's CLI with a cheap deterministic embedder, for the kill -9 / resume test.

Test-only: the crash test is about what the cache and the store hold when the process dies, which
does not depend on the model, and the real model would make each run minutes long. It implements
the same interface as embedder.Embedder and logs every text it embeds, so the test can prove that
nothing already cached is embedded again.

    python tests/store_crash_driver.py EMBED_LOG -- CHUNKS.jsonl --doc-type trm --source-repo DIR --db DIR
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import embed_and_store

SECONDS_PER_BATCH = 0.15  # slow enough that a kill lands mid-embedding


class HashEmbedder:
    """Vectors derived from the text's sha256: deterministic, normalised, no model files."""

    model_id = "test-hash-embedder"
    dimension = 8
    max_tokens = 64

    def __init__(self, log_path: Path) -> None:
        self._log_path = log_path

    def _vector(self, text: str) -> np.ndarray:
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        vector = np.frombuffer(digest[: self.dimension * 4], dtype=np.uint32).astype(np.float32) + 1.0
        return vector / np.linalg.norm(vector)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(SECONDS_PER_BATCH)
        with self._log_path.open("a", encoding="utf-8") as log:
            log.writelines(hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n" for text in texts)
        return np.stack([self._vector(text) for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(text.split()) for text in texts]


def main(argv: Sequence[str]) -> int:
    log_path, separator, *cli_args = argv
    if separator != "--":
        raise SystemExit("usage: store_crash_driver.py EMBED_LOG -- EMBED_AND_STORE_ARGS...")
    return embed_and_store.main(cli_args, embedder_factory=lambda _model: HashEmbedder(Path(log_path)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
