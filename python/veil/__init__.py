"""veil: private embedding lookups for PyTorch models.

A phone (or any client) fetches rows of an embedding table from two non-colluding servers with
two-server PIR: neither server learns which rows. This package is the Python face of veil's C++
libraries (a torch C++ extension over them, no second implementation):

- :class:`Client` — connects to two ``veil-server`` processes; ``lookup``, ``lookup_words``,
  ``lookup_pooled``, ``lookup_layout``, ``stats``.
- :class:`PrivateEmbeddingBag` — a ``torch.nn.Module`` with ``torch.nn.EmbeddingBag``'s
  arguments whose rows come from the servers; ``forward`` returns the bags and a missing-row mask.
- :class:`PrivatePooledEmbeddingBag` — ``torch.nn.EmbeddingBag`` (sum, mean) whose bags ONE
  ``bfv-bag`` server pools under encryption (``Client(server, protocol="bfv-bag")``).
- :class:`Layout` — the public batch-PIR layout (hot table, bins, co-location).
- :mod:`veil.table` — build, inspect, verify and read table files.
- :mod:`veil.codesign` — profiles, layouts, simulations and sweeps from training logs.
- :func:`local_servers` — two servers on loopback for tests, notebooks and examples.

Errors raise :class:`Error` (``.code`` is the :class:`StatusCode`), or its subclass for the code.
"""

import sys

from veil import _build

try:
    import torch  # noqa: F401  (loads libtorch before the extension that links it)
    from veil import _veil  # noqa: F401
except ImportError as error:
    raise ImportError(
        f"veil was built for {_build.PYTHON} with its torch (Debian's python3-torch); this is "
        f"{sys.executable} ({error}). Run it with {_build.PYTHON}, e.g. "
        f"PYTHONPATH=build/python {_build.PYTHON} ...") from error

from veil._errors import (
    DataLossError,
    DeadlineExceededError,
    Error,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    StatusCode,
    UnavailableError,
)
from veil._veil import Layout, PrivateRows
from veil.client import Client, LayoutRows
from veil.embedding_bag import BagOutput, PrivateEmbeddingBag, PrivatePooledEmbeddingBag
from veil.local import LocalServers, local_servers
from veil import codesign, table

__all__ = [
    "BagOutput",
    "Client",
    "DataLossError",
    "DeadlineExceededError",
    "Error",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "Layout",
    "LayoutRows",
    "LocalServers",
    "NotFoundError",
    "OutOfRangeError",
    "PrivateEmbeddingBag",
    "PrivatePooledEmbeddingBag",
    "PrivateRows",
    "StatusCode",
    "UnavailableError",
    "codesign",
    "local_servers",
    "table",
]
