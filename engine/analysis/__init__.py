"""What results mean: paired significance tests and comparisons, Metric@K curves,
meta-evaluation against end-to-end outcomes, and the HTML report."""
