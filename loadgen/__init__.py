"""loadgen: a load generator and metrics service for LLM servers with speculative decoding."""

__version__ = "0.1.0"
