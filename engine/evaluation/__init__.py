"""Scoring: the Metric protocol and its registry, the Batch metrics score, the one
evaluation path over chunks (in memory, streamed, on executors), and Results."""
