"""veil.table: the table files servers serve (embedding/table.h): build, inspect, verify, read.

Formats (embedding/row_format.h): ``fp32`` (bit-exact rows; what PrivateEmbeddingBag and layout
lookups need), ``fp16`` (half the bytes), ``int8`` (row-wise scale and bias, a quarter), and
``fixed`` (int32 fixed point with ``frac_bits``: the format of pooled lookups, whose rows the
servers sum).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np
import torch

from veil import _veil
from veil._errors import InvalidArgumentError, StatusCode

Source = Union[torch.Tensor, np.ndarray, Mapping[str, Any], str, "os.PathLike[str]"]


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(StatusCode.INVALID_ARGUMENT, message)


def _from_state_dict(state: Mapping[str, Any], key: Optional[str]) -> torch.Tensor:
    """The embedding weight of a state dict: `key`, or its only 2-D floating tensor."""
    if key is not None:
        if key not in state:
            raise _invalid(f"table.build: the state dict has no {key!r} (keys: {list(state)})")
        return state[key]
    candidates = [k for k, v in state.items()
                  if isinstance(v, torch.Tensor) and v.dim() == 2 and v.is_floating_point()]
    if len(candidates) != 1:
        raise _invalid("table.build: give key= to choose the embedding weight among the state "
                       f"dict's 2-D floating tensors {candidates}")
    return state[candidates[0]]


def build(
    source: Source,
    format: str = "fp32",
    path: Union[str, "os.PathLike[str]"] = "table.veil",
    *,
    key: Optional[str] = None,
    layout: Optional[_veil.Layout] = None,
    epoch: int = 0,
    frac_bits: int = 16,
    dim: int = 0,
) -> str:
    """Writes a table file and returns its digest (hex).

    `source` is a [rows, dim] tensor or array (an ``nn.Embedding`` weight), a state dict (the
    weight under `key`, or its only 2-D floating tensor), or the path of a ``.csv`` file (one row
    per line, dim from the first row) or of a raw little-endian float32 file (``dim`` needed).
    With `layout`, the rows are arranged into the layout's physical table (its bins and
    co-located entries): what the servers of ``Client.lookup_layout`` and
    :class:`veil.PrivateEmbeddingBag` serve (use ``format="fp32"`` for them). `epoch` names the
    table version next to the digest; bump it on every roll-out.

    The file is written under a temporary name and renamed into place when complete. Raises
    InvalidArgumentError for a bad shape, format, value (NaN in int8/fixed) or layout mismatch,
    NotFoundError for a missing input file.
    """
    out = os.fspath(path)
    if isinstance(source, (str, os.PathLike)):
        if layout is not None:
            raise _invalid("table.build: layout= needs the rows in memory (a tensor or array)")
        src = os.fspath(source)
        csv = src.endswith(".csv")
        if not csv and dim <= 0:
            raise _invalid("table.build: a raw float32 file needs dim=")
        _veil.write_table_from_file(src, out, csv, int(dim), format, int(epoch), int(frac_bits))
        return verify(out)
    if isinstance(source, Mapping):
        source = _from_state_dict(source, key)
    if isinstance(source, torch.Tensor) and layout is None:
        _veil.write_table_from_tensor(source.detach(), out, format, int(epoch), int(frac_bits))
        return verify(out)
    if isinstance(source, torch.Tensor):
        if not source.is_floating_point():
            raise _invalid(f"table.build: the rows must be floating point, not {source.dtype}")
        source = source.detach().to("cpu", torch.float32).numpy()
    values = np.asarray(source, dtype=np.float32)
    if values.ndim != 2:
        raise _invalid(f"table.build: the rows must be 2-D [rows, dim], not shape {values.shape}")
    if layout is not None:
        values = _veil.arrange_rows(layout, values)
    _veil.write_table(out, values, format, int(epoch), int(frac_bits))
    return verify(out)


def inspect(path: Union[str, "os.PathLike[str]"], rows: int = 3) -> Dict[str, Any]:
    """The header of a table file (rows, dim, row_words, stride_words, format, frac_bits, epoch,
    digest: read, not recomputed) and ``head``: its first `rows` rows dequantized (a tensor).
    Raises NotFoundError, or InvalidArgumentError naming the bad header field."""
    info = _veil.inspect_table(os.fspath(path), int(rows))
    info["head"] = torch.from_numpy(info["head"])
    return info


def verify(path: Union[str, "os.PathLike[str]"]) -> str:
    """Validates the header and recomputes the digest over the whole file; returns it (hex).
    Raises InvalidArgumentError ("digest mismatch ...") for a file changed after it was built."""
    return _veil.verify_table(os.fspath(path))


def read(path: Union[str, "os.PathLike[str]"]) -> torch.Tensor:
    """Every row of a table file, dequantized: [rows, dim] float32."""
    return torch.from_numpy(_veil.read_table(os.fspath(path)))
