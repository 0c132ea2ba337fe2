"""Consumers of records: the JSONL file, the results JSON, the terminal table, the live exporter."""
