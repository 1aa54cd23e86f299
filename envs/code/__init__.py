"""AgentFly/code: in progress."""
