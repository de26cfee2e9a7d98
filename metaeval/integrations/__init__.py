"""Adapters that put metaeval inside loops other libraries run.

- [`metaeval.integrations.openspiel`][metaeval.integrations.openspiel]: OpenSpiel's ``psro_v2`` and ``jpsro`` with
  metaeval's meta-solvers and raters, ``psro_v2`` with exact meta-games, and CFR
  checkpoints that stay what they were when taken.
- [`metaeval.integrations.tune`][metaeval.integrations.tune]: Ray Tune's population-based training (PBT, PB2)
  exploiting on a trial's rating in the population of all trials' policies, kept by one
  shared Evaluator actor that a restored experiment resumes (the ``tune`` extra).
- [`metaeval.integrations.rllib`][metaeval.integrations.rllib]: an RLlib callback for league self-play on OpenSpiel
  games: snapshots of RLlib modules by content, opponents drawn by metaeval's matchmaking,
  a league capped by rating, ratings in RLlib's results (the ``rllib`` extra).
"""
