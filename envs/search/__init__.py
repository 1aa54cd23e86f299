"""AgentFly/search: in progress."""
