"""A serving process's heap: few malloc arenas, and freed memory handed back after one-off builds.

glibc gives a thread that meets contention an arena of its own, up to eight per core. LanceDB's
reader threads, onnxruntime and the MCP SDK's worker threads all allocate and free large transient
buffers (a flat vector scan, the columns read for the store index, a chip's register rows), and
memory freed in one arena is kept by it, so resident size follows the number of arenas rather than
what is live. Two arenas and a trim after each large build keep a server on the full store under
600 MiB (measured with memory_bench.py and bench.py, docs/team-server.md). Elsewhere (not glibc)
both calls do nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

# mallopt's parameter for the arena limit (glibc malloc.h); two arenas suit the two-core boxes served
M_ARENA_MAX = -8
SERVER_ARENAS = 2


@functools.cache
def _glibc() -> Any | None:
    """glibc's handle when this process runs on it (Linux with glibc), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_arenas(count: int = SERVER_ARENAS) -> bool:
    """Cap the arenas threads created from now on may use; True when the allocator took it."""
    libc = _glibc()
    return bool(libc and libc.mallopt(M_ARENA_MAX, count))


def trim() -> bool:
    """Return the free memory at the top of every arena to the system; True when some was."""
    libc = _glibc()
    return bool(libc and libc.malloc_trim(0))
