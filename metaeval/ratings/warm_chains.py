"""alpha-Rank bootstrap replicates solved together on the point rating's chain.

A replicate's chain has the point's states and switches; only the payoff gains along the
switches, hence the rates, differ. `ChainReplicates` keeps the switches of the point's
multi-population chain and, for a batch of replicates' payoff tensors, forms all their
log rates at once, finds every chain's metastable classes at once (the closed classes of
the strong graph, as [`metaeval.solvers.markov`][metaeval.solvers.markov] defines them,
in one graph holding the batch's chains side by side), and solves the anchored systems
of the chains with one class together: BiCGSTAB with Jacobi preconditioning, vectorised
over the batch, from markov's Jacobi guess (the point's distribution, tried as a start,
took more iterations: 57 products against 51 on 100 replicates of the sampled goofspiel
meta-game). markov solves such a chain alone, by dense LU up to DENSE_MAX states
(2.6 CPU ms at 512 states), where BiCGSTAB converges in about 25 iterations of two
sparse products.

The anchor, the systems and the checks are markov's: a chain's answer is accepted when
its solve meets markov's backward-error bound and its distribution markov's stationary
residual bound, as a cold rating's must. A chain with several classes (markov aggregates
those), or whose solve does not converge, gets None and is rated from scratch.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from metaeval.ratings.base import Rating, marginals
from metaeval.runs import budget
from metaeval.solvers import markov

#: Most BiCGSTAB iterations on a batch (the sampled goofspiel meta-game's chains need about 25).
MAX_ITERATIONS = 300
#: A chain's iterations stop at this residual relative to its right-hand side (markov's Krylov tolerance).
RELATIVE_RESIDUAL = 1e-13
#: Floats held per switch and replicate of a batch (rates, the batch's sparse matrix, temporaries).
FLOATS_PER_SWITCH = 8


class ChainReplicates:
    """alpha-Rank ratings of a batch of replicates, from the point's chain.

    Args:
        shape: the game's strategies per player.
        source: each switch's state before it (sorted, the same number of switches from
            every state, as `metaeval.ratings.alpharank` builds them).
        target: each switch's state after it.
        player: each switch's switching player.
        log_rates: the log rates of a payoff gain ``(gain) -> log rate`` at the point's
            alpha and population size.
    """

    batched = True  # rates a stack of replicates' payoffs at once (metaeval.ratings.bootstrap)

    def __init__(self, shape, source, target, player, log_rates):
        self.shape, self.n = tuple(shape), int(np.prod(shape))
        source, target = source.astype(np.int64), target.astype(np.int64)
        self.degree = len(source) // self.n
        self.gain_to, self.gain_from = player * self.n + target, player * self.n + source
        self.source, self.target = source.astype(np.int32), target.astype(np.int32)
        # N^T's entries: row v lists the switches into v (every state is entered by ``degree``
        # of them), each in the column of its source state.
        self.by_target = np.argsort(self.target, kind="stable")
        self.into_from = self.source[self.by_target]
        self.log_rates = log_rates

    @classmethod
    def from_rating(cls, rating: Rating) -> "ChainReplicates | None":
        """The replicates of an alpha-Rank point rating's chain.

        Args:
            rating: the point rating.

        Returns:
            The ChainReplicates, or None unless the chain is multi-population, local, at a
            finite alpha, stored (not matrix-free) and of one metastable class.
        """
        from metaeval.ratings.alpharank import _joint_profiles, log_fixation

        info = rating.diagnostics
        if not (info.get("model") == "multi-population" and info.get("selection") == "local"
                and info.get("chain") == "sparse" and info.get("aggregation_levels") == 1
                and np.isfinite(info["alpha"])):
            return None
        shape = rating.game.shape
        _, source, target, _ = _joint_profiles(rating.game)
        player = np.tile(np.repeat(np.arange(len(shape)), np.array(shape) - 1), rating.game.num_joints)
        alpha, size = info["alpha"], int(info["population_size"])
        return cls(shape, source, target, player, lambda gain: log_fixation(gain, alpha, size))

    def __call__(self, payoffs: np.ndarray) -> list:
        """Each replicate's ratings (every player's, concatenated), or None to rate it from scratch.

        Args:
            payoffs: the replicates' payoff tensors ``[B, N, K_1, ..., K_N]``.

        Returns:
            One entry per replicate.
        """
        count, n, degree = len(payoffs), self.n, self.degree
        budget.check(FLOATS_PER_SWITCH * budget.FLOAT * count * len(self.source),
                     f"alpha-Rank replicates of {count} chains of {len(self.source)} switches")
        flat = payoffs.reshape(count, -1)
        # np.take: indexing a batch's columns took 2.5 to 11 times longer
        log_rate = self.log_rates(np.take(flat, self.gain_to, axis=1) - np.take(flat, self.gain_from, axis=1))
        log_rate -= log_rate.max(axis=1, keepdims=True)  # as markov scales each chain
        member, single = self._one_class(log_rate)
        rate = np.exp(log_rate, out=log_rate)
        into = np.take(rate, self.by_target, axis=1)  # N^T's entries, chain by chain
        each = np.ones(degree)  # a state's switches summed by a product: a reduction along 21 took 7 times longer
        out_rate = (rate.reshape(count * n, degree) @ each).reshape(count, n)
        in_rate = (into.reshape(count * n, degree) @ each).reshape(count, n)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf: no exits, or nearly none
            ratio = np.where(out_rate > 0, in_rate / out_rate, np.inf)  # markov's anchor rule
        anchor = np.argmax(np.where(member, ratio, -np.inf), axis=1)
        rows = np.arange(count)
        # markov's system A x = b, A = (D - N^T)_FF off the anchor and the identity at it,
        # b = N^T e_anchor off it, Jacobi-preconditioned: B y = b with B = A D^-1 = I - C,
        # C = (N^T D^-1)_FF >= 0 (N^T's columns scaled by 1 / D, the anchor's by 0, and its
        # row cleared), and x = D^-1 y.
        diagonal = out_rate.copy()
        diagonal[rows, anchor] = 1.0
        with np.errstate(divide="ignore", invalid="ignore"):  # a state without exits fails the checks
            inverse = 1.0 / diagonal
            inverse[rows, anchor] = 0.0
            coupled = into * np.take(inverse, self.into_from, axis=1)
        coupled[rows[:, None], anchor[:, None] * degree + np.arange(degree)] = 0.0
        # Both on every switch, zeros included (rates that underflowed, the anchor's row and
        # column): one structure for every chain. Leaving C's zeros out (a quarter of a sampled
        # meta-game's at alpha 100) made its products 7% faster but its building dearer.
        columns = self._block_columns(count)
        transposed, coupling = _block_rows(columns, degree, into), _block_rows(columns, degree, coupled)

        def product(y):  # B y
            return y - (coupling @ y.ravel()).reshape(count, n)

        exits = anchor[:, None] * degree + np.arange(degree)  # the anchor's switches
        rhs = np.zeros((count, n))
        rhs[rows[:, None], self.target[exits]] = rate[rows[:, None], exits]
        y, converged = _bicgstab(product, rhs)  # from markov's Jacobi guess x = D^-1 b
        with np.errstate(invalid="ignore", over="ignore"):  # a failed solve fails the checks
            # markov's backward error of x: |A x - b| against |A| |x| + |b|, where A x = B y
            # and |A| |x| = |y| + C |y|.
            error = np.abs(product(y) - rhs).sum(axis=1)
            magnitude = np.abs(y)
            scale = (magnitude + (coupling @ magnitude.ravel()).reshape(count, n)).sum(axis=1) + np.abs(rhs).sum(axis=1)
            pi = np.maximum(y * inverse, 0.0)
        pi[rows, anchor] = 1.0
        pi /= pi.sum(axis=1, keepdims=True)
        net = (transposed @ pi.ravel()).reshape(count, n) - out_rate * pi
        residual = np.abs(net).sum(axis=1) / out_rate.max(axis=1)
        accepted = single & converged & (error <= markov._BACKWARD_TOL * scale) & (residual <= markov.RESIDUAL_TOL)
        return [np.concatenate(marginals(pi[b].reshape(self.shape))) if accepted[b] else None
                for b in range(count)]

    def _block_columns(self, count):
        """The columns of N^T's entries in the block-diagonal matrix of ``count`` chains."""
        index = np.int32 if count * len(self.source) < 2**31 else np.int64
        return np.arange(count, dtype=index)[:, None] * self.n + self.into_from

    def _one_class(self, log_rate):
        """Per chain, the members of its closed classes of the strong graph ``[B, n]``, and
        whether it has exactly one (markov's ``_sink_classes``, on every chain at once)."""
        count, n = len(log_rate), self.n
        strong = log_rate >= np.log(markov.STRONG)
        offset = (np.arange(count, dtype=np.int32) * n)[:, None]
        graph = _block_rows(offset + self.target, self.degree, keep=strong)
        rows, cols = np.repeat(np.arange(count * n), np.diff(graph.indptr)), graph.indices
        _, component = csgraph.connected_components(graph, directed=True, connection="strong")
        closed = np.ones(component.max() + 1, dtype=bool)
        leaving = component[rows] != component[cols]
        closed[component[np.compress(leaving, rows)]] = False
        chain_of = np.zeros(len(closed), dtype=np.int64)
        chain_of[component] = np.arange(count * n) // n
        classes = np.bincount(chain_of[closed], minlength=count)
        return closed[component].reshape(count, n), classes == 1


