"""pyarrow's look for pandas put off until something imports pandas: the command line
sets this up in its process, and each Ray worker before it scores (docs/scale.md)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import importlib.machinery

__all__ = ["defer_pandas"]


def defer_pandas() -> None:
    """pyarrow imports pandas (0.2-0.35 s and 35 MiB of a fresh process) at its first
    conversion of a list or numpy array, only to ask whether the input is a pandas object;
    before pandas is imported, none can be. So while pandas is not imported, pyarrow is
    told it is absent, and the moment something imports it (a plugin, ``to_pandas``),
    pyarrow is told again: every conversion after that treats pandas objects as pyarrow
    does by default. Nothing to do once pandas is imported, or while it is watched for."""
    if "pandas" in sys.modules or any(isinstance(f, _PandasWatch) for f in sys.meta_path):
        return
    import pyarrow as pa

    watch = _PandasWatch()
    sys.meta_path.insert(0, watch)
    try:
        pa.array([0])  # pyarrow looks for pandas now, once, and finds none
    finally:
        watch.blocking = False


class _PandasWatch:
    """Refuses ``import pandas`` while :attr:`blocking`; afterwards finds pandas as the
    other finders do, and once it has been executed, has pyarrow look for it again. A
    meta path finder by its ``find_spec`` alone: importlib.abc costs a command 7-12 ms."""

    blocking = True

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "pandas":
            return None
        if self.blocking:
            raise ModuleNotFoundError("pandas is not looked for yet", name=name)
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = None if spec is None else spec.loader
        if loader is not None:
            execute = loader.exec_module

            def exec_module(module: ModuleType) -> None:
                execute(module)
                _tell_pyarrow()

            loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _tell_pyarrow() -> None:
    """pyarrow's integration with pandas, now that pandas is imported: a conversion to
    pandas has pyarrow import it again (pyarrow's own check of its version included)."""
    import pyarrow as pa

    with contextlib.suppress(ImportError):  # a pandas pyarrow refuses: as it would have
        pa.array([0]).to_pandas()
