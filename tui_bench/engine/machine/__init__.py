"""The machine the runs happen on: framework runtimes, the resource sampler, system facts, process liveness."""
