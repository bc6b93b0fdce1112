"""trec_eval measure names and the slotwise specs that compute them (shared by the
trec_eval conformance and pytrec_eval differential tests)."""

from __future__ import annotations

from collections.abc import Iterable

UNCUT = 10**9  # a cutoff beyond any ranking and any |Rel|: trec_eval's uncut ndcg


def trec_measures(cutoffs: Iterable[int], success_cutoffs: Iterable[int]) -> dict[str, str]:
    """trec_eval measure name -> slotwise spec."""
    out = {
        "map": "retrieval-map",
        "Rprec": "retrieval-r-precision",
        "recip_rank": "retrieval-mrr",
        "ndcg": f"retrieval-ndcg-at-k@{UNCUT}",
    }
    for k in cutoffs:
        out[f"P_{k}"] = f"retrieval-precision-at-k@{k}"
        out[f"recall_{k}"] = f"retrieval-recall-at-k@{k}"
        out[f"ndcg_cut_{k}"] = f"retrieval-ndcg-at-k@{k}"
        out[f"map_cut_{k}"] = f"retrieval-map@{k}"
    for k in success_cutoffs:
        out[f"success_{k}"] = f"retrieval-hit-at-k@{k}"
    return out
