"""Secrets are never printed (issue 60): a password in ``--base-url`` and the API key
(``--api-key-env``) are redacted, shown as ``***``, from stdout, stderr, the log events
and every file ``slotwise annotate`` writes, against the real stand-in server over HTTP
(engine.annotate.stand_in) -- one that fails, and one whose error bodies reflect the
request's headers (the Authorization header among them)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from engine.redact import redact, secret

PASSWORD = "s3cr3t"
KEY = "sk-slotwise-test-4f2a9c71e0"
#: The URL's credentials as httpx sends them (HTTP Basic): a secret too.
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, KEY, BASIC)


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """A dataset of two questions and their retrieved passages (six items to annotate)."""
    samples = [
        {"id": f"q{i}", "input": {"question": f"What is {topic}?"}, "expected_output": {}}
        for i, topic in enumerate(("Paris", "Lyon"))
    ]
    outputs = {
        s["id"]: {"retrieved": [{"id": f"d{j}", "text": f"Passage {j}."} for j in range(3)]}
        for s in samples
    }
    dataset, retrieved = tmp_path / "in" / "data.jsonl", tmp_path / "in" / "outputs.json"
    dataset.parent.mkdir()
    dataset.write_text("".join(json.dumps(s) + "\n" for s in samples))
    retrieved.write_text(json.dumps(outputs))
    return dataset, retrieved


def _annotate(
    tmp_path: Path, port: int, *extra: str, log_format: str = "console"
) -> subprocess.CompletedProcess[str]:
    """``slotwise -vv annotate`` against the stand-in at ``port``, the URL with a password
    and the key in the environment, writing under tmp_path/out."""
    dataset, retrieved = _files(tmp_path)
    (tmp_path / "out").mkdir()
    command = [
        *(sys.executable, "-m", "engine.cli", "-vv", "--log-format", log_format, "annotate"),
        *(str(dataset), "--outputs", str(retrieved), "--output", str(tmp_path / "out" / "l.jsonl")),
        *("--annotator", "openai-compatible", "--model", "tiny-chat", "--backoff", "0.01"),
        *("--base-url", f"http://user:{PASSWORD}@127.0.0.1:{port}/v1"),
        *("--api-key-env", "SLOTWISE_TEST_KEY", "--retries", "1", *extra),
    ]
    env = {**os.environ, "SLOTWISE_TEST_KEY": KEY, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False
    )


def _assert_nothing_leaked(done: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    written = [path for path in (tmp_path / "out").iterdir() if path.is_file()]
    assert written, "the command wrote nothing"
    for name, text in [("stdout", done.stdout), ("stderr", done.stderr)] + [
        (path.name, path.read_bytes().decode("utf-8", "replace")) for path in written
    ]:
        for value in SECRETS:
            assert value not in text, f"{value!r} in {name}:\n{text}"


def test_a_password_in_the_base_url_is_never_printed(
    server_factory: object, tmp_path: Path
) -> None:
    """Every call fails (503): the reasons, the log events, the list of what was left
    unlabelled and the command to run again show the URL as ``http://***@...``."""
    server = server_factory("--mode", "fail")  # type: ignore[operator]
    done = _annotate(tmp_path, server.port)
    assert done.returncode == 3, done.stderr
    _assert_nothing_leaked(done, tmp_path)
    assert f"http://***@127.0.0.1:{server.port}/v1/chat/completions answered HTTP 503" in (
        done.stderr
    )
    assert f"--base-url 'http://***@127.0.0.1:{server.port}/v1'" in done.stderr  # the re-run


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, 3), (500, 3), (401, 2)],
    ids=["refused-item", "retried", "run-stopped"],
)
@pytest.mark.parametrize("log_format", ["console", "json"])
def test_an_error_body_that_reflects_the_request_prints_no_key(
    server_factory: object, tmp_path: Path, status: int, code: int, log_format: str
) -> None:
    """The endpoint echoes the request's headers in its error body: the Bearer key (and
    the URL's Basic credentials) are redacted where the reason is printed or logged:
    an item refused (400), a call retried (500), the run stopped (401)."""
    server = server_factory("--reflect-errors", str(status))  # type: ignore[operator]
    done = _annotate(tmp_path, server.port, log_format=log_format)
    assert done.returncode == code, done.stderr
    _assert_nothing_leaked(done, tmp_path)
    assert f"answered HTTP {status}" in done.stderr
    assert '"Authorization": "***"' in done.stderr.replace('\\"', '"')  # JSON logs escape "


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:pw@example.com/v1", "https://***@example.com/v1"),
        ("https://ghp_token@example.com/", "https://***@example.com/"),
        ("GET /v1?api_key=abc123&x=1", "GET /v1?api_key=***&x=1"),
        ("https://h/?sig=abc%2F&token=t0&key=k", "https://h/?sig=***&token=***&key=***"),
        ("&access_token=xyz#frag", "&access_token=***#frag"),
        ("Authorization: Bearer abc.def", "Authorization: ***"),
        ('{"authorization": "Basic dXNlcjpw"}', '{"authorization": "***"}'),
        ("sent Bearer abc-123 along", "sent Bearer *** along"),
        ("keys=3 key_count=2 monkey=1", "keys=3 key_count=2 monkey=1"),
        ("user@example.com wrote", "user@example.com wrote"),
    ],
)
def test_redact(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_a_known_secret_is_redacted_wherever_it_is() -> None:
    secret("k3y-value-only-here")
    assert redact("echo: k3y-value-only-here!") == "echo: ***!"
