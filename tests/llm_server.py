"""A small chat-completions server (stdlib only) for the annotator tests: a real HTTP
endpoint on 127.0.0.1, started as a subprocess.

    python tests/llm_server.py --mode logprobs [--delay S] [--fail-first N]

prints ``PORT <n>`` once listening. ``GET /stats`` returns the request counts.

Modes: ``logprobs`` answers with ``logprobs``/``top_logprobs`` in which the token ``NO``
has probability :func:`expected_p` of the user message; ``sampling`` returns no logprobs,
and of ``n`` sampled answers the first ``round(p * n)`` say NO-RESPONSE; ``malformed``
answers 200 with a body that is not JSON; ``fail`` answers 503. ``--fail-first N`` answers
503 to the first N POSTs, then behaves as the mode says. Judge prompts (Figures 5, 6) get
a fenced JSON grade decided by whether an acceptable answer appears in the text. Claim
prompts get the reference answer's sentences as a fenced ``{"claims": [...]}`` (prose
when the reference says GARBLE, no claims when it says NOTHING); support prompts get A
(SUPPORTED) when every word of four letters or more of the claim is a word of the passage
(prose when the claim says GARBLE).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import math
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def expected_p(user_message: str) -> float:
    """The server's p(NO-RESPONSE) for a utility prompt: a fixed function of its text."""
    digest = hashlib.sha256(user_message.encode("utf-8")).hexdigest()
    return (int(digest[:8], 16) % 997 + 1) / 999


def _answers(prompt: str) -> list[str]:
    match = re.search(r"Acceptable answers list: (\[.*?\])\n", prompt)
    return [str(a).lower() for a in ast.literal_eval(match.group(1))] if match else []


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def supports(claim: str, passage: str) -> bool:
    """The server's support verdict: every word of 4+ letters of the claim is in the passage."""
    return {w for w in _words(claim) if len(w) >= 4} <= _words(passage)


def claims_answer(prompt: str) -> str:
    """The reference answer's sentences as a fenced JSON claim list."""
    reference = prompt.split("Reference answer: ")[-1].split("\n\nReturn a JSON")[0]
    if "GARBLE" in reference:
        return "I would rather not split this answer."
    sentences = [s for s in re.split(r"(?<=\.)\s+", reference.strip()) if s and "NOTHING" not in s]
    return f"Here are the claims:\n```json\n{json.dumps({'claims': sentences})}\n```"


def support_answer(prompt: str) -> str:
    """A fenced JSON grade for a support prompt."""
    claim = re.search(r"\nClaim: (.*?)\nPassage: ", prompt, re.DOTALL)
    passage = re.search(r"\nPassage: (.*?)\n```", prompt, re.DOTALL)
    text = claim.group(1) if claim else ""
    if "GARBLE" in text:
        return "Hard to say."
    grade = "A" if passage and supports(text, passage.group(1)) else "B"
    return f'```json\n{{"motivation": "compared the words", "grade": "{grade}"}}\n```'


def judge_answer(prompt: str) -> str:
    """The answer to a one-turn prompt: a judge's fenced JSON grade (Figures 5, 6 and
    support) or a claim list."""
    if "Split the reference answer" in prompt:
        return claims_answer(prompt)
    if "Determine if a passage SUPPORTS a claim" in prompt:
        return support_answer(prompt)
    answers = _answers(prompt)
    if "Determine if a document is RELEVANT" in prompt:
        document = re.search(r"Document: (.*?)\n```", prompt, re.DOTALL)
        text = document.group(1).lower() if document else ""
        grade = "A" if any(a in text for a in answers) else "B"
    else:
        predicted = re.search(r"Predicted answer: (.*?)\n", prompt)
        text = predicted.group(1).lower() if predicted else ""
        grade = "C" if "no-response" in text else "A" if any(a in text for a in answers) else "B"
    return f'Sure.\n```json\n{{"motivation": "checked the text", "grade": "{grade}"}}\n```'


class State:
    def __init__(self, mode: str, delay: float, fail_first: int) -> None:
        self.mode = mode
        self.delay = delay
        self.fail_first = fail_first
        self.requests = 0
        self.by_prompt: dict[str, int] = {}
        self.lock = threading.Lock()


def _completion(body: dict[str, Any], mode: str) -> dict[str, Any]:
    messages = body["messages"]
    user = messages[-1]["content"]
    usage = {"prompt_tokens": sum(len(m["content"].split()) for m in messages)}
    if messages[0]["role"] != "system":  # a judge prompt
        text = judge_answer(user)
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
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            with state.lock:
                stats = {"requests": state.requests, "by_prompt": dict(state.by_prompt)}
            self._send(200, json.dumps(stats).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            key = hashlib.sha256(body["messages"][-1]["content"].encode()).hexdigest()
            with state.lock:
                state.requests += 1
                state.by_prompt[key] = state.by_prompt.get(key, 0) + 1
                failing = state.requests <= state.fail_first
            if state.delay:
                time.sleep(state.delay)
            if failing or state.mode == "fail":
                self._send(503, b'{"error": "overloaded"}')
            elif state.mode == "malformed":
                self._send(200, b'{"choices": [{"message": ')
            elif not self.path.endswith("/chat/completions"):
                self._send(404, b'{"error": "not found"}')
            else:
                self._send(200, json.dumps(_completion(body, state.mode)).encode())

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--mode", choices=("logprobs", "sampling", "malformed", "fail"), default="logprobs"
    )
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    state = State(args.mode, args.delay, args.fail_first)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state))
    server.handle_error = lambda *_: None  # type: ignore[method-assign]  # clients that hang up
    print(f"PORT {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
