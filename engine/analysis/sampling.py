"""Drawing the units people should label, and the design they were drawn by.

A unit is a query (the unit of prediction-powered inference: people label the query's
pairs) or a query-document pair (to measure the judge). Three designs:

- ``uniform``: a simple random sample of ``size`` units without replacement (π = n/N);
- ``stratified``: a simple random sample in each stratum (a metadata field's value, the
  judge's grade, a band of the systems' disagreement), ``size`` allocated to the strata
  in proportion to their size (or equally), at least 2 each where the stratum has them
  (PPI needs 2 per stratum): π = n_h/N_h;
- ``active`` (Zrnic and Candès, "Active Statistical Inference", ICML 2024): Poisson
  sampling, unit i drawn independently with probability π_i ∝ its uncertainty (the
  judge's expected error, as a standard deviation) mixed with the uniform share ``mix``
  so that no weight 1/π_i is larger than N/(mix·n), scaled so that Σπ_i = ``size`` (the
  expected sample size; the drawn size varies around it) and capped at 1.

Units already labelled (``exclude``) are taken out of the population before drawing.
:func:`write_sample` writes ``SAMPLE.jsonl`` (one unit a line: ``query_id``, ``doc_id``
for pairs, ``stratum``, ``probability`` = π_i) and ``SAMPLE.design.json`` beside it
(:class:`Design`), atomically. A stratified query design also records every population
unit's stratum (``assignment``), which stratified PPI reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from engine.errors import InputError, Problem
from engine.io.writer import AtomicFile
from engine.version import VERSION

__all__ = [
    "DESIGN_FORMAT",
    "Design",
    "DrawnSample",
    "Unit",
    "active_probabilities",
    "design_path",
    "draw",
    "read_design",
    "read_sample",
    "recorded_sample",
    "size_for",
    "write_sample",
]

DESIGN_FORMAT = "slotwise.sample-design/1"
UNITS = ("query", "pair")
METHODS = ("uniform", "stratified", "active")
#: The stratum of every unit of a design without strata.
ALL = "all"


@attrs.frozen
class Design:
    """How a sample was drawn (``SAMPLE.design.json``): ``population`` is the number of
    units it was drawn from (after ``excluded`` already-labelled ones were taken out),
    ``strata`` maps each stratum to its ``population`` and ``drawn`` counts, ``budget``
    what the size was derived from (None when ``size`` was given), ``assignment`` the
    stratum of every population unit (stratified query designs; {} otherwise)."""

    unit: str
    method: str
    seed: int
    population: int
    strata: Mapping[str, Mapping[str, int]]
    excluded: int = 0
    budget: Mapping[str, Any] | None = None
    dataset: str = ""
    created_by: str = f"slotwise {VERSION}"
    assignment: Mapping[str, str] = attrs.field(factory=dict)
    format: str = DESIGN_FORMAT

    @property
    def drawn(self) -> int:
        return sum(int(counts["drawn"]) for counts in self.strata.values())

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "format": self.format,
            "unit": self.unit,
            "method": self.method,
            "seed": self.seed,
            "population": self.population,
            "strata": {name: dict(counts) for name, counts in self.strata.items()},
            "excluded": self.excluded,
            "budget": None if self.budget is None else dict(self.budget),
            "dataset": self.dataset,
            "created_by": self.created_by,
        }
        if self.assignment:
            found["assignment"] = dict(self.assignment)
        return found

    @classmethod
    def from_dict(cls, data: Any, source: str = "design") -> Design:
        """The design of a ``SAMPLE.design.json`` document; :class:`InputError` naming
        the key when one is missing or wrong."""

        def fail(message: str, pointer: str = "") -> InputError:
            return InputError([Problem(message, pointer=pointer, source=source)],
                              summary="invalid sample design")  # fmt: skip

        if not isinstance(data, Mapping):
            raise fail("a sample design is a JSON object")
        if data.get("format") != DESIGN_FORMAT:
            raise fail(f"format must be {DESIGN_FORMAT!r}, got {data.get('format')!r}", "/format")
        for key in ("unit", "method", "seed", "population", "strata", "excluded"):
            if key not in data:
                raise fail(f"missing {key!r}", f"/{key}")
        if data["unit"] not in UNITS:
            raise fail(f"unit must be one of {UNITS}, got {data['unit']!r}", "/unit")
        if data["method"] not in METHODS:
            raise fail(f"method must be one of {METHODS}, got {data['method']!r}", "/method")
        strata = data["strata"]
        if not isinstance(strata, Mapping) or not all(
            isinstance(c, Mapping) and {"population", "drawn"} <= set(c) for c in strata.values()
        ):
            raise fail("strata maps names to {population, drawn}", "/strata")
        return cls(
            unit=data["unit"],
            method=data["method"],
            seed=int(data["seed"]),
            population=int(data["population"]),
            strata={
                str(k): {"population": int(v["population"]), "drawn": int(v["drawn"])}
                for k, v in strata.items()
            },
            excluded=int(data["excluded"]),
            budget=data.get("budget"),
            dataset=str(data.get("dataset", "")),
            created_by=str(data.get("created_by", "")),
            assignment={str(k): str(v) for k, v in (data.get("assignment") or {}).items()},
        )


@attrs.frozen
class Unit:
    """One drawn unit: its query, its document (pair units; None for queries), its
    stratum and its inclusion probability π."""

    query_id: str
    doc_id: str | None
    stratum: str
    probability: float

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"query_id": self.query_id}
        if self.doc_id is not None:
            found["doc_id"] = self.doc_id
        found["stratum"] = self.stratum
        found["probability"] = self.probability
        return found


@attrs.frozen
class DrawnSample:
    """The units drawn, in population order, and their design."""

    units: tuple[Unit, ...]
    design: Design

    def probabilities(self) -> dict[tuple[str, str | None], float]:
        """π of each drawn unit by (query id, doc id or None)."""
        return {(u.query_id, u.doc_id): u.probability for u in self.units}

    def queries(self) -> list[str]:
        """The drawn units' queries, once each, in order."""
        return list(dict.fromkeys(u.query_id for u in self.units))


