"""An independent reference for stationary distributions: GTH elimination in log space.

Grassmann, Taksar & Heyman (1985) eliminate states one at a time using only additions of
positive numbers, so the result is accurate entry by entry whatever the conditioning;
done on logarithms it also survives rates far below the double-precision range.  Dense
and O(n^3): for small test chains only.
"""

import numpy as np


def gth_stationary(num_states, source, target, log_rate):
    logs = np.full((num_states, num_states), -np.inf)
    logs[source, target] = log_rate
    np.fill_diagonal(logs, -np.inf)
    for k in range(num_states - 1, 0, -1):
        exit_k = np.logaddexp.reduce(logs[k, :k])
        logs[:k, :k] = np.logaddexp(logs[:k, :k], logs[:k, k][:, None] + logs[k, :k][None, :] - exit_k)
        logs[:k, k] -= exit_k
    log_pi = np.full(num_states, -np.inf)
    log_pi[0] = 0.0
    for k in range(1, num_states):
        log_pi[k] = np.logaddexp.reduce(log_pi[:k] + logs[:k, k])
    return np.exp(log_pi - np.logaddexp.reduce(log_pi))
