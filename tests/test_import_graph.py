"""import_graph.py: the repository's modules follow the build and read paths, and the check sees
an edge that does not."""

from __future__ import annotations

from pathlib import Path

import import_graph as ig


def test_every_module_is_placed_and_no_edge_goes_up() -> None:
    graph = ig.imports()
    assert set(graph) == set(ig.repo_modules())
    assert ig.problems(graph, ig.places()) == []


def test_an_upward_edge_and_an_unplaced_module_are_reported(tmp_path: Path) -> None:
    (tmp_path / "results.py").write_text("import search\n")
    (tmp_path / "search.py").write_text("from results import x\n")
    (tmp_path / "chunk_format.py").write_text("import ingest_trm\n")
    (tmp_path / "ingest_trm.py").write_text("import fusion\n")
    (tmp_path / "fusion.py").write_text("")
    (tmp_path / "newcomer.py").write_text("")
    graph = ig.imports(tmp_path)
    assert graph["search"] == {"results"}
    found = ig.problems(graph, ig.places())
    assert found == [
        "newcomer has no layer: place it in import_graph.py",
        "upward edge chunk_format (foundation) -> ingest_trm (build: ingest)",
        "upward edge ingest_trm (build: ingest) -> fusion (read: fuse)",
        "upward edge results (read: present) -> search (read: search)",
    ]


def test_same_stage_and_earlier_stages_are_allowed() -> None:
    placed = ig.places()
    assert not ig.upward(placed["ingest_trm"], placed["latex_parser"])
    assert not ig.upward(placed["search"], placed["fusion"])
    assert not ig.upward(placed["eval_retrieval"], placed["search"]), "tools may import anything"
    assert ig.upward(placed["results"], placed["embed_and_store"]), "the read path never imports the build"
