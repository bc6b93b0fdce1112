"""A stand-in for an LLM: a small chat-completions server (standard library only) on
127.0.0.1 whose "model" is a handful of word rules. It is a **poor judge**; it exists so
that the annotation and label-free walkthroughs, and the tests, run end to end with no
model and no network::

    python -m engine.annotate.stand_in --port 8765

prints ``PORT <n>`` once listening (``--port 0``: any free port). ``GET /stats`` returns
the request counts (all, those with ``response_format``, and by prompt) and the tokens
its answers' ``usage`` reported. Answers follow
the prompt they get:

- UMBRELA (graded relevance): 3, 2, 1 or 0 as the share of the question's words of four
  letters or more that the passage holds is at least 0.8, 0.5, 0.25 or less;
- Figure 5 (relevance against answers): A when the document contains an acceptable answer;
- Figure 6 (answer grading): C for NO-RESPONSE, A when the answer contains an acceptable one;
- claims: the reference answer's sentences (prose when it says GARBLE, none for NOTHING);
- support: A when every word of four letters or more of the claim is in the passage
  (prose when the claim says GARBLE);
- a question for a passage: "What about" and the passage's first five words of four
  letters or more;
- the utility prompt (Figure 4): ``logprobs`` in which ``NO`` has probability
  :func:`expected_p` of the user message, or, with ``--mode sampling``, no logprobs and
  that share of ``n`` sampled answers saying NO-RESPONSE.

A request with ``response_format`` (a JSON schema) gets the bare JSON object; without it,
a fenced JSON object (UMBRELA: ``##final score: N``). Faults, for tests: ``--mode
malformed`` (200 with a body that is not JSON), ``--mode fail`` (503); ``--fail-first N``
(503 to the first N requests), ``--throttle-first N`` (429 with ``Retry-After:
--retry-after`` seconds to the first N), ``--throttle-for S`` (the same 429 to every
request for S seconds from the first), ``--drop-first N`` (the first N connections closed
without an answer), ``--no-structured`` (400 to any request with ``response_format``),
``--bias N`` (N added to every UMBRELA grade, kept within 0-3: a harsher or kinder
judge), ``--unreadable SHARE`` (prose that no reader accepts to that share of the judge prompts,
chosen by their hash: the same prompts every time), ``--canned FILE`` (a JSON object: a
prompt that contains one of its keys gets that answer text as it is, or, for
``{"status": N}``, that HTTP status every time), ``--reflect-errors STATUS`` (that status
to every request, its body echoing the request's headers and body, as careless endpoints
do).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["expected_p", "main", "supports", "umbrela_grade"]


def expected_p(user_message: str) -> float:
    """The server's p(NO-RESPONSE) for a utility prompt: a fixed function of its text."""
    digest = hashlib.sha256(user_message.encode("utf-8")).hexdigest()
    return (int(digest[:8], 16) % 997 + 1) / 999


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _long_words(text: str) -> set[str]:
    return {word for word in _words(text) if len(word) >= 4}


def supports(claim: str, passage: str) -> bool:
    """The server's support verdict: every word of 4+ letters of the claim is in the passage."""
    return _long_words(claim) <= _words(passage)


def umbrela_grade(query: str, passage: str) -> int:
    """The server's UMBRELA grade: by the share of the query's 4+-letter words in the passage."""
    wanted = _long_words(query)
    share = len(wanted & _words(passage)) / len(wanted) if wanted else 0.0
    return 3 if share >= 0.8 else 2 if share >= 0.5 else 1 if share >= 0.25 else 0


def _field(prompt: str, start: str, end: str) -> str:
    found = re.search(re.escape(start) + r"(.*?)" + re.escape(end), prompt, re.DOTALL)
    return found.group(1) if found else ""


def _answers(prompt: str) -> list[str]:
    match = re.search(r"Acceptable answers list: (\[.*?\])\n", prompt)
    return [str(a).lower() for a in ast.literal_eval(match.group(1))] if match else []


