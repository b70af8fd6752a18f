"""Train the reranker (``just train-ranker``): features of every labelled question's candidate pool on
a built store, LightGBM lambdarank, cross-validated figures with 95% intervals, and the model file.

    uv run train_ranker.py --db STORE [--pool FILE ...] [--folds 5] [--out ranker_model.json]

The pool is every training set (``eval/pool_*.jsonl``, and the shared dev questions when present):
questions are split into folds by question, each fold is ranked by a model trained on the others, and
the figures of those held-out rankings are what the model is judged by here. The frozen test sets
(``eval/test_*.jsonl``) are never read: ``eval_retrieval.py`` scores them once a change is finished.
The final model is trained on the whole pool and written with the feature-set version, the hash of
the training data and the cross-validated figures. Candidate features are cached per store version
and question file under ``build/ranker``, so changing only the model's settings re-trains in seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightgbm
import numpy as np
from tqdm import tqdm

from eval_retrieval import Case, answers, in_case_release, load_cases, with_releases
from features import CATEGORICAL, FEATURE_VERSION, FEATURES, feature_matrix
from metrics import DEPTH, Report
from rerank import MODEL_PATH
from search import SearchEngine, SearchInputError, open_engine, validate_filters
from store import StoreError, resolve_db_uri

HERE = Path(__file__).resolve().parent
DEFAULT_POOLS = sorted((HERE / "eval").glob("pool_*.jsonl"))
SHARED_DEV = HERE.parent / "shared" / "eval" / "dev_queries.jsonl"
CACHE_DIR = HERE / "build" / "ranker"
SEED = 7
PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "ndcg_eval_at": [1, 5, 10],
    "lambdarank_truncation_level": 20,
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "num_threads": 2,
    "seed": SEED,
    "deterministic": True,
    "verbosity": -1,
}
ROUNDS = 300


@dataclass
class Group:
    """One question's candidates: features, which answer it, and where it came from."""

    case: Case
    source: str
    features: np.ndarray
    labels: np.ndarray


def case_filters(engine: SearchEngine, case: Case) -> tuple[str | None, str | None]:
    """(where, doc_type) exactly as ``SearchEngine.search`` builds them for the case's filters."""
    chip, doc_type = case.filters.get("chip"), case.filters.get("doc_type")
    filters = validate_filters(chip, doc_type, case.filters.get("revision"))
    filters = filters.with_release(engine.release_for(case.filters.get("idf_version"), filters.chip))
    return filters.where(), filters.doc_type


def question_group(engine: SearchEngine, case: Case, source: str) -> Group:
    where, doc_type = case_filters(engine, case)
    analysis, pool = engine.candidates(case.query, where)
    labels = np.array([float(answers(row["text"], case) and in_case_release(row, case)) for row in pool])
    return Group(case, source, feature_matrix(analysis, pool, doc_type), labels)


def cache_key(db_uri: str, engine: SearchEngine, path: Path) -> str:
    """Store version, feature set, ranking code and question file: any change recomputes."""
    digest = hashlib.sha256()
    digest.update(f"{db_uri}\0{engine.table.version}\0{FEATURE_VERSION}\0".encode())
    for module in ("features.py", "fusion.py", "query_analysis.py", "retrievers.py", "terms.py"):
        digest.update((HERE / module).read_bytes())
    digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def load_groups(engine: SearchEngine, db_uri: str, paths: list[Path]) -> list[Group]:
    groups: list[Group] = []
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    for path in paths:
        cases = with_releases(engine, load_cases(path))
        cached = CACHE_DIR / f"{path.stem}-{cache_key(db_uri, engine, path)}.npz"
        if cached.exists():
            data = np.load(cached, allow_pickle=False)
            bounds = data["bounds"]
            groups += [
                Group(case, path.name, data["features"][start:end], data["labels"][start:end])
                for case, start, end in zip(cases, bounds[:-1], bounds[1:], strict=True)
            ]
            continue
        fresh = [
            question_group(engine, case, path.name)
            for case in tqdm(cases, desc=f"features {path.name}", unit="question", file=sys.stderr)
        ]
        bounds = np.cumsum([0, *(len(group.labels) for group in fresh)])
        partial = cached.with_suffix(".part.npz")
        np.savez(
            partial,
            features=np.concatenate([g.features for g in fresh]) if fresh else np.zeros((0, len(FEATURES))),
            labels=np.concatenate([g.labels for g in fresh]) if fresh else np.zeros(0),
            bounds=bounds,
        )
        partial.replace(cached)
        groups += fresh
    return groups


def missing_answers(engine: SearchEngine, groups: list[Group]) -> list[str]:
    """Ids of questions whose answer no passage of the store holds at all (not merely unretrieved):
    a label gone stale when the corpus changed."""
    stale = []
    for group in groups:
        if group.labels.any():
            continue
        where, _ = case_filters(engine, group.case)
        needle = max(group.case.must_contain or group.case.any_of, key=len).replace("'", "''")
        clause = f"lower(text) LIKE '%{needle.lower()}%'" + (f" AND {where}" if where else "")
        rows = engine.table.search().where(clause).select(["text", "releases"]).limit(None).to_list()
        if not any(answers(row["text"], group.case) and in_case_release(row, group.case) for row in rows):
            stale.append(group.case.id)
    return stale


