"""One place decides the code of every error a front end reports (realmem/errors.py)."""

from __future__ import annotations

import pytest

from realmem import errors
from realmem.agents.install import InstallError
from realmem.app import RealmemError
from realmem.clients.errors import EndpointError, EndpointUnavailable, NotConfigured, RequestTooLarge
from realmem.config import ConfigError
from realmem.write.gitignore import GitIgnoreError
from realmem.stores.ids import IdError
from realmem.storage.lock import LockTimeout
from realmem.stores.paths import PathError
from realmem.projections.files import FactFileError
from realmem.interface.rpc import Cancelled


@pytest.mark.parametrize("exc, code", [
    (RealmemError("no memory abc"), errors.REFUSED),
    (Cancelled("cancelled"), errors.REFUSED),
    (InstallError("settings.json is not an object"), errors.REFUSED),
    (EndpointError("401"), errors.REFUSED),
    (EndpointUnavailable("refused"), errors.REFUSED),
    (NotConfigured("no url"), errors.REFUSED),
    (RequestTooLarge("422"), errors.REFUSED),
    (LockTimeout("busy", None), errors.REFUSED),
    (IdError("ambiguous"), errors.REFUSED),
    (GitIgnoreError("git failed"), errors.REFUSED),
    (ConfigError("bad value"), errors.USAGE),
    (PathError("outside"), errors.USAGE),
    (FactFileError("bad yaml", 3), errors.USAGE),
    (errors.ParamError("recall: page must be an integer"), errors.USAGE),
    (ValueError("x"), errors.USAGE),
    (TypeError("x"), errors.USAGE),
    (KeyError("x"), errors.USAGE),
    (RuntimeError("x"), errors.INTERNAL),
    (ZeroDivisionError(), errors.INTERNAL),
])
def test_every_error_has_one_code(exc: Exception, code: int) -> None:
    assert errors.code_of(exc) == code


def test_classes_keep_their_builtin_bases() -> None:
    # Callers that catch the built-in kind keep catching them.
    assert issubclass(ConfigError, ValueError) and issubclass(PathError, ValueError)
    assert issubclass(FactFileError, ValueError) and issubclass(LockTimeout, TimeoutError)
    assert issubclass(IdError, LookupError) and issubclass(GitIgnoreError, RuntimeError)
    # ...and a refusal is never caught as a usage problem or the other way round.
    assert not issubclass(ConfigError, RealmemError) and not issubclass(EndpointError, RealmemError)


def test_messages_name_the_kind_except_for_refusals() -> None:
    assert errors.message_of(RealmemError("no memory abc"), "show") == "no memory abc"
    assert errors.message_of(ConfigError("recall.pageSize: not a number"), "settings_set") == \
        "ConfigError: recall.pageSize: not a number"
    assert errors.message_of(errors.ParamError("recall: page must be an integer"), "recall") == \
        "recall: page must be an integer"
    assert errors.message_of(ZeroDivisionError("division by zero"), "recall") == \
        "internal error in recall: ZeroDivisionError: division by zero"
