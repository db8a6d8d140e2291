"""veil.Client: private row lookups through two dpf2 servers (mobile_client/client.h), through
one LWE PIR server (mobile_client/lwe_client.h), or pooled lookups from one bfv-bag server
(mobile_client/bag_client.h)."""

from __future__ import annotations

import os
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from veil import _veil
from veil._errors import Error, FailedPreconditionError, InvalidArgumentError, StatusCode

Rows = Union[Sequence[int], np.ndarray, torch.Tensor]

#: The single-server protocols: lattice PIR (SimplePIR, DoublePIR) from ONE server.
LWE_PROTOCOLS = (
    "lwe-simple",
    "lwe-double",
    "lwe-exppack-s",
    "lwe-exppack-d",
    "lwe-hybrid",
    "lwe-double-pack",
)

#: Every protocol of ONE server: the LWE protocols and bfv-bag (BFV pooled lookups).
SINGLE_SERVER_PROTOCOLS = LWE_PROTOCOLS + ("bfv-bag",)


def _index_array(rows: Rows, dtype: Any, what: str) -> np.ndarray:
    """`rows` as a 1-D integer array of `dtype`; InvalidArgumentError for anything else."""
    if isinstance(rows, torch.Tensor):
        if rows.is_floating_point() or rows.is_complex() or rows.dtype == torch.bool:
            raise InvalidArgumentError(
                StatusCode.INVALID_ARGUMENT, f"{what} must be integers, not {rows.dtype}")
        rows = rows.detach().cpu().numpy()
    array = np.asarray(rows)
    if array.size == 0:
        array = array.astype(np.int64)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise InvalidArgumentError(
            StatusCode.INVALID_ARGUMENT,
            f"{what} must be a 1-D sequence of integers, not {array.dtype} of shape {array.shape}")
    if array.size and array.min() < 0:
        raise InvalidArgumentError(
            StatusCode.INVALID_ARGUMENT, f"{what}: row {int(array.min())} is negative")
    return array.astype(dtype, copy=False)


class LayoutRows(NamedTuple):
    """The rows of one inference fetched through a layout (:meth:`Client.lookup_layout`)."""

    rows: torch.Tensor     #: the distinct wanted rows, increasing (int64)
    values: torch.Tensor   #: [len(rows), layout.row_words] float32; zeros where missing
    missing: torch.Tensor  #: bool per row: the plan could not fetch it
    call: Dict[str, Any]   #: the lookup's cost: bytes_up, bytes_down, keys, latency_ms, ...


