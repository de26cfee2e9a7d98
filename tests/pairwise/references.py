"""The arena's published Bradley-Terry method, re-derived for the tests and the bench.

Faithful to ``compute_elo_mle_with_tie`` and ``get_bootstrap_result`` in
``fastchat/serve/monitor/elo_analysis.py`` of the ``fschat`` package (0.2.36, the release
on the package index): every battle is duplicated, a win becomes two wins, a tie one win
for each side, and a scikit-learn logistic regression without intercept is fitted on the
+-ln(10) design; each bootstrap round resamples the battle rows and refits.  The package
itself is not installed: it pulls a web server stack and its module imports plotly and
pytz at the top.  The published call is ``LogisticRegression(fit_intercept=False)``, i.e.
an L2 penalty with C=1 and tol 1e-4; ``C`` and ``tol`` are parameters here so the exact
MLE (C=inf, tight tol) can be compared too.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def simulated_battles(scores, battles, seed, tie_rate=0.1, prefix="m"):
    """Battles between uniformly drawn pairs; a decisive outcome follows Bradley-Terry (Elo scale)."""
    rng = np.random.default_rng(seed)
    scores = np.asarray(scores, dtype=float)
    k = len(scores)
    a = rng.integers(0, k, battles)
    b = (a + rng.integers(1, k, battles)) % k
    p = 1 / (1 + 10 ** ((scores[b] - scores[a]) / 400))
    u = rng.random(battles)
    decisive = rng.random(battles) >= tie_rate
    winner = np.where(~decisive, "tie", np.where(u < p, "model_a", "model_b"))
    names = np.array([f"{prefix}{i:03d}" for i in range(k)])
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def arena_mle(df, C=1.0, tol=1e-4, max_iter=100, SCALE=400, BASE=10, INIT_RATING=1000):
    from sklearn.linear_model import LogisticRegression

    models = pd.concat([df["model_a"], df["model_b"]]).unique()
    models = pd.Series(np.arange(len(models)), index=models)
    df = pd.concat([df, df], ignore_index=True)
    p = len(models.index)
    n = df.shape[0]
    X = np.zeros([n, p])
    X[np.arange(n), models[df["model_a"]]] = +math.log(BASE)
    X[np.arange(n), models[df["model_b"]]] = -math.log(BASE)
    Y = np.zeros(n)
    Y[df["winner"] == "model_a"] = 1.0
    tie_idx = np.array((df["winner"] == "tie") | (df["winner"] == "tie (bothbad)"))
    tie_idx[len(tie_idx) // 2 :] = False
    Y[tie_idx] = 1.0
    lr = LogisticRegression(fit_intercept=False, C=C, tol=tol, max_iter=max_iter)
    lr.fit(X, Y)
    return pd.Series(SCALE * lr.coef_[0] + INIT_RATING, index=models.index)


def arena_bootstrap(df, rounds, seed, **options):
    """One refit per round on ``df.sample(frac=1.0, replace=True)``; rows are rounds."""
    rng = np.random.RandomState(seed)
    return pd.DataFrame([arena_mle(df.sample(frac=1.0, replace=True, random_state=rng), **options) for _ in range(rounds)])