def _block_rows(columns, degree, values=None, keep=None) -> sp.csr_matrix:
    """The square matrix whose row i holds ``values`` at ``columns`` of entries
    ``i * degree .. (i + 1) * degree - 1`` (both ``[B, n * degree]``, flattened; ones if
    ``values`` is None), where ``keep`` (every entry if None)."""
    size = columns.size // degree
    if keep is None:
        indptr = np.arange(0, columns.size + 1, degree, dtype=columns.dtype)
        return sp.csr_matrix((values.ravel(), columns.ravel(), indptr), shape=(size, size))
    keep = keep.ravel()
    indptr = np.concatenate([[0], np.cumsum(keep)[degree - 1 :: degree]])
    # np.compress: indexing by the mask took 7 times longer on a strong graph's (half its entries)
    kept = np.compress(keep, columns)
    return sp.csr_matrix((np.ones(len(kept)) if values is None else np.compress(keep, values), kept, indptr),
                         shape=(size, size))


def _bicgstab(product, rhs):
    """BiCGSTAB (van der Vorst 1992) on every row's system at once, from ``rhs``: the
    solutions ``[B, n]`` and which rows reached RELATIVE_RESIDUAL. A row stops when it
    converges or breaks down (a zero or non-finite scalar); its solution is kept then, and
    its iterates go on with the others' (a product serves the whole batch), unused."""
    x = rhs.copy()
    r = rhs - product(x)
    shadow = r.copy()
    bound = RELATIVE_RESIDUAL * _norms(rhs)
    active = _norms(r) > bound
    converged = ~active
    solution = x.copy()
    rho_old = alpha = omega = np.ones(len(rhs))
    p, v, work = np.zeros_like(r), np.zeros_like(r), np.empty_like(r)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(MAX_ITERATIONS):
            if not active.any():
                break
            rho = _dots(shadow, r)
            beta = (rho / rho_old) * (alpha / omega)
            p -= np.multiply(_column(omega), v, out=work)  # p = r + beta (p - omega v)
            p *= _column(beta)
            p += r
            v = product(p)
            alpha = rho / _dots(shadow, v)
            s = np.subtract(r, np.multiply(_column(alpha), v, out=work), out=r)  # r is replaced below
            done_at_s = _norms(s) <= bound
            t = product(s)
            omega = np.where(done_at_s, 0.0, _dots(t, s) / _dots(t, t))
            x += np.multiply(_column(alpha), p, out=work)
            x += np.multiply(_column(omega), s, out=work)
            r = np.subtract(s, np.multiply(_column(omega), t, out=work), out=s)
            finite = np.isfinite(alpha) & np.isfinite(omega)
            reached = active & finite & (done_at_s | (_norms(r) <= bound))
            if reached.any():
                solution[reached] = x[reached]
                converged |= reached
            active &= finite & ~reached & (omega != 0) & (rho != 0)
            rho_old = rho
    return solution, converged


def _dots(a, b):
    """Each row's dot product."""
    return np.einsum("bn,bn->b", a, b)


def _norms(a):
    return np.sqrt(_dots(a, a))


def _column(values):
    return values[:, None]
