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
