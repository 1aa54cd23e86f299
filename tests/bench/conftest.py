"""The benchmarks' tests (agentfly_bench; they run the suite's envs, so the `envs` extra).

A benchmark's test checks the suite's plumbing and output, not the measurement itself (that is what an
``agentfly-bench`` run is for), so the suites that train take :func:`tiny_model_dir`: a small random model with
SmolLM2's tokenizer, quick to load, sample and update; it and the other shared fixtures are in ../conftest.py.
"""
