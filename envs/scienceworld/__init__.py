"""AgentFly/scienceworld: in progress."""
