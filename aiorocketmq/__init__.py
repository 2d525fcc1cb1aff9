"""aiorocketmq: tools around the roles (console scripts, logging, tracing, local clusters)."""
