"""The ``openai-compatible`` annotator: any HTTP endpoint that speaks the chat-completions
API (OpenAI, vLLM, llama.cpp's server, TGI, Ollama...).

p(NO-RESPONSE) is read from ``logprobs`` when the server returns them: one request with
``max_tokens=1``, ``temperature=0``, ``logprobs=true`` and ``top_logprobs`` (20), and
p = the sum of exp(logprob) over the top tokens that are the start of ``NO-RESPONSE``
(the token, leading blanks and ``Ġ``/``▁`` removed, is a prefix of it of at least two
characters -- normally just ``NO``), 0 when none is among the top tokens (the true
probability is then below the smallest one listed). ``no_response_token`` names the token
exactly instead.

Without logprobs (a black-box API), the Monte-Carlo estimate of the paper's appendix D:
``samples`` answers at ``temperature``, and p = the fraction of them that abstain (contain
NO-RESPONSE). ``method="auto"`` (the default) asks for logprobs and falls back to sampling,
for good, the first time the server answers without them.

Judge answers are asked for as structured output: OpenAI-style ``response_format`` with
the answer's JSON schema (vLLM, llama.cpp's server, Ollama and OpenAI honour it).
``structured="auto"`` (the default) drops it, for good, the first time the server refuses
a request that carries it (HTTP 400 or 422) and accepts the same request without it; the
answers are then read by the free-text patterns (:mod:`engine.annotate.judge`).
``"json-schema"`` always sends it, ``"off"`` never does.

A ``Retry-After`` (seconds, or an HTTP date) on a 429 or 503 answer is the endpoint's
limit (:class:`RateLimited`): the runner waits it out without spending a retry. On another
5xx it is passed on as the wait before the retry. A failed batch's error carries the
requests it made and the tokens their answers used, so that the tally counts them.
Its messages show no secret: the URL's credentials, the API key and any ``Authorization``
or ``Bearer`` text an error body echoes are ``***`` (:mod:`engine.redact`).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import os
import re
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import attrs

from engine.annotate.base import (
    AnnotationError,
    BatchResult,
    ItemError,
    RateLimited,
    RetryableError,
    Throttle,
    UtilityItem,
    rebuild_annotator,
)
from engine.annotate.judge import AnswerFormat
from engine.annotate.prompts import NO_RESPONSE, utility_messages
from engine.errors import MissingDependencyError
from engine.logs import log
from engine.redact import redact, secret

__all__ = ["ABSTENTION", "OpenAICompatibleAnnotator", "abstains"]

_METHODS = ("auto", "logprobs", "sampling")
STRUCTURED = ("auto", "json-schema", "off")
#: Answers that refuse one request (its content), not the endpoint: the item fails alone.
_REFUSED = (400, 413, 422)
#: Answers that, with a Retry-After, are the endpoint's limit: waited out, not failures.
_LIMITED = (429, 503)
ABSTENTION = re.compile(r"NO[-\s_]?RESPONSE", re.IGNORECASE)


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date (0
    when it is past); None when absent or unreadable."""
    if not value or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@attrs.define
class _Tally:
    """The requests a batch made and the tokens their answers used (``usage``)."""

    calls: int = 0
    prompt: int = 0
    completion: int = 0

    def add(self, document: dict[str, Any]) -> None:
        usage = document.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        self.prompt += int(usage.get("prompt_tokens") or 0)
        self.completion += int(usage.get("completion_tokens") or 0)

    def result(self, values: list[Any]) -> BatchResult:
        return BatchResult(
            values, calls=self.calls, prompt_tokens=self.prompt, completion_tokens=self.completion
        )


@contextlib.contextmanager
def _tallied() -> Iterator[_Tally]:
    """A batch's tally; a retryable error leaving the block carries it."""
    tally = _Tally()
    try:
        yield tally
    except RetryableError as error:
        error.calls, error.prompt_tokens = tally.calls, tally.prompt
        error.completion_tokens = tally.completion
        raise


def abstains(text: str) -> bool:
    """Whether a sampled answer is an abstention (says NO-RESPONSE)."""
    return ABSTENTION.search(text) is not None


