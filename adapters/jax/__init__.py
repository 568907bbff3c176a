"""JAX: the ``flax`` API (Flax NNX) and the ``jit`` API (pure functions under ``jax.jit``).

Nothing is imported here: the package is found by path in a worker whose runtime has jax.
"""
