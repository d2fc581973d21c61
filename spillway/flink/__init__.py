"""Flink's own math and facts: key groups, hashing, operator ids, format features."""
