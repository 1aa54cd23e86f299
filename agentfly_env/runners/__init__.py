"""What plays envs: the env checker, ``agentfly-play`` and the vector env."""