def _judged(prompt: str) -> tuple[str, Any]:
    """(the answer's JSON field, its value) for a judge prompt; ("", prose) when the
    stand-in declines to answer in the format."""
    if "Split the reference answer" in prompt:
        reference = prompt.split("Reference answer: ")[-1].split("\n\nReturn a JSON")[0]
        if "GARBLE" in reference:
            return "", "I would rather not split this answer."
        sentences = re.split(r"(?<=\.)\s+", reference.strip())
        return "claims", [s for s in sentences if s and "NOTHING" not in s]
    if "Determine if a passage SUPPORTS a claim" in prompt:
        claim = _field(prompt, "\nClaim: ", "\nPassage: ")
        if "GARBLE" in claim:
            return "", "Hard to say."
        passage = _field(prompt, "\nPassage: ", "\n```")
        return "grade", "A" if supports(claim, passage) else "B"
    if "you must provide a score on an integer scale of 0 to 3" in prompt:
        query = _field(prompt, "\nQuery: ", "\nPassage: ")
        passage = _field(prompt, "\nPassage: ", "\n\nSplit this problem")
        return "final_score", umbrela_grade(query, passage)
    if "Write one question" in prompt:
        passage = _field(prompt, "\nPassage: ", "\n\nReturn a JSON")
        words = [w for w in re.findall(r"[A-Za-z0-9]+", passage) if len(w) >= 4][:5]
        return "question", f"What about {' '.join(words)}?"
    answers = _answers(prompt)
    if "Determine if a document is RELEVANT" in prompt:
        text = _field(prompt, "Document: ", "\n```").lower()
        return "grade", "A" if any(a in text for a in answers) else "B"
    text = _field(prompt, "Predicted answer: ", "\n").lower()
    return "grade", "C" if "no-response" in text else "A" if any(
        a in text for a in answers
    ) else "B"


def judge_answer(prompt: str, structured: bool, bias: int = 0) -> str:
    """The answer to a one-turn prompt: the bare JSON object when ``structured``, else
    fenced JSON (UMBRELA: its ``##final score: N`` line); ``bias`` is added to UMBRELA
    grades (kept within 0-3)."""
    key, value = _judged(prompt)
    if key == "final_score":
        value = min(3, max(0, value + bias))
    if not key:
        return str(value)
    document = {key: value} if key != "grade" else {"motivation": "compared the words", key: value}
    if structured:
        return json.dumps(document)
    if key == "final_score":
        return f"##final score: {value}"
    return f"```json\n{json.dumps(document)}\n```"


