"""veil.PrivateEmbeddingBag: torch.nn.EmbeddingBag with its rows fetched privately from two veil
servers, and veil.PrivatePooledEmbeddingBag: its bags pooled by one bfv-bag server, over the C++
modules (mobile_client/private_embedding_bag.h)."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional

import torch

from veil import _veil
from veil._errors import Error, InvalidArgumentError, StatusCode
from veil.client import Client


class BagOutput(NamedTuple):
    """What :meth:`PrivateEmbeddingBag.forward` returns."""

    output: torch.Tensor   #: [bags, embedding_dim], as torch.nn.EmbeddingBag returns it
    missing: torch.Tensor  #: bool, the input's shape: the element's row was not fetched


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(StatusCode.INVALID_ARGUMENT, message)


def _check_indices(input: torch.Tensor, name: str = "input") -> None:
    if not isinstance(input, torch.Tensor):
        raise _invalid(f"PrivateEmbeddingBag: {name} must be a tensor, not {type(input).__name__}")
    if input.dtype not in (torch.int32, torch.int64):
        raise _invalid(f"PrivateEmbeddingBag: {name} must be int32 or int64, not {input.dtype}")


class PrivateEmbeddingBag(torch.nn.Module):
    """``torch.nn.EmbeddingBag`` whose rows are fetched from two veil servers instead of being
    held locally.

    Each forward is one inference: the distinct rows of ``input`` are fetched with one layout
    lookup (exactly the layout's keys for every bin of every table, dummies included, whatever
    is wanted), rows the plan could not fetch are replaced by ``default_row``, and the bags are
    pooled like ``torch.nn.EmbeddingBag`` (``sum``, ``mean`` or ``max``; ``per_sample_weights``
    with ``sum``). ``forward`` returns :class:`BagOutput` ``(output, missing)``.

    The constructor takes ``torch.nn.EmbeddingBag``'s arguments plus ``client`` and ``layout``
    (keywords): the servers must serve ``veil.table.build(weight, format="fp32",
    layout=layout)``, so fetched rows are bit-exact. ``max_norm``, ``sparse``, ``padding_idx`` and
    ``_weight`` have no meaning for rows that are not held on the device and raise
    InvalidArgumentError; ``norm_type`` and ``scale_grad_by_freq`` only matter with them or with
    gradients, and are accepted and unused. The module has no parameters (nothing to train):
    ``default_row`` is a buffer (zeros unless given; the trained table's mean is a good choice).

    A model that looks the same rows up several ways in one inference calls :meth:`fetch` once
    and then :meth:`pool` / :meth:`embed` on its result: one plan, one constant-size request.
    Network failures raise :class:`veil.Error` with the status code (UnavailableError, ...).
    Works under ``torch.no_grad()``; concurrent calls on one module are serialized.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: Optional[float] = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Optional[torch.Tensor] = None,
        include_last_offset: bool = False,
        padding_idx: Optional[int] = None,
        device: Any = None,
        dtype: Optional[torch.dtype] = None,
        *,
        client: Client,
        layout: _veil.Layout,
        default_row: Optional[torch.Tensor] = None,
    ) -> None:
        super().__init__()
        for name, value in (("max_norm", max_norm), ("padding_idx", padding_idx),
                            ("_weight", _weight)):
            if value is not None:
                raise _invalid(f"PrivateEmbeddingBag: {name} is not supported (the rows are "
                               "fetched, not held or trained on the device)")
        if sparse:
            raise _invalid("PrivateEmbeddingBag: sparse is not supported (no gradients)")
        if dtype not in (None, torch.float32):
            raise _invalid(f"PrivateEmbeddingBag: rows are float32, not {dtype}")
        if device is not None and torch.device(device).type != "cpu":
            raise _invalid(f"PrivateEmbeddingBag: rows arrive on the CPU, not {device}")
        if not isinstance(client, Client):
            raise _invalid("PrivateEmbeddingBag: client must be a veil.Client")
        if client.protocol != "dpf2":
            raise Error(StatusCode.UNIMPLEMENTED,
                        f"PrivateEmbeddingBag in Python fetches through dpf2 servers and a layout; "
                        f"over {client.protocol} use the C++ module (mobile_client/"
                        f"private_embedding_bag.h)")
        if not isinstance(layout, _veil.Layout):
            raise _invalid("PrivateEmbeddingBag: layout must be a veil.Layout")
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.mode = mode
        self.include_last_offset = bool(include_last_offset)
        self.client = client
        self.layout = layout
        row = None if default_row is None else torch.as_tensor(default_row).detach()
        self._native = _veil.NativeEmbeddingBag(
            self.num_embeddings, self.embedding_dim, mode, self.include_last_offset,
            client.native, layout, row)
        # The C++ module's buffer itself: load_state_dict copies into the storage it reads.
        self.register_buffer("default_row", self._native.default_row)

    @classmethod
    def from_client(
        cls,
        client: Client,
        layout: _veil.Layout,
        *,
        mode: str = "mean",
        include_last_offset: bool = False,
        default_row: Optional[torch.Tensor] = None,
    ) -> "PrivateEmbeddingBag":
        """The module for the table `layout` arranges, served to `client` (its shape, like
        ``torch.nn.EmbeddingBag.from_pretrained``'s, comes from the table: the layout's rows and
        row_words)."""
        return cls(layout.num_rows, layout.row_words, mode=mode,
                   include_last_offset=include_last_offset, client=client, layout=layout,
                   default_row=default_row)

    def forward(
        self,
        input: torch.Tensor,
        offsets: Optional[torch.Tensor] = None,
        per_sample_weights: Optional[torch.Tensor] = None,
    ) -> BagOutput:
        """EmbeddingBag's call: `input` 1-D with `offsets` (bag starts), or 2-D [bags, n]
        without them; `per_sample_weights` like input (mode ``sum``). Returns ``(output
        [bags, dim], missing mask like input)``. Raises InvalidArgumentError for bad shapes or
        rows outside [0, num_embeddings), and the client's errors."""
        fetched = self.fetch(input)
        return self.pool(fetched, input, offsets, per_sample_weights)

    def fetch(self, rows: torch.Tensor) -> _veil.PrivateRows:
        """Plans and fetches the distinct rows of `rows` (any shape) as one inference."""
        _check_indices(rows, "rows")
        return self._native.fetch(rows)

    def pool(
        self,
        fetched: _veil.PrivateRows,
        input: torch.Tensor,
        offsets: Optional[torch.Tensor] = None,
        per_sample_weights: Optional[torch.Tensor] = None,
        mode: Optional[str] = None,
    ) -> BagOutput:
        """Pools already fetched rows like forward (with this module's mode unless `mode`)."""
        _check_indices(input)
        if offsets is not None:
            _check_indices(offsets, "offsets")
        output, missing = self._native.pool(fetched, input, offsets, per_sample_weights, mode)
        return BagOutput(output, missing)

    def embed(self, fetched: _veil.PrivateRows, input: torch.Tensor) -> torch.Tensor:
        """Single rows out of a fetch (``torch.nn.Embedding``'s call): input.shape + [dim]."""
        _check_indices(input)
        return self._native.embed(fetched, input)

    def last_call(self) -> Dict[str, Any]:
        """The last fetch's cost: bytes on the sockets (both servers), keys per server."""
        return self._native.last_call()

    @property
    def keys_per_inference(self) -> int:
        """Keys sent to each server by every forward, whatever the input."""
        return self._native.keys_per_inference

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}, "
                f"keys_per_inference={self.keys_per_inference}")


