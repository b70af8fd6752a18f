"""The chunk store as every command opens it: where it is (``--db``, ``$ESP32_DOCS_DB``), the
``chunks`` table and the model metadata its vectors were built with.

embed_and_store.py writes the store; the server, the evaluation and the checks only read it, and
open it through here so that none of them depends on the build stage.
"""

from __future__ import annotations

import os
from pathlib import Path

from lancedb_client import lancedb
from object_store import describe_failure, is_remote
from schema import FACT_FIELDS
from term_stats import has_term_stats

DB_ENV_VAR = "ESP32_DOCS_DB"
DEFAULT_DB_URI = "./esp_docs.lancedb"
TABLE_NAME = "chunks"
MODEL_ID_KEY = b"esp32_docs.model_id"
VECTOR_DIM_KEY = b"esp32_docs.vector_dim"
BUILD_HINT = (
    "build one with `uv run embed_and_store.py CHUNKS.jsonl --doc-type trm --source-repo PATH --db {db}` "
    "or run `uv run mcp_server.py --demo`"
)


class StoreError(Exception):
    """The store cannot be used as asked: missing, built with another model, or not ours."""


def resolve_db_uri(cli_value: str | None) -> str:
    """--db wins, then $ESP32_DOCS_DB, then ./esp_docs.lancedb (the same order for every command)."""
    return cli_value or os.environ.get(DB_ENV_VAR) or DEFAULT_DB_URI


def _is_local(db_uri: str) -> bool:
    return "://" not in db_uri


def store_model_id(table: lancedb.table.Table) -> str:
    """The embedding model the store's vectors came from (its schema metadata)."""
    value = (table.schema.metadata or {}).get(MODEL_ID_KEY)
    if not value:
        raise StoreError(
            f"table {TABLE_NAME!r} has no {MODEL_ID_KEY.decode()} metadata: not an esp32-docs store"
        )
    return value.decode()


def store_vector_dim(table: lancedb.table.Table) -> int:
    """The vector width recorded with the model id; checked against the vector column itself."""
    value = (table.schema.metadata or {}).get(VECTOR_DIM_KEY)
    if not value:
        raise StoreError(
            f"table {TABLE_NAME!r} has no {VECTOR_DIM_KEY.decode()} metadata: not an esp32-docs store"
        )
    dim = int(value)
    column_dim = table.schema.field("vector").type.list_size
    if column_dim != dim:
        raise StoreError(f"store metadata says {dim}-d vectors but the vector column holds {column_dim}-d")
    return dim


def open_store(db_uri: str, model_id: str | None = None) -> lancedb.table.Table:
    """Open the ``chunks`` table for reading; with ``model_id``, refuse a store built with another model."""
    if _is_local(db_uri) and not Path(db_uri).is_dir():
        raise StoreError(f"no store at {db_uri}; {BUILD_HINT.format(db=db_uri)}")
    try:
        table = lancedb.connect(db_uri).open_table(TABLE_NAME)
        built_with = store_model_id(table)
        rows = table.count_rows()
    except StoreError:
        raise
    except (ValueError, FileNotFoundError, OSError, RuntimeError) as error:
        if is_remote(db_uri):  # LanceDB's object-store errors are Rust debug dumps: say what failed
            problem = describe_failure(db_uri, error)
            raise StoreError(f"cannot open the store at {db_uri}: {problem}") from error
        if not isinstance(error, (ValueError, FileNotFoundError)):
            raise  # a local store that opens but cannot be read: the caller reports it as such
        raise StoreError(f"no store at {db_uri} ({error}); {BUILD_HINT.format(db=db_uri)}") from error
    store_vector_dim(table)
    if rows == 0:
        raise StoreError(f"the store at {db_uri} holds no chunks; {BUILD_HINT.format(db=db_uri)}")
    if model_id is not None and model_id != built_with:
        raise StoreError(
            f"the store at {db_uri} was built with embedding model {built_with!r}, not {model_id!r}; "
            f"query it with {built_with!r} or rebuild it into another --db with {model_id!r}"
        )
    if "releases" not in table.schema.names:
        raise StoreError(
            f"the store at {db_uri} predates the ESP-IDF release axis (docs/releases.md); migrate it by "
            "running any embed_and_store.py into it once (it adds the release columns and re-embeds "
            "nothing already cached), or rebuild it"
        )
    if "url" not in table.schema.names:
        raise StoreError(
            f"the store at {db_uri} predates follow-up references (no url column); rebuild it, or "
            "re-run each corpus's ingest and embed_and_store.py into it (it adds the column and "
            "re-embeds nothing already cached)"
        )
    if "release_chips" not in table.schema.names or table.count_rows("release_chips IS NULL"):
        raise StoreError(
            f"the store at {db_uri} predates the (release, chip) builds each row comes from, so a "
            "release filter could answer with another chip's docs; re-run the ingests, dedup and "
            "embeds into it (`just rebuild`: only changed text is re-embedded)"
        )
    missing = [name for name in FACT_FIELDS if name not in table.schema.names]
    if missing or table.count_rows("kind IS NULL") or not has_term_stats(lancedb.connect(db_uri)):
        raise StoreError(
            f"the store at {db_uri} predates the passage kinds and term statistics the ranking reads; "
            "re-run the ingests and embeds into it (`just rebuild`: only changed text is re-embedded)"
        )
    return table
