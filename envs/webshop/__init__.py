"""AgentFly/webshop: in progress."""