class PrivatePooledEmbeddingBag(torch.nn.Module):
    """``torch.nn.EmbeddingBag`` (``sum`` or ``mean``) whose bags are pooled by ONE ``bfv-bag``
    server: each bag goes up as the client's encrypted weight vector over the whole table and
    comes back as its encrypted pooled row, so the server learns nothing of the bags (an empty
    bag is sent as a bag of weight 0) and no row is ever missing. The table must be fixed-point
    (``veil.table.build(weight, format="fixed")``) and `client` a ``veil.Client`` of protocol
    ``"bfv-bag"``.

    ``forward(input, offsets=None, per_sample_weights=None)`` takes EmbeddingBag's arguments
    and returns its [bags, embedding_dim] float32 tensor: the float nearest the exact pooled sum
    of the table's fixed-point values (mean: divided by the bag's size). ``per_sample_weights``
    (mode ``sum``) are rounded to multiples of ``2**-weight_frac_bits`` first. Each bag costs
    one query (``client.table["query_bytes"]`` up, ``["answer_bytes"]`` down). The module has
    no parameters. Raises InvalidArgumentError for bad shapes, rows outside
    [0, num_embeddings) or a table of another shape, and the client's errors (UnavailableError,
    DataLossError for a sum that fails its tag, ...).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        mode: str = "mean",
        include_last_offset: bool = False,
        *,
        client: Client,
        weight_frac_bits: int = 16,
    ) -> None:
        super().__init__()
        if not isinstance(client, Client):
            raise _invalid("PrivatePooledEmbeddingBag: client must be a veil.Client")
        if client.protocol != "bfv-bag":
            raise _invalid(f"PrivatePooledEmbeddingBag: pools through a bfv-bag server, not "
                           f"{client.protocol} (PrivateEmbeddingBag fetches rows through dpf2)")
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.mode = mode
        self.include_last_offset = bool(include_last_offset)
        self.client = client
        self._native = _veil.NativePooledEmbeddingBag(
            self.num_embeddings, self.embedding_dim, mode, self.include_last_offset,
            int(weight_frac_bits), client.native)

    @classmethod
    def from_client(cls, client: Client, *, mode: str = "mean", include_last_offset: bool = False,
                    weight_frac_bits: int = 16) -> "PrivatePooledEmbeddingBag":
        """The module for the table `client`'s server serves (its rows and dim)."""
        table = client.table
        return cls(table["rows"], table["dim"], mode, include_last_offset, client=client,
                   weight_frac_bits=weight_frac_bits)

    def forward(
        self,
        input: torch.Tensor,
        offsets: Optional[torch.Tensor] = None,
        per_sample_weights: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """EmbeddingBag's call: `input` 1-D with `offsets` (bag starts), or 2-D [bags, n]
        without them; `per_sample_weights` like input (mode ``sum``). Returns
        [bags, embedding_dim] float32."""
        _check_indices(input)
        if offsets is not None:
            _check_indices(offsets, "offsets")
        return self._native.forward(input, offsets, per_sample_weights)

    def last_call(self) -> Dict[str, Any]:
        """The last forward's cost: bytes on the socket, query ciphertexts (keys)."""
        return self._native.last_call()

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}, protocol=bfv-bag"
