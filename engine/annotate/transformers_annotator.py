"""The ``transformers`` annotator: a local causal LM read as the reference implementation
reads it. For each (question, passage): the chat template over the Figure 4 system prompt
and ``"Document: {passage}\\nQuestion: {question}\\nAnswer:"`` with the generation prompt
added, one forward pass, a softmax over the whole vocabulary (in float32) at the last
prompt position -- the first generated token -- and the probability of the first
sub-token of ``NO-RESPONSE``.

Batches are left-padded with an attention mask and position ids counted from the first
real token, so padding does not change any probability. A prompt longer than the model's
context has its passage cut (from the end) until it fits; such items are flagged
truncated. Models load with ``local_files_only``: nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from engine.annotate.base import (
    AnnotationError,
    BatchResult,
    Throttle,
    UtilityItem,
    rebuild_annotator,
)
from engine.annotate.judge import AnswerFormat
from engine.annotate.prompts import NO_RESPONSE, utility_messages
from engine.errors import MissingDependencyError

__all__ = ["TransformersAnnotator"]

_DTYPES = ("auto", "float32", "bfloat16", "float16")


def _fingerprint(path: Path) -> str:
    """A cheap identity of a saved model: config and tokenizer files, and the size, head and
    tail of each weight file (so that two random-weight models with one config differ)."""
    digest = hashlib.sha256()
    for file in sorted(path.iterdir()):
        if not file.is_file():
            continue
        digest.update(file.name.encode())
        if file.suffix in (".json", ".jinja", ".txt", ".model"):
            digest.update(file.read_bytes())
        elif file.suffix in (".safetensors", ".bin", ".pt", ".pth"):
            size = file.stat().st_size
            digest.update(str(size).encode())
            with file.open("rb") as handle:
                digest.update(handle.read(1 << 20))
                handle.seek(max(0, size - (1 << 20)))
                digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


class TransformersAnnotator:
    """A local Hugging Face causal LM (a saved directory, or a model already in the local
    cache), on ``device`` (cpu, cuda, cuda:1, ...)."""

    name: ClassVar[str] = "transformers"
    default_batch_size: ClassVar[int] = 8
    default_concurrency: ClassVar[int] = 1

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        dtype: str = "auto",
        max_length: int | None = None,
        no_response_token: str = NO_RESPONSE,
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as error:
            raise MissingDependencyError(
                "the transformers annotator (torch, transformers)", "llm", error
            ) from error
        if dtype not in _DTYPES:
            raise AnnotationError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        # what pickling carries: a Ray worker loads the model itself, once
        self._init_args: tuple[str, dict[str, Any]] = (
            model,
            {
                "device": device,
                "dtype": dtype,
                "max_length": max_length,
                "no_response_token": no_response_token,
            },
        )
        path = Path(model).expanduser()
        looks_like_path = path.is_absolute() or model.startswith(".") or path.exists()
        if looks_like_path and not path.is_dir():
            raise AnnotationError(f"model path {model!r} does not exist (or is not a directory)")
        self._torch: Any = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype: Any = torch.float32
        if dtype != "auto":
            torch_dtype = getattr(torch, dtype)
        elif not self.device.startswith("cpu"):
            torch_dtype = "auto"
        source = str(path) if looks_like_path else model
        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(source, local_files_only=True)
            import transformers

            dtype_kw = (
                "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
            )
            self.lm: Any = AutoModelForCausalLM.from_pretrained(
                source, local_files_only=True, **{dtype_kw: torch_dtype}
            )
        except (OSError, ValueError, KeyError) as error:
            where = "a directory with a saved model" if looks_like_path else "in the local cache"
            raise AnnotationError(
                f"cannot load model {model!r} ({where}; nothing is downloaded): {error}"
            ) from error
        try:
            self.lm.to(self.device)  # type: ignore[arg-type]
        except (RuntimeError, AssertionError) as error:
            raise AnnotationError(f"cannot use device {self.device!r}: {error}") from error
        self.lm.eval()
        if self.tokenizer.chat_template is None:
            raise AnnotationError(f"the tokenizer of {model!r} has no chat template")
        self.tokenizer.padding_side = "left"
        pad = self.tokenizer.pad_token_id
        self.pad_id: int = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        self.model = f"{path.name}@{_fingerprint(path)}" if looks_like_path else model
        ids = self.tokenizer.encode(no_response_token, add_special_tokens=False)
        if not ids:
            raise AnnotationError(f"{no_response_token!r} encodes to no token")
        self.token_id: int = ids[0]
        self.token = no_response_token
        self.max_length = max_length or self._context_length()
        forward = inspect.signature(self.lm.forward).parameters
        self._keep_last = {"logits_to_keep": 1} if "logits_to_keep" in forward else {}

    def _context_length(self) -> int:
        config = self.lm.config
        limits = [
            getattr(config, name, None)
            for name in ("max_position_embeddings", "n_positions", "max_sequence_length")
        ]
        model_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(model_max, int) and model_max < 10**7:
            limits.append(model_max)
        found = [v for v in limits if isinstance(v, int) and v > 0]
        return min(found) if found else 2048

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its constructor arguments: a Ray worker loads the model itself (the
        model directory must exist there, or the model be in its local cache)."""
        model, options = self._init_args
        return (rebuild_annotator, (type(self), model, dict(options), {}))

    def cache_key(self) -> str:
        return f"token={self.token_id};max_length={self.max_length}"

    def _template(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        return list(ids)

    def encode_utility(self, item: UtilityItem) -> tuple[list[int], bool]:
        """The prompt's token ids, the passage cut from its end until they fit the
        context; and whether it was cut."""
        ids = self._template(utility_messages(item.question, item.passage))
        if len(ids) <= self.max_length:
            return ids, False
        passage_ids = self.tokenizer.encode(item.passage, add_special_tokens=False)
        keep = len(passage_ids) - (len(ids) - self.max_length)
        while keep > 0:
            passage = self.tokenizer.decode(passage_ids[:keep], skip_special_tokens=True)
            ids = self._template(utility_messages(item.question, passage))
            if len(ids) <= self.max_length:
                return ids, True
            keep -= max(1, len(ids) - self.max_length)
        raise AnnotationError(
            f"the prompt is longer than the model's context ({self.max_length} tokens) even "
            f"without the passage; question: {item.question[:80]!r}"
        )

    def _batch(self, sequences: Sequence[list[int]]) -> dict[str, Any]:
        torch = self._torch
        width = max(map(len, sequences))
        input_ids = torch.tensor(
            [[self.pad_id] * (width - len(s)) + s for s in sequences], device=self.device
        )
        mask = torch.tensor(
            [[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=self.device
        )
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return {"input_ids": input_ids, "attention_mask": mask, "position_ids": positions}

    def p_no_response(self, items: Sequence[UtilityItem], throttle: Throttle) -> BatchResult:
        encoded = [self.encode_utility(item) for item in items]
        sequences = [ids for ids, _ in encoded]
        throttle()
        torch = self._torch
        with torch.inference_mode():
            output = self.lm(**self._batch(sequences), **self._keep_last)
            logits = output.logits[:, -1, :].float()
            probabilities = torch.softmax(logits, dim=-1)[:, self.token_id]
        return BatchResult(
            values=[float(p) for p in probabilities.cpu()],
            calls=1,
            prompt_tokens=sum(map(len, sequences)),
            truncated=[cut for _, cut in encoded],
        )

    def generate(
        self,
        prompts: Sequence[list[dict[str, str]]],
        max_tokens: int,
        throttle: Throttle,
        answer_format: AnswerFormat | None = None,
    ) -> BatchResult:
        """Greedy answers; ``answer_format`` does not constrain decoding here (the answers
        are read strictly by it all the same)."""
        sequences = [self._template(messages) for messages in prompts]
        throttle()
        torch = self._torch
        batch = self._batch(sequences)
        batch.pop("position_ids")  # generate() derives them from the mask
        with torch.inference_mode():
            output = self.lm.generate(
                **batch, max_new_tokens=max_tokens, do_sample=False, pad_token_id=self.pad_id
            )
        new = output[:, batch["input_ids"].shape[1] :]
        texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        return BatchResult(
            values=list(texts),
            calls=1,
            prompt_tokens=sum(map(len, sequences)),
            completion_tokens=int((new != self.pad_id).sum()),
        )

    def close(self) -> None:
        del self.lm
