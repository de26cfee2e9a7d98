"""Contextual Bradley-Terry, Davidson ties and sandwich intervals against independent references:
scikit-learn's and statsmodels' logistic regressions, a per-battle sandwich without
compression, a direct Davidson likelihood, and lmarena's arena-rank (when installed)."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import log_expit

from metaeval import pairwise
from metaeval.data.simulated import STYLE, simulated_arena
from metaeval.errors import MetaEvalError
from metaeval.pairwise import contextual
from metaeval.ratings.elo import SCALE

FEATURES = list(STYLE)


def arena(models=12, battles=6000, seed=0, **options):
    table, truth = simulated_arena(models=models, battles=battles, owners=4, seed=seed, **options)
    return table.astype({"model_a": str, "model_b": str, "winner": str}), truth


def design(table, x):
    """Per battle: the rows of the logistic regression [e_a - e_b, x] and the outcome (tie 0.5)."""
    models = sorted(set(table["model_a"]) | set(table["model_b"]))
    index = {m: i for i, m in enumerate(models)}
    a, b = table["model_a"].map(index).to_numpy(), table["model_b"].map(index).to_numpy()
    rows = np.zeros((len(table), len(models)))
    rows[np.arange(len(table)), a] = 1.0
    rows[np.arange(len(table)), b] = -1.0
    y = table["winner"].map({"model_a": 1.0, "model_b": 0.0, "tie": 0.5}).to_numpy()
    return models, np.hstack([rows, x]), y


def test_contextual_fit_equals_scikit_learn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    table, _ = arena(tie_rate=0.1)
    x = pairwise.covariates(table, FEATURES)
    models, rows, y = design(table, x)
    # a tie is half a win: two rows, one won and one lost, each of weight 1/2; model 0 is the gauge
    doubled = np.vstack([rows, rows])[:, 1:]
    target = np.r_[np.ceil(y), np.floor(y)]
    weight = np.r_[np.where(y == 0.5, 0.5, 1.0), np.where(y == 0.5, 0.5, 0.0)]
    reference = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10_000)
    reference.fit(doubled, target, sample_weight=weight)
    theta = np.r_[0.0, reference.coef_[0][: len(models) - 1]]
    board = pairwise.bradley_terry(table, control=FEATURES).loc[models]
    np.testing.assert_allclose(board["score"], SCALE * (theta - theta.mean()), atol=1e-4)
    beta = [board.attrs["coefficients"][f]["coefficient"] for f in FEATURES]
    np.testing.assert_allclose(beta, reference.coef_[0][len(models) - 1:], atol=1e-6)
    np.testing.assert_allclose(board["uncontrolled"] - board["uncontrolled"].mean(),
                               pairwise.bradley_terry(table).loc[models, "score"], atol=1e-9)


def test_sandwich_equals_statsmodels_robust_covariance():
    sm = pytest.importorskip("statsmodels.api")
    table, _ = arena(seed=1)
    x = pairwise.covariates(table, FEATURES)
    models, rows, y = design(table, x)
    result = sm.GLM(y, rows[:, 1:], family=sm.families.Binomial()).fit(cov_type="HC0", tol=1e-13)
    board = pairwise.bradley_terry(table, control=FEATURES, sandwich=True)
    # model 0 is statsmodels' gauge: its parameters are the contrasts theta_i - theta_0
    fit = contextual.fit(pairwise.count_battles(table, FEATURES), sandwich=True)
    k = len(models)
    contrast = np.hstack([-np.ones((k - 1 + 4, 1)), np.eye(k - 1 + 4)])
    contrast[k - 1:, 0] = 0.0
    ours = contrast @ fit.covariance @ contrast.T
    np.testing.assert_allclose(contrast @ fit.parameters, result.params, atol=1e-7)
    np.testing.assert_allclose(ours, result.cov_params(), rtol=1e-6, atol=1e-12)
    assert board.attrs["coefficients"]["len"]["stderr"] == pytest.approx(result.bse[k - 1], rel=1e-6)


def test_sandwich_of_the_cells_equals_the_sum_over_single_battles():
    table, _ = arena(seed=2, tie_rate=0.2)
    table["weight"] = pairwise.inverse_propensity(table, floor=20)
    x = pairwise.covariates(table, ["len"])
    models, rows, y = design(table, x)
    fit = contextual.fit(pairwise.count_battles(table, ["len"]), sandwich=True)
    w = table["weight"].to_numpy()
    p = 1 / (1 + np.exp(-rows @ fit.parameters))
    hessian = rows.T @ (rows * (w * p * (1 - p))[:, None])
    scores = rows * (w * (y - p))[:, None]
    np.testing.assert_allclose(scores.sum(axis=0), 0.0, atol=1e-9 * len(y))  # the fit is the weighted MLE
    inverse = np.linalg.pinv(hessian)
    k = len(models)
    gauge = np.eye(k + 1)
    gauge[:k, :k] -= 1.0 / k  # onto mean(theta) = 0
    expected = gauge @ inverse @ scores.T @ scores @ inverse @ gauge.T
    np.testing.assert_allclose(fit.covariance, expected, rtol=1e-7, atol=1e-12)


def test_style_effects_are_recovered_and_confounding_is_removed():
    effects = (0.8, 0.3, 0.0, 0.2)
    table, truth = arena(models=20, battles=40_000, seed=3, effects=effects)
    board = pairwise.bradley_terry(table, control=FEATURES, normalise=False, sandwich=True)
    for name, effect in zip(FEATURES, effects):
        c = board.attrs["coefficients"][name]
        assert abs(c["coefficient"] - effect) < 4 * c["stderr"], (name, c)
    error = lambda column: np.abs(board[column] - SCALE * truth.loc[board.index, "theta"]).mean()
    assert error("score") < 0.5 * error("uncontrolled")  # style inflates the scores of stylish models


def test_davidson_equals_a_direct_maximisation_of_its_likelihood():
    rng = np.random.default_rng(4)
    theta, nu = rng.normal(0, 0.7, 6), 0.4
    a = rng.integers(0, 6, 3000)
    b = (a + rng.integers(1, 6, 3000)) % 6
    d = theta[a] - theta[b]
    probability = np.stack([np.exp(d / 2), np.exp(-d / 2), np.full_like(d, nu)], axis=1)
    probability /= probability.sum(axis=1, keepdims=True)
    outcome = (rng.random(3000)[:, None] > np.cumsum(probability, axis=1)).sum(axis=1)
    names = np.array([f"m{i}" for i in range(6)])
    table = pd.DataFrame({"model_a": names[a], "model_b": names[b],
                          "winner": np.array(["model_a", "model_b", "tie"])[outcome]})

    def negative_log_likelihood(params):
        t = np.r_[0.0, params[:5]]
        dd = t[a] - t[b]
        log_d = np.logaddexp(np.logaddexp(dd / 2, -dd / 2), params[5])
        return -np.choose(outcome, [dd / 2, -dd / 2, np.full_like(dd, params[5])]).sum() + log_d.sum()

    reference = minimize(negative_log_likelihood, np.zeros(6), method="BFGS", options={"gtol": 1e-9}).x
    board = pairwise.bradley_terry(table, ties="davidson", sandwich=True).loc[names]
    expected = np.r_[0.0, reference[:5]]
    np.testing.assert_allclose(board["score"], SCALE * (expected - expected.mean()), atol=1e-3)
    assert board.attrs["tie_parameter"] == pytest.approx(np.exp(reference[5]), rel=1e-5)
    assert abs(board.attrs["tie_parameter"] - nu) < 0.1
    half = pairwise.bradley_terry(table)
    assert not np.allclose(half.loc[names, "score"], board["score"], atol=1.0)  # a different model


def test_bootstrap_of_a_contextual_fit_is_seeded_and_brackets_the_fit():
    table, _ = arena(seed=5)
    one = pairwise.bradley_terry(table, control=["len"], bootstrap=40, seed=7, sandwich=True)
    two = pairwise.bradley_terry(table, control=["len"], bootstrap=40, seed=7)
    pd.testing.assert_series_equal(one["lower"], two["lower"])
    assert (one["lower"] <= one["score"]).all() and (one["score"] <= one["upper"]).all()
    assert (one["sandwich_lower"] < one["score"]).all()
    c = one.attrs["coefficients"]["len"]
    assert c["lower"] < c["coefficient"] < c["upper"]


def test_anchor_moves_controlled_and_uncontrolled_scores_to_the_value():
    table, _ = arena(seed=6)
    board = pairwise.bradley_terry(table, control=["len"], sandwich=True, anchor=("m003", 1000.0))
    assert board.at["m003", "score"] == 1000.0 and board.at["m003", "uncontrolled"] == pytest.approx(1000.0)
    plain = pairwise.bradley_terry(table, control=["len"], sandwich=True)
    np.testing.assert_allclose(board["upper"] - board["score"], plain.loc[board.index, "upper"]
                               - plain.loc[board.index, "score"], atol=1e-9)


def test_inverse_propensity_weights_equal_pairs():
    table = pd.DataFrame({"model_a": ["a"] * 70 + ["b"] * 10 + ["c"] * 20,
                          "model_b": ["b"] * 70 + ["c"] * 10 + ["a"] * 20,
                          "winner": "model_a"})
    w = pairwise.inverse_propensity(table, floor=1)
    per_pair = pd.Series(w).groupby([min(p) + max(p) for p in zip(table["model_a"], table["model_b"])]).sum()
    np.testing.assert_allclose(per_pair.to_numpy(), per_pair.iloc[0])
    assert w.mean() == pytest.approx(1.0)


@pytest.mark.parametrize("call, message", [
    (lambda t: pairwise.bradley_terry(t, control=["nope"]), "no covariate column 'nope'"),
    (lambda t: pairwise.bradley_terry(t, control=["len"], prior=1.0), "prior applies to plain"),
    (lambda t: pairwise.bradley_terry(t, ties="thirds"), "unknown ties 'thirds'"),
    (lambda t: pairwise.bradley_terry(t, ties="davidson"), "Davidson ties need battles with ties"),
    (lambda t: pairwise.bradley_terry(t.assign(len=np.nan), control=["len"]), "covariate 'len' is not a finite"),
    (lambda t: pairwise.bradley_terry(pairwise.count_battles(t, ["len"])), "the counts hold covariates"),
])
def test_bad_input_is_one_clear_error(call, message):
    table, _ = arena(battles=500)
    with pytest.raises(MetaEvalError, match=message):
        call(table)


def arena_rank_reference(table, contextual_features=None):
    """lmarena's arena-rank 0.1.1 at its parametrisation (scale 400, base 10, init 1000,
    hessian_reg 1e-5; contextual: inverse-propensity weights with floor 50 and standardised
    features), run to convergence (ftol 0, gtol 1e-12)."""
    pytest.importorskip("arena_rank")
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset, PairDataset

    if contextual_features is None:
        data = PairDataset.from_pandas(table)
        model = BradleyTerry(len(data.competitors), max_iter=10_000, ftol=0.0, gtol=1e-12)
    else:
        data = ContextualPairDataset.from_pandas(table, contextual_features)
        model = ContextualBradleyTerry(len(data.competitors), len(contextual_features), reg=0.0,
                                       max_iter=10_000, ftol=0.0, gtol=1e-12)
    result = model.compute_ratings_and_cis(data)
    return pd.DataFrame({key: np.asarray(result[key]) for key in ("ratings", "rating_lower", "rating_upper")},
                        index=result["competitors"]), (np.asarray(result["coeffs"]) if "coeffs" in result else None)


def test_plain_fit_and_sandwich_equal_arena_rank():
    table, _ = arena(models=40, battles=30_000, seed=7, tie_rate=0.1)
    reference, _ = arena_rank_reference(table)
    board = pairwise.bradley_terry(table, sandwich=True, hessian_ridge=1e-5, anchor=None)
    board = board.loc[reference.index]
    shift = 1000.0  # arena-rank's init_rating: its scores are 1000 + the mean-0 MLE
    np.testing.assert_allclose(board["score"] + shift, reference["ratings"], atol=1e-6)
    np.testing.assert_allclose(board["lower"] + shift, reference["rating_lower"], atol=1e-6)
    np.testing.assert_allclose(board["upper"] + shift, reference["rating_upper"], atol=1e-6)


def test_contextual_fit_and_sandwich_equal_arena_rank():
    table, _ = arena(models=40, battles=30_000, seed=8, tie_rate=0.1)
    for name in FEATURES:  # arena-rank takes the normalised differences as columns
        table[name] = pairwise.covariates(table, [name], normalise=False)[:, 0]
    reference, coefficients = arena_rank_reference(table, FEATURES)
    table["weight"] = pairwise.inverse_propensity(table)  # arena-rank's reweighting, floor 50
    board = pairwise.bradley_terry(table, control=FEATURES, sandwich=True, hessian_ridge=1e-5).loc[reference.index]
    np.testing.assert_allclose(board["score"] + 1000.0, reference["ratings"], atol=1e-6)
    np.testing.assert_allclose(board["lower"] + 1000.0, reference["rating_lower"], atol=1e-6)
    np.testing.assert_allclose(board["upper"] + 1000.0, reference["rating_upper"], atol=1e-6)
    ours = [board.attrs["coefficients"][f]["coefficient"] for f in FEATURES]
    np.testing.assert_allclose(ours, coefficients, atol=1e-8)
