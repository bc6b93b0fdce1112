"""Sources and sinks: every input format to the columnar form (with validation and its
problem reports), and results to JSON, CSV and Parquet."""