class State:
    """The server's settings and counters."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.mode = args.mode
        self.delay = args.delay
        self.fail_first = args.fail_first
        self.throttle_first = args.throttle_first
        self.throttle_for = args.throttle_for
        self.unreadable = args.unreadable
        self.bias = args.bias
        self.retry_after = args.retry_after
        self.drop_first = args.drop_first
        self.structured = not args.no_structured
        self.reflect: int | None = args.reflect_errors
        self.canned: dict[str, Any] = (
            json.loads(Path(args.canned).read_text(encoding="utf-8")) if args.canned else {}
        )
        self.requests = 0
        self.first: float | None = None  # when the first request came (time.monotonic)
        self.structured_requests = 0  # requests that carried response_format
        self.tokens = {"prompt_tokens": 0, "completion_tokens": 0}  # the answers' usage
        self.by_prompt: dict[str, int] = {}
        self.lock = threading.Lock()


def _completion(
    body: dict[str, Any], mode: str, canned: str | None, bias: int = 0
) -> dict[str, Any]:
    messages = body["messages"]
    user = messages[-1]["content"]
    usage = {"prompt_tokens": sum(len(m["content"].split()) for m in messages)}
    if messages[0]["role"] != "system":  # a judge prompt
        text = canned if canned is not None else judge_answer(user, "response_format" in body, bias)
        usage["completion_tokens"] = len(text.split())
        return {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        }
    p = expected_p(user)
    if mode == "logprobs" and body.get("logprobs"):
        top = [
            {"token": "NO", "logprob": math.log(p)},
            {"token": "Paris", "logprob": math.log((1 - p) * 0.7)},
            {"token": " N", "logprob": math.log((1 - p) * 0.2)},
        ]
        token = top[0] if p >= 0.5 else top[1]
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": token["token"]},
            "logprobs": {
                "content": [{**token, "top_logprobs": top[: body.get("top_logprobs", 3)]}]
            },
        }
        usage["completion_tokens"] = 1
        return {"choices": [choice], "usage": usage}
    n = int(body.get("n") or 1)
    abstaining = round(p * n)
    choices = [
        {
            "index": j,
            "message": {
                "role": "assistant",
                "content": "NO-RESPONSE" if j < abstaining else "Paris",
            },
            "logprobs": None,
        }
        for j in range(n)
    ]
    usage["completion_tokens"] = n
    return {"choices": choices, "usage": usage}


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    """The request handler of a server with ``state``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            with state.lock:
                stats = {
                    "requests": state.requests,
                    "structured": state.structured_requests,
                    "by_prompt": dict(state.by_prompt),
                    **state.tokens,
                }
            self._send(200, json.dumps(stats).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][-1]["content"]
            key = hashlib.sha256(prompt.encode()).hexdigest()
            with state.lock:
                state.requests += 1
                state.by_prompt[key] = state.by_prompt.get(key, 0) + 1
                state.structured_requests += "response_format" in body
                number = state.requests
                state.first = state.first or time.monotonic()
                storm = time.monotonic() - state.first < state.throttle_for
            if state.delay:
                time.sleep(state.delay)
            canned = next((v for k, v in state.canned.items() if k in prompt), None)
            if int(key[:8], 16) / 16**8 < state.unreadable:
                canned = "I would rather not say."
            if state.reflect is not None:
                echoed = {
                    "error": "reflected",
                    "headers": dict(sorted(self.headers.items())),
                    "body": body,
                }
                self._send(state.reflect, json.dumps(echoed).encode())
            elif number <= state.drop_first:
                self.close_connection = True
                self.connection.shutdown(2)
            elif storm or number <= state.drop_first + state.throttle_first:
                self._send(429, b'{"error": "slow down"}', {"Retry-After": state.retry_after})
            elif state.mode == "fail" or number <= sum(
                (state.drop_first, state.throttle_first, state.fail_first)
            ):
                self._send(503, b'{"error": "overloaded"}')
            elif isinstance(canned, dict):
                self._send(int(canned["status"]), b'{"error": "canned failure"}')
            elif state.mode == "malformed":
                self._send(200, b'{"choices": [{"message": ')
            elif not self.path.endswith("/chat/completions"):
                self._send(404, b'{"error": "not found"}')
            elif "response_format" in body and not state.structured:
                self._send(400, b'{"error": "response_format is not supported"}')
            else:
                completion = _completion(body, state.mode, canned, state.bias)
                with state.lock:
                    for name in state.tokens:
                        state.tokens[name] += completion["usage"][name]
                self._send(200, json.dumps(completion).encode())

    return Handler


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m engine.annotate.stand_in",
        description="A stand-in chat-completions server (word rules, not a model): for the "
        "walkthroughs and tests.",
    )
    parser.add_argument(
        "--mode", choices=("logprobs", "sampling", "malformed", "fail"), default="logprobs"
    )
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--fail-first", type=int, default=0, help="503 to the first N requests")
    parser.add_argument("--throttle-first", type=int, default=0, help="429 to the first N")
    parser.add_argument(
        "--throttle-for", type=float, default=0.0, help="429 to all for S seconds from the first"
    )
    parser.add_argument("--retry-after", default="1", help="the 429s' Retry-After header")
    parser.add_argument("--drop-first", type=int, default=0, help="close the first N unanswered")
    parser.add_argument(
        "--no-structured", action="store_true", help="refuse response_format (HTTP 400)"
    )
    parser.add_argument(
        "--unreadable", type=float, default=0.0, help="unreadable answers to this share of judges"
    )
    parser.add_argument(
        "--bias", type=int, default=0, help="add this to every UMBRELA grade (kept within 0-3)"
    )
    parser.add_argument("--canned", help="JSON file: prompt substring -> answer text or {status}")
    parser.add_argument(
        "--reflect-errors",
        type=int,
        metavar="STATUS",
        help="answer every request with this HTTP status, echoing its headers and body",
    )
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(State(args)))
    server.daemon_threads = True
    server.handle_error = lambda *_: None  # type: ignore[method-assign]  # clients that hang up
    print(f"PORT {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
