"""A numpy evaluator for XGBoost's JSON model (multi:softprob), so selection needs no xgboost at run time.

The robot's node only needs numpy to pick a variant: the shipped ``*.json`` files are XGBoost's own format
(``Booster.save_model``), and this module walks all trees at once, level by level. Semantics follow XGBoost:
go left when ``x < split_condition`` (right otherwise), missing values follow ``default_left``; the class
margin is the class base score plus the sum of its trees' leaf values; probabilities are the softmax.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Union

import numpy as np


class NumpyForest:
    """Trees of one XGBoost multi-class model as padded arrays (trees x nodes)."""

    def __init__(self, doc: dict):
        learner = doc["learner"]
        params = learner["learner_model_param"]
        self.num_class = max(int(params.get("num_class", "0")), 1)
        self.num_feature = int(params["num_feature"])
        base = params["base_score"].strip("[]")
        scores = np.array([float(x) for x in base.split(",")], dtype=np.float64)
        objective = learner["objective"]["name"]
        if objective not in ("multi:softprob", "multi:softmax"):
            raise ValueError(f"unsupported XGBoost objective {objective!r}")
        self.base_margin = np.broadcast_to(scores, (self.num_class,)).copy()
        model = learner["gradient_booster"]["model"]
        trees = model["trees"]
        self.tree_class = np.asarray(model["tree_info"], dtype=np.int64)
        n_nodes = max(len(t["left_children"]) for t in trees) if trees else 1
        shape = (len(trees), n_nodes)
        self.left = np.full(shape, -1, dtype=np.int64)
        self.right = np.full(shape, -1, dtype=np.int64)
        self.feature = np.zeros(shape, dtype=np.int64)
        self.cond = np.zeros(shape, dtype=np.float32)
        self.default_left = np.zeros(shape, dtype=bool)
        for k, t in enumerate(trees):
            n = len(t["left_children"])
            self.left[k, :n] = t["left_children"]
            self.right[k, :n] = t["right_children"]
            self.feature[k, :n] = t["split_indices"]
            self.cond[k, :n] = np.asarray(t["split_conditions"], dtype=np.float32)
            self.default_left[k, :n] = np.asarray(t["default_left"], dtype=bool)
        self.depth = self._max_depth()

    def _max_depth(self) -> int:
        depth = 0
        node = np.zeros(len(self.left), dtype=np.int64)
        rows = np.arange(len(self.left))
        while len(rows):
            leaf = self.left[rows, node] < 0
            rows, node = rows[~leaf], self.left[rows[~leaf], node[~leaf]]
            depth += 1
        return depth

    @classmethod
    def load(cls, path: Union[str, Path]) -> "NumpyForest":
        return cls(json.loads(Path(path).read_text()))

    def margins(self, X: np.ndarray) -> np.ndarray:
        """X: (rows, features) float32 -> (rows, classes) raw margins."""
        X = np.asarray(X, dtype=np.float32)
        if X.ndim == 1:
            X = X[None]
        out = np.tile(self.base_margin, (X.shape[0], 1))
        trees = np.arange(len(self.left))
        for r in range(X.shape[0]):
            node = np.zeros(len(trees), dtype=np.int64)
            for _ in range(self.depth):
                left = self.left[trees, node]
                internal = left >= 0
                x = X[r, self.feature[trees, node]]
                go_left = np.where(np.isnan(x), self.default_left[trees, node], x < self.cond[trees, node])
                nxt = np.where(go_left, left, self.right[trees, node])
                node = np.where(internal, nxt, node)
            leaf = self.cond[trees, node].astype(np.float64)
            out[r] += np.bincount(self.tree_class, weights=leaf, minlength=self.num_class)
        return out

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        m = self.margins(X)
        m -= m.max(axis=1, keepdims=True)
        e = np.exp(m)
        return e / e.sum(axis=1, keepdims=True)
