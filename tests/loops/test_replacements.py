"""evolve's --replace choices: random, mutate, best-response, learned (one oracle signature)."""

import json

import numpy as np
import pytest

from metaeval import MetaEvalError, spiel
from metaeval.cli import main
from metaeval.loops.evolve import Evolution, EvolveConfig, evolve
from tests.conftest import without_timings


def tables(population, player, ids):
    index = {i: k for k, i in enumerate(population.ids[player])}
    return [np.asarray(population.policies[player][index[i]].action_probability_array) for i in ids]


def step_once(replace, **options):
    run = Evolution(EvolveConfig(game="kuhn_3p", rater="deviation", replace=replace, seed=2, **options))
    before = run.population
    record = run.step()
    return before, run.population, record


def test_mutated_replacements_are_perturbed_copies_of_top_quarter_policies():
    before, after, record = step_once("mutate", mutation_scale=0.1)
    for p in range(3):
        ratings = dict(zip(record["policy_ids"][p], np.round(record["ratings"][p], 9)))
        second = sorted(ratings.values())[-2]  # the top quarter of 8, with any ties at its edge
        top = [i for i, r in ratings.items() if r >= second]
        parents = tables(before, p, top)
        for child in tables(after, p, record["added"][p]):
            distance = min(np.abs(child - parent).max() for parent in parents)
            assert 0 < distance <= 0.1 + 1e-12


def test_best_response_replacements_are_the_mecce_best_response():
    before, after, record = step_once("best-response")
    evaluator_gap = spiel.cce_gap(before.game, before, _mecce(before))
    for p in range(3):
        for child in tables(after, p, record["added"][p]):
            np.testing.assert_array_equal(child, evaluator_gap.best_responses[p].action_probability_array)


def _mecce(population):
    from metaeval.solvers.equilibria import mecce

    return mecce(spiel.exact_metagame(population.game, population))


def test_learned_replacements_are_trained_greedy_policies_and_resume_exactly(tmp_path):
    config = EvolveConfig(game="kuhn_3p", rater="uniform", replace="learned", learner_episodes=20,
                          iterations=2, population=4, seed=1)
    uninterrupted = evolve(config, progress=False)
    evolve(EvolveConfig(**{**config.__dict__, "iterations": 1}), out=tmp_path, progress=False)
    resumed = evolve(config, out=tmp_path, progress=False)
    assert without_timings(resumed) == without_timings(json.loads(json.dumps(uninterrupted)))
    run = Evolution(config)
    record = run.step()
    for p in range(3):
        for child in tables(run.population, p, record["added"][p]):
            # greedy: every state's mass sits evenly on its best actions
            assert np.all(np.isclose(child, 0) | np.isclose(child, child.max(axis=1, keepdims=True)))


def test_bad_replacement_settings_are_refused(capsys):
    with pytest.raises(MetaEvalError, match="unknown replacement"):
        EvolveConfig(replace="clone")
    with pytest.raises(MetaEvalError, match="new_policy hook"):
        Evolution(EvolveConfig(replace="mutate"), new_policy=lambda game, player, rng: None)
    assert main(["evolve", "--replace", "best", "--out", "unused"]) == 2
    assert "unknown replacement 'best'" in capsys.readouterr().err
