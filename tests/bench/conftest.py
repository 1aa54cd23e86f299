"""The benchmarks' tests (agentfly_bench; they run the suite's envs, so the `envs` extra).

No fixtures of their own yet; the shared ones are in ../conftest.py.
"""
