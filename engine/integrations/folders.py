"""BEIR and Hugging Face ``datasets`` folders as sources: ``engine.dataset("beir:PATH")``,
``slotwise run hf:PATH#dev --run RUN``. The same folders are found by their layout
wherever a dataset is named (:func:`engine.io.sources.read_folder`); the scheme says which
reader, and ``#SPLIT`` which split (``test`` by default).

Registered in the ``slotwise.sources`` entry-point group as ``beir`` and ``hf``.
"""

from __future__ import annotations

from engine.evaluation.source_plugins import Loaded
from engine.io import beir as beir_folder
from engine.io import hf_datasets
from engine.io.files import base_name

__all__ = ["beir", "hf"]


def beir(rest: str) -> Loaded:
    """The samples of a BEIR folder (``PATH`` or ``PATH#SPLIT``)."""
    folder, split = beir_folder.reference(rest)
    return Loaded(samples=beir_folder.read(folder, split), name=_name(folder, split))


def hf(rest: str) -> Loaded:
    """The samples of a Hugging Face datasets folder (``PATH`` or ``PATH#SPLIT``)."""
    folder, split = beir_folder.reference(rest)
    return Loaded(samples=hf_datasets.read(folder, split), name=_name(folder, split))


def _name(folder: object, split: str | None) -> str:
    name = base_name(str(folder).rstrip("/")) or "dataset"
    return f"{name}-{split}" if split else name
