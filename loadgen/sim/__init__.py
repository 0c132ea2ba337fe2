"""The built-in SGLang-compatible simulator of a DDTree speculative-decoding deployment."""