class Client:
    """A client of two veil servers (protocol ``dpf2``): each lookup sends one DPF key per row to
    each server and adds the two answer shares; neither server learns the rows.

    With ``protocol="lwe-simple"`` or ``"lwe-double"``, ``servers`` is ONE "HOST:PORT" (or its
    replicas "HOST:PORT,HOST:PORT"): single-server lattice PIR, each row an LWE query under a fresh
    secret, the server's hint downloaded once per table version (kept in ``hint_cache``, a folder,
    when given). ``lookup``, ``lookup_words``, ``stats()``, ``last_call`` and ``totals`` work the
    same; pooled and layout lookups are dpf2's (Error with code UNIMPLEMENTED). With
    ``protocol="lwe-exppack-s"`` no hint is downloaded: the client uploads its expansion keys
    (``table["key_bytes"]``) once per connection (a reconnection resumes them with the server's
    token) and each answer comes ring-packed; so with
    ``"lwe-hybrid"`` (each row also sends RGSW bits selecting its packed ciphertexts) and
    ``"lwe-exppack-d"`` (DoublePIR packed: one ciphertext up per row byte) and
    ``"lwe-double-pack"`` (the packed answer folded by a second query and packed again).

    With ``protocol="bfv-bag"`` (one server, of a fixed-point table) every lookup is pooled under
    BFV encryption: each bag goes up as the client's encrypted weight vector over the whole table
    and comes back as its encrypted pooled row, so the server learns neither the bag's rows nor
    its weights. ``lookup_pooled`` takes int64 weights and ``lookup_pooled_sums`` returns the
    exact fixed-point sums; ``lookup`` fetches each row as a bag of its own. Connecting uploads
    the session's Galois keys (``table["key_bytes"]``, megabytes), and the timeout defaults to
    30 s instead of 5. With a ``row_key`` every sum is checked against the table's linear tags
    (``--row-tag-kind=4``); after an answer fails, the client refuses further lookups.
    ``threads`` (bfv-bag only) is how many threads encrypt a lookup's queries: 0, the default, is
    every core.

    Both servers must serve the same table (digest and epoch), checked at connection and on
    every answer. With ``tls_certs`` (a PEM file of the certificates to trust) every connection
    is TLS and each server must present a certificate for its host name; without it only
    loopback servers are accepted unless ``allow_plaintext`` is set. ``row_key`` is the table's
    row key file (``veil table build`` writes ``TABLE.rowkey``): every fetched row's tag is checked
    against it (a wrong row raises DataLossError, never comes back); servers of a tagged table
    are refused without it. ``min_epoch`` is the oldest table version (epoch) accepted: servers
    that serve only older ones are refused (FailedPreconditionError), and an older version
    relabelled as a newer one fails the row tags (DataLossError), so that an app that knows the
    current version cannot be served an older one. ``failure_latch`` is a file path: an answer
    that fails its check (DataLossError; over bfv-bag any failed answer) writes it, and while it
    exists every client given it refuses to connect or look up (FailedPreconditionError). A
    server can make a lookup fail because of the row asked for; give every client of the app the
    same path so that it learns one bit per installation, not one per client, and remove the file
    once the failure is reported and the deployment fixed.

    Thread-safe: calls from several threads are serialized by the C++ client, and every network
    call releases the GIL.

    Raises, from the constructor: InvalidArgumentError (bad address, unreadable options),
    NotFoundError (``tls_certs`` missing), UnavailableError (a server cannot be reached, or TLS on
    one side only), DeadlineExceededError, FailedPreconditionError (servers of different tables,
    an untrusted certificate, plaintext off loopback, a tagged table without ``row_key``),
    NotFoundError / InvalidArgumentError for an unreadable ``row_key``, Error(UNIMPLEMENTED) for
    a protocol other than ``dpf2`` and those of ``SINGLE_SERVER_PROTOCOLS``.
    """

    def __init__(
        self,
        servers: Tuple[str, str],
        tls_certs: Optional[str] = None,
        protocol: str = "dpf2",
        *,
        timeout: Optional[float] = None,
        tls_server_names: Optional[Tuple[str, str]] = None,
        prg: str = "aes128",
        output: str = "additive",
        pad_bags_to: int = 32,
        allow_plaintext: bool = False,
        row_key: Optional[str] = None,
        hint_cache: Optional[str] = None,
        min_epoch: int = 0,
        failure_latch: Optional[str] = None,
        threads: int = 0,
    ) -> None:
        self._native = None
        self.protocol = protocol
        if threads != 0 and protocol != "bfv-bag":
            raise InvalidArgumentError(
                StatusCode.INVALID_ARGUMENT,
                f"threads is an option of bfv-bag only, not of {protocol}")
        if not -2**31 <= threads <= 2**31 - 1:  # a negative one in range: the client refuses it
            raise InvalidArgumentError(
                StatusCode.INVALID_ARGUMENT,
                f"threads is {threads}: 0 (the machine's cores) to {2**31 - 1}")
        if timeout is None:
            timeout = 30.0 if protocol == "bfv-bag" else 5.0
        latch = os.fspath(failure_latch) if failure_latch is not None else ""
        if protocol in SINGLE_SERVER_PROTOCOLS:
            if not isinstance(servers, str):
                servers = tuple(servers)
                if len(servers) != 1:
                    raise InvalidArgumentError(
                        StatusCode.INVALID_ARGUMENT,
                        f"{protocol} takes one server \"HOST:PORT\", not {servers!r}")
                servers = servers[0]
            name = (tls_server_names or ("",))[0]
            if protocol == "bfv-bag":
                if hint_cache is not None:
                    raise InvalidArgumentError(StatusCode.INVALID_ARGUMENT,
                                               "bfv-bag has no hint: hint_cache is not an option")
                self._native = _veil.BagClient(
                    str(servers), str(tls_certs or ""), name, float(timeout),
                    bool(allow_plaintext), str(row_key or ""), int(min_epoch), latch,
                    int(threads))
            else:
                self._native = _veil.LweClient(
                    str(servers), protocol, str(tls_certs or ""), name, float(timeout),
                    bool(allow_plaintext), str(row_key or ""), str(hint_cache or ""),
                    int(min_epoch), latch)
            self.servers = (str(servers),)
            return
        if isinstance(servers, str) or len(servers) != 2:
            raise InvalidArgumentError(
                StatusCode.INVALID_ARGUMENT,
                f"servers must be two \"HOST:PORT\" addresses (party 0, party 1), not {servers!r}")
        names = tls_server_names or ("", "")
        self._native = _veil.Client(
            str(servers[0]), str(servers[1]), protocol, str(tls_certs or ""), names[0], names[1],
            float(timeout), prg, output, int(pad_bags_to), bool(allow_plaintext),
            str(row_key or ""), int(min_epoch), latch)
        self.servers = (str(servers[0]), str(servers[1]))

    @property
    def table(self) -> Dict[str, Any]:
        """The served table: rows, dim, format, frac_bits, epoch, digest; dpf2 adds row_words,
        backends, max_keys_per_call and range_queries, the LWE protocols row_words and their
        sizes, bfv-bag its sizes (query_bytes, answer_bytes, key_bytes) and row_tag."""
        return self._live().table()

    def lookup(self, rows: Rows) -> torch.Tensor:
        """Rows `rows` dequantized: a [len(rows), dim] float32 tensor (fp32 rows bit-exact; over
        bfv-bag each row is a bag of one, the float nearest its fixed-point value).
        Raises InvalidArgumentError for no rows or a row >= table rows, UnavailableError /
        DeadlineExceededError naming a failing server."""
        indices = _index_array(rows, np.uint64, "rows")
        if self.protocol == "bfv-bag":
            sizes = np.ones(indices.size, dtype=np.uint32)
            return torch.from_numpy(self._live().lookup_pooled(indices, sizes, None, "sum"))
        return torch.from_numpy(self._live().lookup(indices))

    def lookup_words(self, rows: Rows) -> torch.Tensor:
        """The rows as stored: [len(rows), row_words] int32 (the 32-bit words, bit-exact).
        bfv-bag returns sums, not stored words: Error(UNIMPLEMENTED) (use lookup_pooled_sums)."""
        if self.protocol == "bfv-bag":
            raise Error(StatusCode.UNIMPLEMENTED,
                        "bfv-bag returns pooled sums, not stored words: use lookup_pooled_sums "
                        "(a row is a bag of one)")
        words = self._live().lookup_words(_index_array(rows, np.uint64, "rows"))
        return torch.from_numpy(words.view(np.int32))

    def lookup_pooled(
        self,
        bags: Sequence[Sequence[int]],
        weights: Optional[Sequence[Sequence[int]]] = None,
        mode: str = "sum",
    ) -> torch.Tensor:
        """Pooled bags on a fixed-point table (``format="fixed"``): each bag comes back as one
        row, summed by the servers (``mode="mean"`` divides by the bag's weight sum). `weights`
        (integers, one per index, same shape as `bags`: int32 for dpf2, int64 for bfv-bag)
        travel inside the keys or the encrypted query, hidden from the servers. Returns
        [len(bags), dim] float32. Raises FailedPreconditionError for a table that is not
        fixed-point, InvalidArgumentError for an empty bag, mismatched weights or (bfv-bag)
        weights too large for an exact sum."""
        if self.protocol in LWE_PROTOCOLS:
            raise Error(StatusCode.UNIMPLEMENTED,
                        f"lookup_pooled is a dpf2 or bfv-bag lookup; this client speaks "
                        f"{self.protocol}")
        flat, sizes, flat_weights = self._bags("lookup_pooled", bags, weights)
        return torch.from_numpy(self._live().lookup_pooled(flat, sizes, flat_weights, mode))

    def lookup_pooled_sums(
        self,
        bags: Sequence[Sequence[int]],
        weights: Optional[Sequence[Sequence[int]]] = None,
    ) -> torch.Tensor:
        """bfv-bag: the exact pooled sums, [len(bags), dim] int64: the bags' fixed-point values
        (value = sum / 2**frac_bits) times `weights` (int64, like `bags`; default 1), summed over
        the integers. Raises Error(UNIMPLEMENTED) for the other protocols, and lookup_pooled's
        errors."""
        if self.protocol != "bfv-bag":
            raise Error(StatusCode.UNIMPLEMENTED,
                        f"lookup_pooled_sums is a bfv-bag lookup; this client speaks "
                        f"{self.protocol} (lookup_pooled returns its sums dequantized)")
        flat, sizes, flat_weights = self._bags("lookup_pooled_sums", bags, weights)
        return torch.from_numpy(self._live().lookup_pooled_sums(flat, sizes, flat_weights))

    def _bags(
        self,
        what: str,
        bags: Sequence[Sequence[int]],
        weights: Optional[Sequence[Sequence[int]]],
    ) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        """The bags flattened, their sizes and their weights (None: all 1) as the native
        client takes them."""
        bags = [list(b) for b in bags]
        if not bags:
            raise InvalidArgumentError(StatusCode.INVALID_ARGUMENT, f"{what}: no bags")
        sizes = np.asarray([len(b) for b in bags], dtype=np.uint32)
        flat = _index_array([r for b in bags for r in b], np.uint64, "bags")
        if weights is None:
            return flat, sizes, None
        weights = [list(w) for w in weights]
        if [len(w) for w in weights] != sizes.tolist():
            raise InvalidArgumentError(
                StatusCode.INVALID_ARGUMENT,
                f"{what}: weights must have the shape of bags (one weight per row)")
        bits = 64 if self.protocol == "bfv-bag" else 32
        flat_weights = [int(w) for ws in weights for w in ws]
        if any(w < -2**(bits - 1) or w >= 2**(bits - 1) for w in flat_weights):
            raise InvalidArgumentError(StatusCode.INVALID_ARGUMENT,
                                       f"{what}: weights must fit in int{bits}")
        return flat, sizes, np.asarray(flat_weights, dtype=np.int64 if bits == 64 else np.int32)

    def lookup_layout(self, layout: _veil.Layout, rows: Rows) -> LayoutRows:
        """The rows `rows` (any order, duplicates allowed) of the table `layout` arranges,
        fetched as one inference: the same number of keys to every bin whatever is wanted. Rows
        the plan could not fetch are marked in ``missing`` (their values are zeros), never
        replaced by wrong rows. The servers must serve the layout's physical table
        (``veil.table.build(..., layout=layout)``). Raises InvalidArgumentError for a row out of
        range, FailedPreconditionError if the servers' table is not the layout's."""
        self._dpf2_only("lookup_layout")
        wanted = _index_array(rows, np.int32, "rows")
        distinct, values, missing, call = self._live().lookup_layout(layout, wanted)
        return LayoutRows(torch.from_numpy(distinct.astype(np.int64)), torch.from_numpy(values),
                          torch.from_numpy(missing), call)

    def stats(self, party: int = 0) -> Dict[str, Any]:
        """Server `party`'s statistics (calls, keys, passes, batch sizes, latency percentiles,
        queue, errors, connections, uptime). InvalidArgumentError for a party other than 0/1
        (0 only for the single-server protocols)."""
        if self.protocol in SINGLE_SERVER_PROTOCOLS:
            if party != 0:
                raise InvalidArgumentError(StatusCode.INVALID_ARGUMENT,
                                           f"{self.protocol} has one server (party 0), not {party}")
            return self._live().stats()
        return self._live().stats(int(party))

    def prepare_queries(self, count: int) -> int:
        """LWE protocols: makes the row-free part of `count` queries now (nearly all of a
        query's client work) for the next lookups, which then only add their rows; returns how
        many are held. Raises FailedPreconditionError for dpf2, InvalidArgumentError beyond
        64 MiB of prepared queries."""
        if self.protocol not in LWE_PROTOCOLS:
            raise FailedPreconditionError(StatusCode.FAILED_PRECONDITION,
                                          f"{self.protocol} queries are made per lookup; only the "
                                          "LWE protocols prepare queries")
        return self._live().prepare_queries(int(count))

    def last_call(self) -> Dict[str, Any]:
        """The last successful lookup's cost: bytes_up, bytes_down, latency_ms, lookups, keys,
        calls."""
        return self._live().last_call()

    def totals(self) -> Dict[str, Any]:
        """The cost of every call since the connection, set-up included."""
        return self._live().totals()

    def _dpf2_only(self, what: str) -> None:
        if self.protocol != "dpf2":
            raise Error(StatusCode.UNIMPLEMENTED,
                        f"{what} is a dpf2 lookup; this client speaks {self.protocol}")

    def _live(self) -> Any:
        if self._native is None:
            raise FailedPreconditionError(StatusCode.FAILED_PRECONDITION, "the client is closed")
        return self._native

    @property
    def native(self) -> Any:
        """The C++ client (for :class:`veil.PrivateEmbeddingBag`)."""
        return self._live()

    def close(self) -> None:
        """Drops this object's connections (modules built on it keep theirs until they go)."""
        self._native = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._native is None:
            return "veil.Client(closed)"
        t = self.table
        return (f"veil.Client(servers={self.servers!r}, rows={t['rows']}, dim={t['dim']}, "
                f"format={t['format']!r}, digest={t['digest'][:16]}...)")
