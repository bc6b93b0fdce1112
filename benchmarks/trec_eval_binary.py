"""Build trec_eval 10 from the source tree vendored in ``tests/data/trec_eval-10``.

    python benchmarks/trec_eval_binary.py DEST    # prints the path of the binary

The differential tests (tests/test_trec_eval_binary.py) and the benchmarks run the real
binary built here. It is compiled as trec_eval's Makefile compiles it (``-g``, no
optimisation: ``-O2`` changes trec_eval's ``rbp`` values, an uninitialised read in
m_rbp.c), with every C file of the tree, into ``DEST`` (the tree is not written to).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["SOURCE", "VERSIONID", "build", "why_not"]

SOURCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "trec_eval-10"
VERSIONID = "10.0-rc3"  # the Makefile's


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def why_not() -> str | None:
    """Why trec_eval cannot be built here (None when it can)."""
    if not (SOURCE / "trec_eval.c").is_file():
        return f"no trec_eval source at {SOURCE}"
    if _compiler() is None:
        return "no C compiler (cc or gcc; $CC) on PATH"
    return None


def build(dest: Path) -> Path | None:
    """``dest/trec_eval`` built from :data:`SOURCE`; None when there is no compiler or
    the source is missing (:func:`why_not` says which). A failed compilation raises
    :class:`RuntimeError` with the compiler's messages."""
    compiler = _compiler()
    if why_not() is not None or compiler is None:
        return None
    dest.mkdir(parents=True, exist_ok=True)
    binary = dest / "trec_eval"
    command = [
        compiler,
        "-g",
        "-w",
        f"-I{SOURCE}",
        f'-DVERSIONID="{VERSIONID}"',
        "-o",
        str(binary),
        *sorted(str(path) for path in SOURCE.glob("*.c")),
        "-lm",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"building trec_eval failed:\n{done.stderr}")
    return binary


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    built = build(Path(sys.argv[1]))
    if built is None:
        sys.exit(f"cannot build trec_eval: {why_not()}")
    print(built)
