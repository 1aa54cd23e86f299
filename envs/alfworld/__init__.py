"""AgentFly/alfworld: in progress."""
