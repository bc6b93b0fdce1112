"""Model families, for the self-preference warning: an LLM judge tends to favour answers
written by its own family's models (Panickssery et al., "LLM Evaluators Recognize and
Favor Their Own Generations", 2024), so a judge of the family of the system it judges
is warned about.

A model's family is read from its name, lower-cased, after the last ``/`` (a provider or
hub prefix: ``meta-llama/Llama-3.1-8B`` -> ``llama-3.1-8b``), by the first prefix of
:data:`FAMILIES` it starts with; a name no prefix fits has no family (never warned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["FAMILIES", "family", "self_preference"]

#: Name prefix -> family, longest prefixes first where one starts another.
FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpt", "OpenAI"),
    ("chatgpt", "OpenAI"),
    ("o1", "OpenAI"),
    ("o3", "OpenAI"),
    ("o4", "OpenAI"),
    ("text-davinci", "OpenAI"),
    ("claude", "Anthropic"),
    ("gemini", "Google"),
    ("gemma", "Google"),
    ("palm", "Google"),
    ("llama", "Meta"),
    ("meta-llama", "Meta"),
    ("qwen", "Alibaba Qwen"),
    ("qwq", "Alibaba Qwen"),
    ("mistral", "Mistral"),
    ("mixtral", "Mistral"),
    ("ministral", "Mistral"),
    ("codestral", "Mistral"),
    ("magistral", "Mistral"),
    ("deepseek", "DeepSeek"),
    ("phi", "Microsoft"),
    ("command", "Cohere"),
    ("grok", "xAI"),
)


def family(model: str) -> str | None:
    """The family of the model named ``model`` (None: no prefix of :data:`FAMILIES`)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return next((found for prefix, found in FAMILIES if name.startswith(prefix)), None)


def self_preference(judges: Mapping[str, str], systems: Sequence[str]) -> list[str]:
    """A warning for each judge (name -> model) of the family of a system's model."""
    warnings = []
    for name, model in judges.items():
        mine = family(model)
        same = [system for system in systems if mine is not None and family(system) == mine]
        if same:
            warnings.append(
                f"self-preference: the judge {name} ({model}) is of the {mine} family, as the "
                f"judged system's model {', '.join(same)}: an LLM judge tends to favour its "
                "own family's answers; check its labels against people's (--agreement)"
            )
    return warnings
