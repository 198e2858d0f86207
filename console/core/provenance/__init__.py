"""Where a figure came from and what it is judged against: the chained ledger, the pins in
reference.lock, a round's experiment identity and node fingerprint, reruns that pool, main's history
and the bisection over it."""
