"""The gRPC transport of agentscope-memory: servicers, interceptors, configuration and CLI."""