def design_path(sample: str | Path) -> Path:
    """``SAMPLE.design.json`` beside ``SAMPLE.jsonl``."""
    sample = Path(sample)
    stem = sample.name[: -len(".jsonl")] if sample.name.endswith(".jsonl") else sample.name
    return sample.with_name(f"{stem}.design.json")


def _sample_path(design: Path) -> Path:
    name = design.name
    if not name.endswith(".design.json"):
        raise InputError(
            [Problem("a design file is named SAMPLE.design.json", source=str(design))],
            summary="invalid sample design",
        )
    return design.with_name(name[: -len(".design.json")] + ".jsonl")


def _loaded_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError([Problem(f"cannot read: {error.strerror}", source=str(path))],
                         summary="cannot read the sample design") from None  # fmt: skip
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError([Problem(f"not JSON: {error}", source=str(path))],
                         summary="invalid sample design") from None  # fmt: skip


def read_design(path: str | Path) -> Design:
    """The :class:`Design` of a ``SAMPLE.design.json`` file."""
    return Design.from_dict(_loaded_json(Path(path)), str(path))


def read_sample(path: str | Path) -> DrawnSample:
    """The units of ``SAMPLE.jsonl`` with the design beside it; ``path`` names either
    file. Every line is checked (the line number named when one is wrong)."""
    path = Path(path)
    if path.name.endswith(".design.json"):
        design_file, sample_file = path, _sample_path(path)
    else:
        design_file, sample_file = design_path(path), path
    design = read_design(design_file)
    units, problems = [], []
    try:
        lines = sample_file.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InputError([Problem(f"cannot read: {error.strerror}", source=str(sample_file))],
                         summary="cannot read the sample") from None  # fmt: skip
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            unit = Unit(
                str(row["query_id"]),
                None if row.get("doc_id") is None else str(row["doc_id"]),
                str(row["stratum"]),
                float(row["probability"]),
            )
        except KeyError as error:
            problems.append(Problem(f"not a sample unit: no {error.args[0]!r}",
                                    source=str(sample_file), line=number))  # fmt: skip
            continue
        except (json.JSONDecodeError, TypeError, ValueError) as error:
            problems.append(Problem(f"not a sample unit: {error}", source=str(sample_file),
                                    line=number))  # fmt: skip
            continue
        if not 0 < unit.probability <= 1:
            problems.append(Problem(f"probability {unit.probability} is not in (0, 1]",
                                    unit.query_id, "/probability", str(sample_file), number))  # fmt: skip
        if (unit.doc_id is None) != (design.unit == "query"):
            problems.append(Problem(f"a {design.unit} unit {'has' if unit.doc_id else 'lacks'} "
                                    "a doc_id", unit.query_id, "/doc_id", str(sample_file), number))  # fmt: skip
        units.append(unit)
    if problems:
        raise InputError(problems, summary="invalid sample")
    return DrawnSample(tuple(units), design)


