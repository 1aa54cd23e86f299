"""agentfly-bench: standalone environment benchmarking (``agentfly-bench --help``)."""
