"""The training side: the Evaluator a loop talks to, oracles, learners, matchmaking,
mutation, selection and meta-solvers."""