def recorded_sample(dataset: Any) -> DrawnSample | None:
    """The query sample a dataset of human labels records it was drawn by (``slotwise
    labels import`` writes ``metadata.sample.design`` and its ``design_sha256``), or None
    when it records none (or a design of pairs). A design file that is gone, or changed
    since (another SHA-256), is an error naming it."""
    import hashlib

    recorded = {
        (str(where["design"]), where.get("design_sha256"))
        for sample in dataset.samples
        if isinstance(where := (sample.metadata or {}).get("sample"), Mapping)
        and where.get("unit") == "query"
        and where.get("design")
    }
    if not recorded:
        return None
    if len(recorded) > 1:
        raise InputError([Problem(f"the human labels record {len(recorded)} designs: pass one "
                                  "with --design")], summary="which design?")  # fmt: skip
    ((path, digest),) = recorded
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputError([Problem(f"the human labels were drawn by this design, which cannot be "
                                  f"read ({error.strerror}): pass --design", source=path)],
                         summary="cannot weigh by the design") from None  # fmt: skip
    if digest and hashlib.sha256(data).hexdigest() != digest:
        raise InputError([Problem("the design changed since the labels were imported "
                                  "(another SHA-256)", source=path)],
                         summary="cannot weigh by the design")  # fmt: skip
    return read_sample(path)


