"""Rerank: a learned model scores every candidate of the fused pool from its features.

The model is a LightGBM lambdarank booster trained by ``train_ranker.py`` on the labelled questions
(``just train-ranker``) and kept in the repository as one small JSON file (``ranker_model.json``):
the booster's own text, the feature names and ``FEATURE_VERSION`` it was trained on, the hash of its
training data, and its cross-validated figures. The server loads it once at start and downloads
nothing; a missing, corrupt or mismatched file stops the start with the command that retrains it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightgbm
import numpy as np

from features import FEATURE_VERSION, FEATURES, feature_matrix, identifier_led
from fusion import ABSENT_RANK
from query_analysis import QueryAnalysis

MODEL_PATH = Path(__file__).with_name("ranker_model.json")
RETRAIN = "retrain it with `just train-ranker` (train_ranker.py)"


class RankerError(Exception):
    """The ranker file cannot be used; the message names the file and how to fix it."""


@dataclass(frozen=True)
class Ranker:
    """A loaded reranking model and what it was trained on."""

    booster: lightgbm.Booster
    path: Path
    training_data: str

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> Ranker:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise RankerError(f"no ranker model at {path}: {RETRAIN}") from error
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise RankerError(f"the ranker model {path} is unreadable ({error}): {RETRAIN}") from error
        if not isinstance(record, dict) or not isinstance(record.get("model"), str):
            raise RankerError(f"the ranker model {path} holds no model: {RETRAIN}")
        if record.get("feature_version") != FEATURE_VERSION or record.get("features") != list(FEATURES):
            raise RankerError(
                f"the ranker model {path} was trained on feature set {record.get('feature_version')!r}, "
                f"this code computes {FEATURE_VERSION!r}: {RETRAIN}"
            )
        try:
            booster = lightgbm.Booster(model_str=record["model"])
        except lightgbm.basic.LightGBMError as error:
            raise RankerError(f"the ranker model {path} is corrupt ({error}): {RETRAIN}") from error
        if booster.num_feature() != len(FEATURES):
            raise RankerError(f"the ranker model {path} expects {booster.num_feature()} features: {RETRAIN}")
        return cls(booster=booster, path=path, training_data=str(record.get("training_data", "")))

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """One score per feature row; higher ranks first."""
        if not len(matrix):
            return np.zeros(0)
        return self.booster.predict(matrix, num_threads=1)

    def rerank(
        self, analysis: QueryAnalysis, candidates: list[dict[str, Any]], filter_doc_type: str | None
    ) -> list[dict[str, Any]]:
        """The candidates best first by the model; each keeps its score as ``score``. Ties keep the
        fused order."""
        scores = self.scores(feature_matrix(analysis, candidates, filter_doc_type))
        for candidate, score in zip(candidates, scores, strict=True):
            candidate["score"] = float(score)
        ranked = sorted(candidates, key=lambda row: -row["score"])
        if identifier_led(analysis):
            # The symbol leg's contract, not a weight: a query that is a lookup of identifiers gets the
            # passages defining them (best definition tier) first, in the model's order.
            ranked.sort(key=lambda row: row.get("symbol_tier", ABSENT_RANK) != 0)
        return ranked