def train(groups: list[Group], rounds: int = ROUNDS) -> lightgbm.Booster:
    usable = [g for g in groups if g.labels.any()]
    data = lightgbm.Dataset(
        np.concatenate([g.features for g in usable]),
        label=np.concatenate([g.labels for g in usable]),
        group=[len(g.labels) for g in usable],
        feature_name=list(FEATURES),
        categorical_feature=list(CATEGORICAL),
        free_raw_data=False,
    )
    return lightgbm.train(PARAMS, data, num_boost_round=rounds)


def answer_rank(scores: np.ndarray, labels: np.ndarray) -> int | None:
    """1-based rank of the first answering candidate under ``scores`` (ties keep the fused order)."""
    order = np.argsort(-scores, kind="stable")
    answering = np.flatnonzero(labels[order])
    return int(answering[0]) + 1 if len(answering) and answering[0] < DEPTH else None


def cross_validate(groups: list[Group], folds: int) -> list[int | None]:
    """Each question's answer rank under a model that never saw it (folds assigned by question)."""
    rng = np.random.default_rng(SEED)
    assignment = rng.permutation(len(groups)) % folds
    ranks: list[int | None] = [None] * len(groups)
    for fold in tqdm(range(folds), desc="cross-validation", unit="fold", file=sys.stderr):
        booster = train([g for g, f in zip(groups, assignment, strict=True) if f != fold])
        for number, group in enumerate(groups):
            if assignment[number] == fold:
                ranks[number] = answer_rank(booster.predict(group.features, num_threads=2), group.labels)
    return ranks


def report(groups: list[Group], ranks: list[int | None], baseline: list[int | None]) -> dict[str, Any]:
    """Figures per question file and per category, cross-validated beside the fused order alone."""
    by: dict[str, list[int]] = defaultdict(list)
    for number, group in enumerate(groups):
        by[group.source].append(number)
        by[f"  {group.source.removesuffix('.jsonl')}:{group.case.category}"].append(number)
    by["all"] = list(range(len(groups)))
    figures = {}
    for name in sorted(by, key=lambda n: (n.strip().split(":")[0], n.startswith(" "), n)):
        members = by[name]
        learned = Report.of([ranks[i] for i in members])
        fused = Report.of([baseline[i] for i in members])
        print(learned.line(name))
        if not name.startswith(" "):
            print(fused.line("  (fused order only)"))
            figures[name] = {
                "n": learned.n,
                "hit@1": learned.hit1.value,
                "hit@5": learned.hit5.value,
                "hit@10": learned.hit10.value,
                "mrr@10": learned.mrr.value,
                "mrr@10_ci95": [learned.mrr.low, learned.mrr.high],
            }
    return figures


def training_hash(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train the learned reranker on the labelled pool.")
    parser.add_argument("--db", help="a built store (default $ESP32_DOCS_DB or ./esp_docs.lancedb)")
    parser.add_argument("--pool", type=Path, action="append", help="training question file (repeatable)")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (2-20)")
    parser.add_argument("--out", type=Path, default=MODEL_PATH, help="model file to write")
    parser.add_argument("--no-write", action="store_true", help="cross-validate only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pools = args.pool or [*DEFAULT_POOLS, *([SHARED_DEV] if SHARED_DEV.exists() else [])]
    if not 2 <= args.folds <= 20:
        print(f"error: --folds must be 2-20, got {args.folds}", file=sys.stderr)
        return 2
    frozen = [p for p in pools if p.name.startswith("test_")]
    if frozen:
        print(f"error: {', '.join(map(str, frozen))} is a frozen test set, never trained on", file=sys.stderr)
        return 2
    try:
        db_uri = resolve_db_uri(args.db)
        engine = open_engine(db_uri, rerank=False)
        groups = load_groups(engine, db_uri, pools)
    except (StoreError, SearchInputError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stale = missing_answers(engine, groups)
    if stale:
        print(f"{len(stale)} question(s) whose answer no passage holds (labels to fix): {', '.join(stale)}")
    baseline = [answer_rank(-np.arange(len(g.labels), dtype=float), g.labels) for g in groups]
    ranks = cross_validate(groups, args.folds)
    figures = report(groups, ranks, baseline)
    if not args.no_write:
        booster = train(groups)
        record = {
            "feature_version": FEATURE_VERSION,
            "features": list(FEATURES),
            "training_data": training_hash(pools),
            "training_sets": [p.name for p in pools],
            "questions": len(groups),
            "rounds": ROUNDS,
            "params": PARAMS,
            "cross_validated": figures,
            "model": booster.model_to_string(),
        }
        partial = args.out.with_suffix(".part")
        partial.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        partial.replace(args.out)
    total = figures["all"]
    print(
        f"trained on {len(groups)} questions ({sum(1 for g in groups if g.labels.any())} with an answer in "
        f"their pool); cross-validated hit@5 {total['hit@5']:.2f} MRR@10 {total['mrr@10']:.2f}"
        + ("" if args.no_write else f"; model written to {args.out}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
