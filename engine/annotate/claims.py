"""Context recall's labels: a reference answer's claims, their support links, and how
well an LLM's links agree with a person's.

A sample's claims are ``expected_output.claims`` (``[{id, text}]``); the passages that
support a claim are the group named by its id in ``expected_output.groups``, which is
what ``coverage-recall-at-k`` reads and what ``context-recall-at-k`` counts per claim.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from engine.io.records import Sample

__all__ = ["Agreement", "claims_of", "groups_of", "linked", "reference_of"]


def _expected(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    expected = raw.get("expected_output")
    return expected if isinstance(expected, Mapping) else {}


def claims_of(raw: Mapping[str, Any]) -> list[dict[str, str]]:
    """The sample's claims (``[]`` when it has none)."""
    return list(_expected(raw).get("claims") or [])


def groups_of(raw: Mapping[str, Any]) -> Mapping[str, list[str]]:
    """The sample's groups (empty when it has none)."""
    groups = _expected(raw).get("groups")
    return groups if isinstance(groups, Mapping) else {}


def reference_of(raw: Mapping[str, Any], sample: Sample) -> str | None:
    """The reference answer to split: ``expected_output.reference``, else the first of
    the acceptable answers (each is a whole answer); None when there is neither."""
    reference = _expected(raw).get("reference")
    if isinstance(reference, str):
        return reference
    return sample.answers[0] if sample.answers else None


def linked(group: Sequence[str], verdicts: Mapping[str, bool]) -> list[str]:
    """A claim's group after the judge's verdicts (passage -> supports): the passages it
    judged supporting are in, the others out; passages it did not judge are kept."""
    kept = [doc for doc in group if verdicts.get(doc, True)]
    return kept + [doc for doc, supports in verdicts.items() if supports and doc not in kept]


@attrs.define
class Agreement:
    """The LLM's support links against a person's, over the (claim, passage) pairs the
    LLM judged for claims that have a human group: a 2x2 table, Cohen's κ, the
    precision and recall of the LLM's links, and the pairs on which they differ."""

    both: int = 0
    llm_only: int = 0
    human_only: int = 0
    neither: int = 0
    claims: int = 0
    disagreements: list[tuple[str, str, str, bool]] = attrs.field(factory=list)
    """(sample id, claim id, passage id, whether the person linked them)."""

    def add(
        self, sample: str, claim: str, verdicts: Mapping[str, bool], human: Collection[str]
    ) -> None:
        """One claim's verdicts (passage -> the LLM says it supports) against its human group."""
        self.claims += 1
        for doc, llm in verdicts.items():
            person = doc in human
            if llm and person:
                self.both += 1
            elif llm:
                self.llm_only += 1
            elif person:
                self.human_only += 1
            else:
                self.neither += 1
            if llm != person:
                self.disagreements.append((sample, claim, doc, person))

    @property
    def pairs(self) -> int:
        return self.both + self.llm_only + self.human_only + self.neither

    @property
    def observed(self) -> float | None:
        """The share of pairs on which both say the same."""
        return (self.both + self.neither) / self.pairs if self.pairs else None

    @property
    def chance(self) -> float | None:
        """The agreement expected by chance from each side's share of links."""
        if not self.pairs:
            return None
        llm = (self.both + self.llm_only) / self.pairs
        human = (self.both + self.human_only) / self.pairs
        return llm * human + (1 - llm) * (1 - human)

    @property
    def kappa(self) -> float | None:
        """Cohen's κ = (observed - chance) / (1 - chance); None when chance is 1 (both
        sides gave one same answer to every pair) or there are no pairs."""
        observed, chance = self.observed, self.chance
        if observed is None or chance is None or chance == 1:
            return None
        return (observed - chance) / (1 - chance)

    @property
    def precision(self) -> float | None:
        """The share of the LLM's links that the person made too."""
        found = self.both + self.llm_only
        return self.both / found if found else None

    @property
    def recall(self) -> float | None:
        """The share of the person's links (among the pairs judged) the LLM made too."""
        made = self.both + self.human_only
        return self.both / made if made else None

    def lines(self) -> list[str]:
        """The report ``slotwise annotate --agreement`` prints."""
        if not self.pairs:
            return [
                "agreement: no judged claim has a human group (expected_output.groups named "
                "by the claim's id) to compare with"
            ]
        lines = [
            f"agreement with the human support links: {self.pairs} (claim, passage) pairs "
            f"of {self.claims} claims",
            f"  Cohen's kappa       {_number(self.kappa)}  (observed {_number(self.observed)}, "
            f"chance {_number(self.chance)})",
            f"  precision of links  {_number(self.precision)}  ({self.both} of the LLM's "
            f"{self.both + self.llm_only} links are human links)",
            f"  recall of links     {_number(self.recall)}  ({self.both} of the "
            f"{self.both + self.human_only} human links found)",
            f"  pairs               {self.both} both, {self.llm_only} LLM only, "
            f"{self.human_only} human only, {self.neither} neither",
        ]
        if self.disagreements:
            lines.append(f"  disagreements ({len(self.disagreements)}):")
            lines += [
                f"    {sample} {claim} {doc}: human {_said(person)}, LLM {_said(not person)}"
                for sample, claim, doc, person in self.disagreements
            ]
        return lines


def _number(value: float | None) -> str:
    return "NA" if value is None else f"{value:.4f}"


def _said(supports: bool) -> str:
    return "supported" if supports else "not supported"