def write_sample(sample: DrawnSample, path: str | Path) -> Path:
    """Write ``path`` (JSON Lines, one unit a line) and the design beside it, each
    atomically; returns the design's path."""
    with AtomicFile(path) as handle:
        for unit in sample.units:
            handle.write(json.dumps(unit.to_dict(), ensure_ascii=False) + "\n")
    design = design_path(path)
    with AtomicFile(design) as handle:
        handle.write(json.dumps(sample.design.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return design


def active_probabilities(
    uncertainty: npt.ArrayLike, size: float, *, mix: float = 0.2
) -> npt.NDArray[np.float64]:
    """Inclusion probabilities π_i ∝ (1 - mix)·u_i/mean(u) + mix, scaled so that they
    sum to ``size`` with none above 1 (the excess of capped units spread over the
    others). ``mix`` > 0 bounds every weight 1/π_i by N/(mix·size); an uncertainty that
    is 0 everywhere gives the uniform size/N."""
    u = np.asarray(uncertainty, dtype=np.float64)
    if u.ndim != 1 or not u.size:
        raise ValueError("uncertainty must be a non-empty 1-d array")
    if not np.isfinite(u).all() or (u < 0).any():
        raise ValueError("uncertainty must be finite and >= 0")
    if not 0 < mix <= 1:
        raise ValueError(f"mix must be in (0, 1], got {mix}")
    if not 0 < size <= u.size:
        raise ValueError(f"the expected size must be in (0, {u.size}], got {size}")
    mean = u.mean()
    weight = ((1 - mix) * u / mean if mean > 0 else np.zeros_like(u)) + mix
    capped = np.zeros(u.size, dtype=np.bool_)
    for _ in range(u.size):  # each pass caps at least one more unit, or stops
        scale = (size - capped.sum()) / weight[~capped].sum()
        over = ~capped & (scale * weight >= 1)
        if not over.any():
            break
        capped |= over
    return np.where(capped, 1.0, np.minimum(scale * weight, 1.0))


def _allocate(sizes: npt.NDArray[np.int64], size: int, equal: bool) -> npt.NDArray[np.int64]:
    """``size`` units over strata of ``sizes`` units: proportional (largest remainder) or
    equal shares, each stratum at least min(2, its size), none above its size."""
    floor = np.minimum(sizes, 2)
    if floor.sum() > size:
        raise ValueError(
            f"{size} units cannot give each of {sizes.size} strata the 2 units PPI needs "
            f"(at least {int(floor.sum())})"
        )
    target = np.full(sizes.size, size / sizes.size) if equal else size * sizes / sizes.sum()
    drawn = np.clip(np.floor(target).astype(np.int64), floor, sizes)
    while drawn.sum() != size:  # at most a few passes: one unit per stratum each
        room = (drawn < sizes) if drawn.sum() < size else (drawn > floor)
        gap = (target - drawn) if drawn.sum() < size else (drawn - target)
        order = np.argsort(np.where(room, -gap, np.inf), kind="stable")
        take = order[: min(abs(size - int(drawn.sum())), int(room.sum()))]
        drawn[take] += 1 if drawn.sum() < size else -1
    return drawn


def draw(
    query_ids: Sequence[str],
    size: int,
    *,
    doc_ids: Sequence[str] | None = None,
    strata: Sequence[str] | None = None,
    uncertainty: npt.ArrayLike | None = None,
    exclude: Collection[Any] = (),
    seed: int = 0,
    allocation: str = "proportional",
    mix: float = 0.2,
    budget: Mapping[str, Any] | None = None,
    dataset: str = "",
) -> DrawnSample:
    """Draw ``size`` units (the expected size for active sampling) from the population
    ``query_ids`` (with ``doc_ids``: the pairs ``(query_ids[i], doc_ids[i])``): uniform,
    ``stratified`` by the strata labels given, or ``active`` with π ∝ ``uncertainty``
    mixed with ``mix`` uniform. ``exclude``: query ids (or (query, doc) pairs) already
    labelled, never drawn. Seeded: the same arguments draw the same sample."""
    import pyarrow as pa
    import pyarrow.compute as pc

    queries = pa.array([str(q) for q in query_ids], pa.string())
    docs = None if doc_ids is None else pa.array([str(d) for d in doc_ids], pa.string())
    if docs is not None and len(docs) != len(queries):
        raise ValueError(f"{len(docs)} documents for {len(queries)} queries")
    keys = _keys(queries, docs)
    if pc.count_distinct(keys).as_py() != len(keys):
        raise ValueError("the population lists a unit twice")
    if strata is not None and uncertainty is not None:
        raise ValueError("draw stratified or active, not both")
    if allocation not in ("proportional", "equal"):
        raise ValueError(f"allocation must be proportional or equal, got {allocation!r}")
    if strata is not None and len(strata) != len(keys):
        raise ValueError(f"{len(strata)} strata for {len(keys)} units")
    given = pa.array([ALL] if strata is None else [str(s) for s in strata], pa.string())
    encoded = given.dictionary_encode()
    found = encoded.dictionary.to_pylist()
    names = sorted(found)
    remap = np.asarray([names.index(name) for name in found], dtype=np.int64)
    codes_all = remap[encoded.indices.to_numpy(zero_copy_only=False)]
    if strata is None:
        codes_all = np.zeros(len(keys), dtype=np.int64)
    keep = ~_excluded(keys, exclude, docs is not None)
    available = np.flatnonzero(keep)
    population = available.size
    if size < 1:
        raise ValueError(f"the sample size must be at least 1, got {size}")
    if size > population:
        raise ValueError(
            f"a sample of {size} units from a population of {population} "
            f"({len(keys) - population} excluded as already labelled)"
        )
    rng = np.random.default_rng(seed)
    probability = np.zeros(len(keys))
    chosen = np.zeros(len(keys), dtype=np.bool_)
    codes = codes_all[available]
    counts = np.bincount(codes, minlength=len(names)).astype(np.int64)
    if uncertainty is not None:
        method = "active"
        u = np.asarray(uncertainty, dtype=np.float64)
        if u.shape != (len(keys),):
            raise ValueError(f"{u.size} uncertainties for {len(keys)} units")
        probability[available] = active_probabilities(u[available], size, mix=mix)
        chosen[available] = rng.random(population) < probability[available]
    else:
        method = "uniform" if strata is None else "stratified"
        present = counts > 0
        per = np.zeros(len(names), dtype=np.int64)
        if strata is not None:
            per[present] = _allocate(counts[present], size, allocation == "equal")
        else:
            per[0] = size
        order = rng.permutation(population)  # one permutation; each stratum takes its first
        ranks = np.empty(population, dtype=np.int64)
        by_stratum = np.lexsort((order, codes))  # units grouped by stratum, random within
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        ranks[by_stratum] = np.arange(population) - np.repeat(starts, counts)
        take = ranks < per[codes]
        chosen[available[take]] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            probability[available] = (per / counts)[codes]
    drawn_at = np.flatnonzero(chosen)
    drawn_counts = np.bincount(codes_all[drawn_at], minlength=len(names))
    table = {
        name: {"population": int(counts[i]), "drawn": int(drawn_counts[i])}
        for i, name in enumerate(names)
        if counts[i] > 0
    }
    query_list = queries.to_pylist() if method == "stratified" and docs is None else None
    design = Design(
        unit="query" if docs is None else "pair",
        method=method,
        seed=seed,
        population=population,
        strata=table,
        excluded=len(keys) - population,
        budget=None if budget is None else dict(budget),
        dataset=dataset,
        assignment=(
            {query_list[i]: names[codes_all[i]] for i in available.tolist()}
            if query_list is not None
            else {}
        ),
    )
    at = pa.array(drawn_at)
    drawn_docs = [None] * drawn_at.size if docs is None else docs.take(at).to_pylist()
    units = tuple(
        Unit(query, doc, names[code], float(p))
        for query, doc, code, p in zip(queries.take(at).to_pylist(), drawn_docs,
                                       codes_all[drawn_at].tolist(),
                                       probability[drawn_at].tolist(), strict=True)
    )  # fmt: skip
    return DrawnSample(units, design)


def _keys(queries: Any, docs: Any) -> Any:
    """One string a unit: the query id, or the query and document ids joined by a
    separator no id holds."""
    import pyarrow.compute as pc

    if docs is None:
        return queries
    return pc.binary_join_element_wise(queries, docs, "\x1f")


def _excluded(keys: Any, exclude: Collection[Any], pairs: bool) -> npt.NDArray[np.bool_]:
    """Which units ``exclude`` names (query ids, or (query, doc) pairs)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not exclude:
        return np.zeros(len(keys), dtype=np.bool_)
    if pairs:
        named = [(str(q), str(d)) for q, d in exclude]
        given = _keys(pa.array([q for q, _ in named], pa.string()),
                      pa.array([d for _, d in named], pa.string()))  # fmt: skip
    else:
        given = pa.array([str(q) for q in exclude], pa.string())
    return np.asarray(pc.is_in(keys, value_set=given).to_numpy(zero_copy_only=False), bool)


def size_for(
    *,
    size: int | None = None,
    labels: int | None = None,
    money: float | None = None,
    price: float | None = None,
    labels_per_unit: float = 1.0,
) -> tuple[int, dict[str, Any] | None]:
    """The sample size: ``size`` as given, or what a budget buys: ``labels`` labels, or
    ``money`` at ``price`` a label (⌊money/price⌋ labels), over units that cost
    ``labels_per_unit`` labels each on average; and the budget as the design records it."""
    given = sum(x is not None for x in (size, labels, money))
    if given != 1:
        raise ValueError("give one of a size, a budget in labels, or a budget in money")
    if (money is None) != (price is None):
        raise ValueError("a budget in money needs the price of a label, and only it does")
    if size is not None:
        return size, None
    if money is not None:
        assert price is not None
        if not (money > 0 and price > 0 and math.isfinite(money) and math.isfinite(price)):
            raise ValueError(f"money and price must be > 0, got {money} and {price}")
        labels = math.floor(money / price + 1e-9)
    assert labels is not None
    if labels < 1:
        raise ValueError(f"a budget of {labels} labels buys nothing")
    units = math.floor(labels / labels_per_unit + 1e-9)
    if units < 1:
        raise ValueError(
            f"a budget of {labels} labels buys no unit (each costs {labels_per_unit:g} "
            "labels on average)"
        )
    budget: dict[str, Any] = {"labels": labels, "labels_per_unit": labels_per_unit,
                              "units": units}  # fmt: skip
    if money is not None:
        budget.update(money=money, price=price)
    return units, budget
