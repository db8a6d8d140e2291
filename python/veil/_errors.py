"""veil's errors: every failed call raises :class:`Error`, whose ``code`` is the absl status code.

The C++ libraries return ``absl::Status``; the extension turns each failure into the subclass of
:class:`Error` for its code, which also derives from the closest built-in exception, so that
``except ValueError`` catches a bad argument and ``except ConnectionError`` an unreachable server.
"""

from __future__ import annotations

import enum


class StatusCode(enum.IntEnum):
    """The absl::StatusCode values (the C ABI returns them negated)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Error(Exception):
    """A veil call failed. ``code`` is its :class:`StatusCode`, ``message`` the library's text."""

    def __init__(self, code: StatusCode | int, message: str) -> None:
        self.code = StatusCode(code)
        self.message = message
        super().__init__(f"{self.code.name}: {message}")


class InvalidArgumentError(Error, ValueError):
    """A bad argument: an index out of range, a shape or size that does not fit, a bad file."""


class OutOfRangeError(Error, ValueError):
    """A value beyond what a format or packing can hold."""


class NotFoundError(Error, FileNotFoundError):
    """A file that cannot be opened."""


class FailedPreconditionError(Error):
    """The call does not fit the state: servers of different tables, an untrusted certificate,
    a table of the wrong format for the call."""


class UnavailableError(Error, ConnectionError):
    """A server cannot be reached, or closed the connection (TLS on one side only, for instance)."""


class DeadlineExceededError(Error, TimeoutError):
    """A server did not answer within the client's timeout."""


class DataLossError(Error):
    """What a server sent cannot be the right data: a row or a pooled sum that fails its tag, an
    answer that does not decrypt exactly. Nothing wrong is returned."""


_CLASSES = {
    StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    StatusCode.OUT_OF_RANGE: OutOfRangeError,
    StatusCode.NOT_FOUND: NotFoundError,
    StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    StatusCode.UNAVAILABLE: UnavailableError,
    StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    StatusCode.DATA_LOSS: DataLossError,
}


def make_error(code: int, message: str) -> Error:
    """The exception for a failed absl::Status (called by the extension)."""
    return _CLASSES.get(StatusCode(code), Error)(code, message)
