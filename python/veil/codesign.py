"""veil.codesign: shaping a table's batch-PIR layout from training logs (training_tools/).

The steps of ``veil-codesign`` as functions over plain Python data:

1. :func:`load_workload` reads a log (MovieLens or Brown presets, a CSV of interactions, a text
   corpus) and splits it; or bring your own requests: one list of rows per inference.
2. :func:`profile` counts how often each row is requested and which rows go together.
3. :func:`layout` builds a :class:`veil.Layout` (hot table, bins, rounds, co-location).
4. :func:`simulate` plans every validation request with the client's planner: which rows would
   be missing, keys, bytes and server work per inference.
5. :func:`sweep` does 3–4 over a grid and picks the cheapest layout whose model quality is
   preserved (the upper end of the 95% interval of its quality loss within the tolerance),
   quality measured by your models (a :class:`QualityModel` per training seed) or, without one,
   by the share of rows fetched.

Tables come back as pandas DataFrames when pandas is installed (Debian's python3-pandas), and as
dicts of column lists otherwise.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from veil import _build, _veil
from veil._errors import InvalidArgumentError, StatusCode

try:
    import pandas as _pd
except ImportError:  # pandas is optional
    _pd = None

Requests = Sequence[Sequence[int]]
Frame = Any  # a pandas.DataFrame, or a dict of column lists without pandas

#: Where scripts/fetch-data puts MovieLens and Brown (the source tree's data/ folder).
DEFAULT_DATA_DIR = os.environ.get("VEIL_DATA_DIR", _build.DATA_DIR)


def _frame(columns: Dict[str, list], attrs: Dict[str, Any]) -> Frame:
    if _pd is None:
        return {**columns, "attrs": attrs}
    frame = _pd.DataFrame(columns)
    frame.attrs.update(attrs)
    return frame


def _attrs(frame: Frame) -> Dict[str, Any]:
    return frame.attrs if _pd is not None and isinstance(frame, _pd.DataFrame) else frame["attrs"]


def _csr(requests: Requests) -> tuple:
    """Requests as (flat rows int32, offsets int64) for the extension."""
    sizes = np.fromiter((len(r) for r in requests), dtype=np.int64, count=len(requests))
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    flat = np.fromiter((x for r in requests for x in r), dtype=np.int64, count=int(offsets[-1]))
    if flat.size and (flat.min() < -2**31 or flat.max() >= 2**31):
        raise InvalidArgumentError(StatusCode.INVALID_ARGUMENT, "requests: rows must fit in int32")
    return flat.astype(np.int32), offsets


def load_workload(
    preset: str = "",
    *,
    interactions: str = "",
    text: str = "",
    data_dir: str = DEFAULT_DATA_DIR,
    user_column: str = "user",
    item_column: str = "item",
    time_column: str = "timestamp",
    label_column: str = "",
    positive_threshold: float = 4.0,
    history: int = 20,
    vocab: int = 3000,
    window: int = 32,
    dim: int = 32,
) -> "_veil.Workload":
    """Loads and splits a workload: ``preset`` "movielens" or "brown" (from `data_dir`, where
    ``scripts/fetch-data`` puts them), or one of `interactions` (a CSV log with a header naming
    the columns) and `text` (a file or folder). MovieLens and CSV logs: the last 20% of each
    user's events by time are validation, one inference per event = the user's `history` most
    recent earlier items plus the candidate. Text: every 5th document is validation, one
    inference per `window`-token window over a `vocab`-word table.

    Returns a Workload with ``name``, ``kind``, ``num_rows``, ``row_words``, ``train_requests``
    and ``validation_requests`` (lists of row lists), ``train_clients`` and
    ``validation_clients`` (who makes each request: the user or document), and
    ``samples(validation)`` (recommendation: history, offsets, history_labels, items, labels as
    arrays). Raises
    NotFoundError for missing data, InvalidArgumentError for none or several sources.
    """
    return _veil.load_workload(preset, data_dir, interactions,
                               [user_column, item_column, time_column, label_column],
                               float(positive_threshold), text, int(history), int(vocab),
                               int(window), int(dim))


def profile(requests: Requests, num_rows: int, top_k: int = 8) -> Frame:
    """The access profile of `requests` (one list of rows per inference; rows outside
    [0, num_rows) are ignored): columns ``row``, ``frequency`` (requests that look the row up),
    ``co_accessed`` (up to `top_k` rows most often requested with it, seen together at least
    twice); ``attrs["num_requests"]``."""
    flat, offsets = _csr(requests)
    num_requests, frequency, co_accessed = _veil.build_profile(flat, offsets, int(num_rows),
                                                               int(top_k))
    return _frame({"row": list(range(int(num_rows))), "frequency": frequency.tolist(),
                   "co_accessed": co_accessed}, {"num_requests": int(num_requests)})


def _profile_parts(prof: Frame) -> tuple:
    frequency = np.asarray(list(prof["frequency"]), dtype=np.int64)
    co_accessed = [list(map(int, c)) for c in prof["co_accessed"]]
    return frequency, co_accessed, int(_attrs(prof).get("num_requests", 0))


def layout(
    prof: Frame,
    row_words: int,
    *,
    hot_fraction: float = 0.1,
    hot_bins: int = 16,
    hot_rounds: int = 2,
    cold_bins: int = 64,
    cold_rounds: int = 1,
    colocation: int = 1,
    seed: int = 1,
) -> "_veil.Layout":
    """The layout of one co-design choice (``veil-codesign layout``'s flags, same defaults): the
    hot table holds the round(hot_fraction × rows) most frequent rows, each table is dealt into
    its bins by a permutation keyed by `seed` (public), every entry carries the row's
    `colocation` most co-accessed rows, and every inference sends `*_rounds` keys to every bin
    (0: the table is never queried). Raises InvalidArgumentError for values a layout cannot
    have."""
    frequency, co_accessed, num_requests = _profile_parts(prof)
    return _veil.design_layout(frequency, co_accessed, num_requests, int(row_words),
                               float(hot_fraction), int(hot_bins), int(hot_rounds),
                               int(cold_bins), int(cold_rounds), int(colocation), int(seed))


def simulate(layout: "_veil.Layout", requests: Requests,
             backend_words_per_s: float = 0.0) -> Dict[str, Any]:
    """Plans every request with the client's planner under `layout`: ``fetched_share`` (wanted
    rows fetched), ``complete_share`` (requests with nothing missing), the cost per inference
    (``keys``, ``words_scanned`` by each server, ``upload_bytes``, ``download_bytes``,
    ``bytes_per_inference``), ``latency_ms`` (words_scanned / `backend_words_per_s`, the scan rate
    of one server from ``veil-bench pir-answer``: qps × rows × words; 0 leaves it out) and
    ``missing`` (per request, the rows that would be replaced by the default row)."""
    flat, offsets = _csr(requests)
    return _veil.simulate(layout, flat, offsets, float(backend_words_per_s))


class QualityModel:
    """A model whose quality a sweep preserves, one per training seed. Subclass it (or give any
    object with these members):

    - ``metric``: ``"auc"`` (a click model) or ``"perplexity"`` (a language model);
    - ``targets()``: per validation request (in order), its label (AUC: 1 = click, 0 otherwise)
      or the number of tokens it scores (perplexity);
    - ``score(examples, missing)``: per query ``i``, validation request ``examples[i]`` scored with
      the rows ``missing[i]`` (sorted) replaced by the default row: its logit (AUC) or the summed
      negative log-likelihood of its tokens (perplexity). A request's outcome must not depend on
      the other queries of the call.

    The sweep computes the metric itself, with bootstrap intervals over the validation clients
    and the spread over the models (seeds)."""

    metric: str = "auc"

    def targets(self) -> Sequence[float]:
        raise NotImplementedError

    def score(self, examples: List[int], missing: List[List[int]]) -> Sequence[float]:
        raise NotImplementedError


def default_grid(quick: bool = True) -> Dict[str, List[float]]:
    """The grid of ``veil-codesign sweep`` (``--quick`` or full): hot_fractions, hot_bins,
    hot_rounds, cold_bins, cold_rounds, colocations."""
    return _veil.default_grid(bool(quick))


def sweep(
    prof: Frame,
    row_words: int,
    validation: Requests,
    *,
    clients: Optional[Sequence[int]] = None,
    grid: Optional[Dict[str, Sequence[float]]] = None,
    quick: bool = True,
    model: Union[QualityModel, Sequence[QualityModel], None] = None,
    seed: int = 1,
    backend_words_per_s: float = 0.0,
    max_bytes: int = 300_000,
    min_fetched_share: float = 0.99,
    allow_unreachable_rows: bool = False,
    unseen_rows: str = "default",
    tolerance: float = 0.0,
    bootstrap: int = 500,
    bootstrap_seed: int = 1,
    threads: int = 1,
    progress: Optional[Callable[[str, int, int], None]] = None,
    out: Optional[str] = None,
    name: str = "custom",
) -> Frame:
    """Evaluates every layout of the grid (:func:`default_grid` with `grid`'s lists in place of
    its own) on the `validation` requests, made by `clients` (one per request: the bootstrap draws
    whole clients; default: every request its own client): one row per point with the columns of
    ``veil-codesign sweep``'s CSV (the choice, keys, words_scanned, bytes, latency_ms,
    fetched_share, complete_share, reachable, unreachable_client_share, quality with
    quality_ci_low / quality_ci_high, the paired loss against fetching every row with loss_ci_low /
    loss_ci_high, preserved_per_seed, baseline, preserved, pareto, chosen, chosen_baseline).
    ``attrs``: metric, seeds, tolerance, reachable_policy, unseen_rows_policy, unseen_rows,
    reference / no_rows / worth (dicts: value, low, high, se, se_examples, se_seeds, df) and
    reference_quality / no_rows_quality (their values), claim_supported and claim_note, chosen,
    baseline and chosen_all_reachable (row indices, -1 if none), chosen_per_seed,
    compute_reduction (baseline's words over the chosen's; None without a supported claim),
    compute_reduction_all_reachable, compute_reduction_per_seed, summary_json.

    Quality is measured by `model` (one :class:`QualityModel`, or a list: one per training seed)
    or, without one, is the fetched share (tolerance 1 − `min_fetched_share`). A point is
    preserved when the upper end of its loss's 95% interval is within `tolerance` (0: AUC 0.005,
    perplexity 2%). Layouts that leave a table unqueried (rows unreachable) are swept only with
    `allow_unreachable_rows`. `unseen_rows`: "default" (rows never requested in training are not
    fetched) or "fetch". The chosen point is the cheapest preserved one within `max_bytes` per
    inference; the baseline the cheapest preserved plain batch-PIR point (random bins, no hot
    table, no co-location). `progress(stage, done, total)` is called as the sweep advances. With
    `out` (a folder), also writes ``sweep-<name>.csv`` and its gnuplot picture
    ``sweep-<name>.png`` there. Raises InvalidArgumentError for an unknown grid key or policy,
    models of different metrics, or targets that do not match `validation`."""
    frequency, co_accessed, num_requests = _profile_parts(prof)
    full = default_grid(quick)
    for key, values in (grid or {}).items():
        if key not in full:
            raise InvalidArgumentError(StatusCode.INVALID_ARGUMENT,
                                       f"sweep: unknown grid key {key!r} (keys: {list(full)})")
        full[key] = list(values)
    models = [] if model is None else list(model) if isinstance(model, (list, tuple)) else [model]
    flat, offsets = _csr(validation)
    csv_path = png_path = ""
    if out is not None:
        os.makedirs(out, exist_ok=True)
        csv_path = os.path.join(out, f"sweep-{name}.csv")
        png_path = os.path.join(out, f"sweep-{name}.png")
    result = _veil.sweep(frequency, co_accessed, num_requests, int(row_words), flat, offsets,
                         [] if clients is None else [int(c) for c in clients], full, int(seed),
                         float(backend_words_per_s), int(max_bytes), float(min_fetched_share),
                         bool(allow_unreachable_rows), str(unseen_rows), float(tolerance),
                         int(bootstrap), int(bootstrap_seed), int(threads), models, progress,
                         name, csv_path, png_path)
    points = result.pop("points")
    columns = {k: [p[k] for p in points] for k in (points[0] if points else {})}
    return _frame(columns, result)
