"""Bridges to the tools RAG teams already use: pytest, Inspect AI, RAGAS, ir_datasets."""
