"""Helpers of the real-engine tier: llama.cpp's llama-server, built by scripts/build-llama-server.sh."""