class OpenAICompatibleAnnotator:
    """A chat-completions endpoint at ``base_url`` (e.g. ``http://localhost:8000/v1``)."""

    name: ClassVar[str] = "openai-compatible"
    default_batch_size: ClassVar[int] = 1
    default_concurrency: ClassVar[int] = 4

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        method: str = "auto",
        samples: int = 10,
        temperature: float = 1.0,
        max_tokens: int = 16,
        top_logprobs: int = 20,
        timeout: float = 60.0,
        no_response_token: str | None = None,
        prices: Sequence[float] | None = None,
        structured: str = "auto",
    ) -> None:
        if not base_url:
            raise AnnotationError("the openai-compatible annotator needs --base-url")
        if method not in _METHODS:
            raise AnnotationError(f"method must be one of {', '.join(_METHODS)}, got {method!r}")
        if samples < 1:
            raise AnnotationError(f"samples must be at least 1, got {samples}")
        if structured not in STRUCTURED:
            raise AnnotationError(
                f"structured must be one of {', '.join(STRUCTURED)}, got {structured!r}"
            )
        headers = {}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise AnnotationError(
                    f"the environment variable {api_key_env} (the API key) is not set"
                )
            headers["Authorization"] = f"Bearer {key}"
            secret(key)
        secret(urllib.parse.urlsplit(base_url).password)
        # what pickling carries (to a Ray worker, which builds its own client)
        self._init_options: dict[str, Any] = {
            "base_url": base_url,
            "api_key_env": api_key_env,
            "method": method,
            "samples": samples,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "top_logprobs": top_logprobs,
            "timeout": timeout,
            "no_response_token": no_response_token,
            "prices": prices,
            "structured": structured,
        }
        self._init_env = {api_key_env: os.environ[api_key_env]} if api_key_env else {}
        self.model = model
        self.base_url = base_url.rstrip("/") + "/"
        #: the endpoint as messages show it (no credentials)
        self.endpoint = redact(self.base_url + "chat/completions")
        self.method = method
        self.samples = samples
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.top_logprobs = top_logprobs
        self.no_response_token = no_response_token
        #: USD per million prompt and completion tokens, for cost estimates (not cached)
        self.prices = None if prices is None else (float(prices[0]), float(prices[1]))
        self._headers, self._timeout = headers, timeout
        self._opened: Any = None  # the HTTP client, made at the first request (needs httpx)
        self._lock = threading.Lock()
        self._logprobs = method != "sampling"
        self.structured = structured
        #: whether judge requests carry ``response_format`` (auto: until the server refuses it)
        self.structuring = structured != "off"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its constructor arguments (and the API key's variable), so that a
        Ray worker builds its own client."""
        return (
            rebuild_annotator,
            (type(self), self.model, dict(self._init_options), dict(self._init_env)),
        )

    def cache_key(self) -> str:
        sampling = (
            f"samples={self.samples};temperature={self.temperature};max_tokens={self.max_tokens}"
        )
        if self.method == "sampling":
            return f"sampling;{sampling}"
        token = self.no_response_token or "prefix"
        return f"{self.method};token={token};top={self.top_logprobs};{sampling}"

    # -- requests ------------------------------------------------------------------------

    def _client(self) -> Any:
        """The HTTP client, made on first use: planning (``--dry-run``) needs no httpx."""
        with self._lock:
            if self._opened is None:
                try:
                    import httpx
                except ImportError as error:
                    raise MissingDependencyError(
                        "the openai-compatible annotator (httpx)", "llm", error
                    ) from error
                self._opened = httpx.Client(
                    base_url=self.base_url, headers=self._headers, timeout=self._timeout
                )
            return self._opened

    def _send(self, body: dict[str, Any], throttle: Throttle, tally: _Tally) -> Any:
        client = self._client()
        import httpx

        url = self.endpoint
        throttle()
        tally.calls += 1
        try:
            response = client.post("chat/completions", json={"model": self.model, **body})
        except httpx.TransportError as error:
            raise RetryableError(
                f"cannot reach {url}: {type(error).__name__}: {redact(str(error))}"
            ) from error
        status = response.status_code
        if status == 429 or status >= 500:
            wait = retry_after(response.headers.get("retry-after"))
            asked = "" if wait is None else f" (Retry-After: {wait:g} s)"
            message = f"{url} answered HTTP {status}{asked}: {_shown(response, 200)}"
            if wait is not None and status in _LIMITED:
                raise RateLimited(message, wait)
            raise RetryableError(message, wait)
        return response

    def _post(self, body: dict[str, Any], throttle: Throttle, tally: _Tally) -> dict[str, Any]:
        url = self.endpoint
        response = self._send(body, throttle, tally)
        refused = response.status_code in _REFUSED and "response_format" in body
        if refused and self.structured == "json-schema":
            raise AnnotationError(
                f"{url} refused the request with response_format (HTTP "
                f"{response.status_code}: {_shown(response, 200)}): it may not support "
                "structured output; use --structured auto (then free text) or off"
            )
        if refused and self.structured == "auto":
            plain = {k: v for k, v in body.items() if k != "response_format"}
            retried = self._send(plain, throttle, tally)
            if retried.status_code < 400:
                with self._lock:
                    self.structuring = False
                log.warning(
                    "annotate.structured_output_refused",
                    url=url,
                    status=response.status_code,
                    reason=_shown(response, 200),
                )
            response = retried
        if response.status_code in _REFUSED:
            raise ItemError(f"{url} answered HTTP {response.status_code}: {_shown(response, 300)}")
        if response.status_code >= 400:
            raise AnnotationError(
                f"{url} answered HTTP {response.status_code}: {_shown(response, 300)}"
            )
        try:
            document = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RetryableError(
                f"{url} answered malformed JSON ({error}): {_shown(response, 200)!r}"
            ) from error
        if isinstance(document, dict):
            tally.add(document)
        if not isinstance(document, dict) or not isinstance(document.get("choices"), list):
            raise RetryableError(
                f"{url} answered without a choices list: {_shown(response, 200)!r}"
            )
        return document

    def _is_no_response(self, token: str) -> bool:
        if self.no_response_token is not None:
            return token == self.no_response_token
        core = token.lstrip().lstrip("Ġ▁")
        return len(core) >= 2 and NO_RESPONSE.startswith(core)

    def _from_logprobs(self, document: dict[str, Any]) -> float | None:
        """p(NO-RESPONSE) from the first position's top logprobs; None if there are none."""
        choices = document["choices"]
        logprobs = choices[0].get("logprobs") if choices and isinstance(choices[0], dict) else None
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if not content:
            return None
        first = content[0]
        entries = {first.get("token"): first.get("logprob")}
        for entry in first.get("top_logprobs") or []:
            entries.setdefault(entry.get("token"), entry.get("logprob"))
        try:
            total = sum(
                math.exp(float(logprob))
                for token, logprob in entries.items()
                if isinstance(token, str) and self._is_no_response(token)
            )
        except (TypeError, ValueError) as error:
            raise RetryableError(f"unreadable logprobs: {error}") from error
        return min(1.0, total)

    def _sample(self, messages: list[dict[str, str]], throttle: Throttle, tally: _Tally) -> float:
        """The abstention frequency of ``samples`` answers."""
        texts: list[str] = []
        calls = 0
        while len(texts) < self.samples and calls < self.samples:
            document = self._post(
                {
                    "messages": messages,
                    "max_tokens": self.max_tokens,
                    "temperature": self.temperature,
                    "n": self.samples - len(texts),
                },
                throttle,
                tally,
            )
            calls += 1
            texts.extend(_text(choice) for choice in document["choices"])
        texts = texts[: self.samples]
        if not texts:
            raise AnnotationError("the server returned no choices to sample from")
        return sum(map(abstains, texts)) / len(texts)

    # -- the protocol --------------------------------------------------------------------

    def p_no_response(self, items: Sequence[UtilityItem], throttle: Throttle) -> BatchResult:
        values: list[float] = []
        with _tallied() as tally:
            for item in items:
                messages = utility_messages(item.question, item.passage)
                value: float | None = None
                if self._logprobs:
                    document = self._post(
                        {
                            "messages": messages,
                            "max_tokens": 1,
                            "temperature": 0,
                            "logprobs": True,
                            "top_logprobs": self.top_logprobs,
                        },
                        throttle,
                        tally,
                    )
                    value = self._from_logprobs(document)
                    if value is None and self.method == "logprobs":
                        raise AnnotationError(
                            f"{self.endpoint} returned no logprobs; use --method sampling (Monte-Carlo) or auto"
                        )
                    if value is None:
                        with self._lock:
                            self._logprobs = False
                if value is None:
                    value = self._sample(messages, throttle, tally)
                values.append(value)
        return tally.result(values)

    def generate(
        self,
        prompts: Sequence[list[dict[str, str]]],
        max_tokens: int,
        throttle: Throttle,
        answer_format: AnswerFormat | None = None,
    ) -> BatchResult:
        texts = []
        with _tallied() as tally:
            for messages in prompts:
                body: dict[str, Any] = {
                    "messages": messages,
                    "max_tokens": max_tokens,
                    "temperature": 0,
                }
                if answer_format is not None and self.structuring:
                    body["response_format"] = answer_format.response_format()
                document = self._post(body, throttle, tally)
                if not document["choices"]:
                    raise RetryableError("the server returned no choices")
                texts.append(_text(document["choices"][0]))
        return tally.result(texts)

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()


def _text(choice: Any) -> str:
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _shown(response: Any, limit: int) -> str:
    """The start of an answer's body, redacted before it is cut (no half a key)."""
    return redact(response.text)[:limit]
