"""The import graph of the repository's modules, checked against the two paths it must follow.

The build path runs ingest -> dedup -> embed and the read path of a query runs analyse -> retrieve
-> fuse -> present -> search -> serve; both stand on shared foundation modules. A module may import
the foundation and the stages before it on its own path, never a later stage or the other path, so
each stage can be read, tested and changed without the ones that follow it. Tools (evaluation,
benchmarks, checks, the rebuild driver) sit on top and may import anything.

``uv run import_graph.py`` prints every module's layer and imports, then each upward edge; it exits
1 when there is one, or when a module is not placed in a layer below (a new module must be).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
FOUNDATION = "foundation"
TOOLS = "tools"
BUILD = "build"
READ = "read"

# Shared by both paths: the vocabularies, row and chunk formats, the store handle, the embedder,
# the process's heap settings.
FOUNDATION_MODULES = (
    "chip_vocab",
    "releases",
    "provenance",
    "schema",
    "chunk_format",
    "c_expressions",
    "lexicon",
    "embedder",
    "lancedb_client",
    "store",
    "project_scope",
    "http_security",
    "sources",
    "source_links",
    "object_store",
    "terms",
    "passage_kinds",
    "term_stats",
    "process_memory",
)
# Each path's stages in order; modules of one stage may not import each other's later stages.
BUILD_STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("chunk", ("chunking",)),
    (
        "parse",
        (
            "sphinx_xml",
            "latex_source",
            "latex_math",
            "trm_refs",
            "latex_parser",
            "header_scan",
            "capability_headers",
            "header_checks",
            "revision_folders",
        ),
    ),
    ("ingest", ("ingest_sphinx_xml", "ingest_trm", "ingest_source")),
    ("dedup", ("dedup_chunks",)),
    ("embed", ("embed_and_store",)),
)
READ_STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("analyse", ("query_analysis",)),
    ("register index", ("register_index",)),
    ("register bases", ("register_bases",)),
    ("register views", ("register_views",)),
    ("retrieve", ("retrievers", "registers")),
    ("fuse", ("fusion",)),
    ("rerank", ("features", "rerank")),
    ("present", ("excerpts", "follow_refs", "results")),
    ("search", ("search",)),
    ("watch", ("store_watch",)),
    ("serve", ("mcp_server",)),
)
TOOL_MODULES = (
    "bench",
    "embed_bench",
    "load_bench",
    "eval_retrieval",
    "eval_scope",
    "register_census",
    "register_facts",
    "trm_verify",
    "validate_store",
    "stages",
    "rebuild",
    "import_graph",
    "metrics",
    "train_ranker",
    "add_release",
    "bundle",
    "formula_census",
    "memory_bench",
    "ingest_bench",
    "mine_arduino_vocab",
    "demo_sample",
)

# Edges across the paths that are meant, each with its reason.
ALLOWED = {
    ("mcp_server", "embed_and_store"): "--demo builds the bundled sample's store on first use",
    ("mcp_server", "bundle"): "list_chips shows the manifest of the bundle a store was installed from",
}


@dataclass(frozen=True)
class Place:
    """Where a module stands: its path (or foundation/tools) and its stage's rank on that path."""

    path: str
    rank: int
    stage: str


def places() -> dict[str, Place]:
    placed = {name: Place(FOUNDATION, 0, FOUNDATION) for name in FOUNDATION_MODULES}
    placed |= {name: Place(TOOLS, 0, TOOLS) for name in TOOL_MODULES}
    for path, stages in ((BUILD, BUILD_STAGES), (READ, READ_STAGES)):
        for rank, (stage, names) in enumerate(stages):
            placed |= {name: Place(path, rank, stage) for name in names}
    return placed


def repo_modules(root: Path = ROOT) -> list[str]:
    return sorted(p.stem for p in root.glob("*.py"))


def imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the repository modules it imports (anywhere in the file, lazy imports included)."""
    modules = set(repo_modules(root))
    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        found: set[str] = set()
        for node in ast.walk(ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name in modules}
        graph[name] = found - {name}
    return graph


def upward(importer: Place, imported: Place) -> bool:
    """Whether ``importer`` may not import ``imported``: a later stage of its own path, the other
    path, or any path module from the foundation."""
    if importer.path == TOOLS or imported.path == FOUNDATION:
        return False
    if imported.path == TOOLS or importer.path != imported.path:
        return True
    return imported.rank >= importer.rank and importer.stage != imported.stage


def problems(graph: dict[str, set[str]], placed: dict[str, Place]) -> list[str]:
    """Every module without a layer and every upward edge, one line each."""
    found = [f"{name} has no layer: place it in import_graph.py" for name in graph if name not in placed]
    for name, targets in graph.items():
        for target in sorted(targets):
            known = name in placed and target in placed
            if known and upward(placed[name], placed[target]) and (name, target) not in ALLOWED:
                found.append(
                    f"upward edge {name} ({_where(placed[name])}) -> {target} ({_where(placed[target])})"
                )
    return found


def _where(place: Place) -> str:
    return place.path if place.path in (FOUNDATION, TOOLS) else f"{place.path}: {place.stage}"


def render(graph: dict[str, set[str]], placed: dict[str, Place]) -> str:
    """The graph by layer, lowest first: ``module -> imports``."""
    order = {FOUNDATION: 0, BUILD: 1, READ: 2, TOOLS: 3}

    def key(name: str) -> tuple[int, int, str]:
        place = placed.get(name, Place(TOOLS, 99, "unplaced"))
        return order[place.path], place.rank, name

    lines: list[str] = []
    heading = None
    for name in sorted(graph, key=key):
        place = placed.get(name)
        where = _where(place) if place else "unplaced"
        if where != heading:
            lines.append(f"[{where}]")
            heading = where
        targets = ", ".join(sorted(graph[name], key=key)) or "-"
        lines.append(f"  {name} -> {targets}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    graph, placed = imports(), places()
    print(render(graph, placed))
    found = problems(graph, placed)
    for line in found:
        print(line)
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} import edges, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
