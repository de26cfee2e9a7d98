"""A simulated LLM judge, and the adversarial prompt-copying attack (Liu et al. 2025).

The judge follows the paper's simulation game (section 1.1): S skills, a prompt is a
mixture of skills p in the simplex, a model a skill vector m >= 0, and model i beats model
j on prompt p by p^T (m_i - m_j). The judge reports that margin squashed into [-1, 1]
with noise, antisymmetric so that judging (j, i) gives the opposite verdict:

    u_king(i, j, p) = tanh((p^T (m_i - m_j) + e_ijp) / temperature),   e_ijp = -e_jip ~ N(0, noise^2).

The attack (section 5) appends copies of the prompts a chosen model does worst on: with
u_bar(p) = mean over rebels of u_king(model, rebel, p), ``copies`` prompts are drawn from
softmax(-sharpness * u_bar) (sharpness lambda = 10 in the paper) and appended, each a
copy of its original (same judgements, new name).
"""

from __future__ import annotations

import numpy as np

from metaeval.data.games import king_of_the_hill_game
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.runs import budget


def simulated_judge(models: int = 64, prompts: int = 2000, skills: int = 8, noise: float = 0.25,
                    temperature: float = 0.5, seed: int = 0) -> MetaGame:
    """The king-of-the-hill game of a simulated judge (module docstring): prompts from a flat
    Dirichlet over ``skills``, models' skills exponential with mean 1, seeded.

    Args:
        models: the number of models (at least 2).
        prompts: the number of prompts.
        skills: the number of skills.
        noise: the judge's noise.
        temperature: the judge's temperature.
        seed: the seed of every draw.

    Returns:
        The game, players (king, rebel, prompt).
    """
    for name, value in (("models", models), ("prompts", prompts), ("skills", skills)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise MetaEvalError(f"{name} must be a positive integer, got {value!r}")
    if models < 2:
        raise MetaEvalError(f"a king-of-the-hill game needs at least 2 models, got {models}")
    if not (noise >= 0 and temperature > 0):
        raise MetaEvalError(f"noise must be >= 0 and temperature > 0, got {noise} and {temperature}")
    budget.check_joints([models, models, prompts], 7, "the simulated judge's game", "models x models x prompts")
    rng = np.random.default_rng(seed)
    mixtures = rng.dirichlet(np.ones(skills), size=prompts)  # [P, S]
    abilities = rng.exponential(size=(models, skills))  # [M, S]
    score = abilities @ mixtures.T  # [M, P]: p^T m
    margin = score[:, None, :] - score[None, :, :]
    error = np.triu(rng.normal(scale=noise, size=margin.shape).transpose(2, 0, 1), 1).transpose(1, 2, 0)
    margin += error - error.transpose(1, 0, 2)
    return king_of_the_hill_game(np.tanh(margin / temperature))


def copy_prompts(game: MetaGame, model: int, copies: int, sharpness: float = 10.0, seed: int = 0) -> MetaGame:
    """``game`` (a king-of-the-hill game, prompts last) with ``copies`` prompts appended,
    drawn from softmax(-sharpness * u_bar) against ``model`` (module docstring), seeded.

    Args:
        game: a king-of-the-hill game.
        model: the index of the model the copies are drawn against.
        copies: the number of prompts appended.
        sharpness: how strongly the copies favour the prompts ``model`` does worst on.
        seed: the seed of the draws.

    Returns:
        The game with ``copies`` more prompts.
    """
    if game.num_players != 3:
        raise MetaEvalError(f"copy_prompts needs a king-of-the-hill game of 3 players, got {game.num_players}")
    if not 0 <= model < game.shape[0]:
        raise MetaEvalError(f"copy_prompts: the game has {game.shape[0]} models, no model {model}")
    if not isinstance(copies, (int, np.integer)) or copies < 0:
        raise MetaEvalError(f"copies must be a non-negative integer, got {copies!r}")
    mean = game.payoffs[0][model].mean(axis=0)  # u_bar over prompts
    weights = np.exp(-sharpness * (mean - mean.min()))
    picks = np.random.default_rng(seed).choice(len(mean), size=copies, p=weights / weights.sum())
    names = [list(n) for n in game.strategy_names]
    names[2] += [f"{names[2][i]} (copy {c})" for c, i in enumerate(picks)]
    payoffs = np.concatenate([game.payoffs, game.payoffs[..., picks]], axis=-1)
    return MetaGame(payoffs, strategy_names=names, player_names=game.player_names)


STYLE = ("len", "headers", "lists", "bold")
"""The style features of `simulated_arena`, each a column ``f"{name}_a"``, ``f"{name}_b"``."""


def simulated_arena(models: int = 130, battles: int = 100_000, owners: int = 20,
                    effects=(0.6, 0.1, 0.1, 0.05), spread: float = 0.6, tie_rate: float = 0.0,
                    variants: tuple[int, int] = (0, 0), seed: int = 0, models_seed: int | None = None):
    """Arena battles with known scores and known style effects (an LLM arena in miniature).

    Each model has a quality ``theta`` (natural-log odds, N(0, ``spread``)) and a style:
    its mean log response length and its rates of headers, lists and bold text all rise
    with its quality (correlation about 0.6), so that style and quality are confounded as
    in a real arena. A battle's two responses draw their style around their model's, and
    the log-odds that a beats b is
    ``theta_a - theta_b + sum_f effects[f] * (f_a - f_b) / (f_a + f_b)`` (0 when both are 0),
    the arena's normalised style difference. With ``tie_rate`` > 0 a battle is a tie with
    that probability, independently of the models. Models belong to ``owners`` (round
    robin) and are sampled unevenly: each model's sampling rate is log-normal and a pair
    is drawn with probability proportional to the product of its rates.

    ``variants = (owner, n)`` gives owner number ``owner`` ``n`` private variants of its
    best model, each as good as it up to N(0, 0.02) and sampled at the same rate: the
    private testing that lets an owner publish the luckiest of many copies.

    Args:
        models: the number of public models.
        battles: the number of battles.
        owners: the number of owners.
        effects: the style coefficients of len, headers, lists, bold (log-odds per unit
            of normalised difference).
        spread: the standard deviation of the qualities.
        tie_rate: the probability of a tie.
        variants: ``(owner, n)``: the owner testing ``n`` private variants.
        seed: the seed of the battles' draws.
        models_seed: the seed of the models' qualities, styles and rates (default: ``seed``);
            fixed while ``seed`` varies, it gives replicate arenas of the same models.

    Returns:
        ``(battles, truth)``: the battle table (``model_a``, ``model_b``, ``winner``,
        ``owner_a``, ``owner_b``, and ``len_a`` ... ``bold_b``) and a DataFrame indexed by
        model with the true ``theta`` (mean 0), ``owner`` and ``rate``.
    """
    import pandas as pd

    if models < 2 or battles < 1 or owners < 1:
        raise MetaEvalError("simulated_arena needs at least 2 models, 1 battle and 1 owner")
    if len(effects) != len(STYLE):
        raise MetaEvalError(f"effects needs one coefficient per style feature ({', '.join(STYLE)})")
    rng = np.random.default_rng(seed if models_seed is None else models_seed)
    theta = rng.normal(0.0, spread, models)
    owner = np.arange(models) % owners
    owner_of, count = variants
    if count:
        best = np.flatnonzero(owner == owner_of)[np.argmax(theta[owner == owner_of])]
        theta = np.r_[theta, theta[best] + rng.normal(0.0, 0.02, count)]
        owner = np.r_[owner, np.full(count, owner_of)]
    k = len(theta)
    rate = np.exp(rng.normal(0.0, 0.5, k))
    if count:
        rate[models:] = rate[best]
    quality = (theta - theta.mean()) / theta.std()
    style_mean = 0.6 * quality[:, None] + 0.8 * rng.normal(size=(k, len(STYLE)))
    if models_seed is not None:
        rng = np.random.default_rng(seed)
    p = rate / rate.sum()
    a = rng.choice(k, battles, p=p)
    b = rng.choice(k, battles, p=p)
    while (same := np.flatnonzero(a == b)).size:
        b[same] = rng.choice(k, same.size, p=p)
    features = {}
    logit = theta[a] - theta[b]
    for f, (name, effect) in enumerate(zip(STYLE, effects)):
        if name == "len":
            draw = lambda m: np.round(400 * np.exp(0.4 * style_mean[m, f] + 0.5 * rng.normal(size=battles)))
        else:
            draw = lambda m: rng.poisson(np.exp(0.5 * style_mean[m, f]))
        x_a, x_b = draw(a).astype(np.int64), draw(b).astype(np.int64)
        total = x_a + x_b
        logit = logit + effect * np.divide(x_a - x_b, total, out=np.zeros(battles), where=total > 0)
        features[f"{name}_a"], features[f"{name}_b"] = x_a, x_b
    u = rng.random(battles)
    tie = rng.random(battles) < tie_rate
    winner = np.where(tie, 2, np.where(u < 1 / (1 + np.exp(-logit)), 0, 1))
    names = [f"m{i:03d}" for i in range(models)] + [f"lab{owner_of:02d}-variant{j + 1:02d}" for j in range(count)]
    owner_names = np.array([f"lab{o:02d}" for o in range(owners)])
    table = pd.DataFrame({
        "model_a": pd.Categorical.from_codes(a, names), "model_b": pd.Categorical.from_codes(b, names),
        "winner": pd.Categorical.from_codes(winner, ["model_a", "model_b", "tie"]),
        "owner_a": pd.Categorical.from_codes(owner[a], owner_names),
        "owner_b": pd.Categorical.from_codes(owner[b], owner_names),
        **features,
    })
    truth = pd.DataFrame({"theta": theta - theta.mean(), "owner": owner_names[owner], "rate": rate},
                         index=pd.Index(names, name="model"))
    return table, truth

