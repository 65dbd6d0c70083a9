"""The errors a user sees, and the one place that decides their code.

Every front end (the CLI's exit status, the rpc child's error code, the MCP server's tool
error) asks ``code_of`` and ``message_of``, so an exception class says once whether it is a
refusal or a usage problem.  The codes are part of the rpc contract (docs/rpc.md):

- ``REFUSED`` (1): refused, not found, or an endpoint the user has to fix; try something else.
- ``USAGE`` (2): a bad argument or setting value.
- ``INTERNAL`` (3, rpc and MCP only): a bug; the child keeps serving.

This module imports nothing of realmem's, so every layer may raise its errors.
"""

from __future__ import annotations

REFUSED = 1
USAGE = 2
INTERNAL = 3


class Error(Exception):
    """The base of realmem's own errors; ``code`` is REFUSED or USAGE.  ``plain``: the message
    is complete as it stands, so a usage error is reported without its class name."""

    code = REFUSED
    plain = False


class RealmemError(Error):
    """A refusal or not-found the user should see (exit code 1)."""


class NotFound(RealmemError):
    """The memory a change was decided on is gone (forgotten or moved meanwhile)."""


class ChangedMeanwhile(RealmemError):
    """The memory changed after the change was decided on it; nothing was written."""


class LeaseLost(RealmemError):
    """This process lost the write lease (paused past its ttl) before appending: nothing was
    written, and another process may have written since."""


class StorageError(RealmemError):
    """A file realmem keeps its data in cannot be used (read-only, full, damaged); the message
    names the file and the cause in one line."""


class UsageError(Error):
    """A value the user (or the model) passed that cannot be used (exit code 2)."""

    code = USAGE


class ParamError(UsageError):
    """A request's params do not match the rpc contract; the message names method and param."""

    plain = True


# Built-in exceptions that, escaping a command, mean a bad argument rather than a bug: the rpc
# child and the MCP server have always answered them with code 2.
_USAGE_BUILTINS = (ValueError, TypeError, KeyError)


def code_of(exc: BaseException) -> int:
    if isinstance(exc, Error):
        return exc.code
    if isinstance(exc, _USAGE_BUILTINS):
        return USAGE
    return INTERNAL


def message_of(exc: BaseException, command: str) -> str:
    """One line for the model or the user: a refusal as it is, a usage problem or a bug with the
    exception's type so it can be told apart from a refusal."""
    code = code_of(exc)
    if code == REFUSED or (isinstance(exc, Error) and exc.plain):
        return str(exc)
    if code == USAGE:
        return f"{type(exc).__name__}: {exc}"
    return f"internal error in {command}: {type(exc).__name__}: {exc}"
