"""Running benchmarks: launch a worker, a run, sweeps, the Ray fleet, batches, the supervisor, following a run."""
