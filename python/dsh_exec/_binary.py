"""Finding the dsh-exec binary this package ships."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Iterator

__all__ = ["find_binary"]

_NAME = "dsh-exec" + (sysconfig.get_config_var("EXE") or "")


def _candidates() -> Iterator[str]:
    # The scripts directory of the environment this module runs in: where
    # pip put the wheel's binary beside this package.
    yield os.path.join(sysconfig.get_path("scripts"), _NAME)
    # A user install (pip install --user).
    if sys.version_info >= (3, 10):
        user_scheme = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":  # pragma: no cover - dsh-exec is Linux only
        user_scheme = "nt_user"
    else:
        user_scheme = "posix_user"
    yield os.path.join(sysconfig.get_path("scripts", scheme=user_scheme), _NAME)
    # pip install --target DIR: the binary is in DIR/bin, beside the package.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    yield os.path.join(package_root, "bin", _NAME)


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binary() -> str:
    """The path of the dsh-exec binary to run.

    ``$DSH_EXEC_BIN`` when set (and not empty); else the binary the wheel
    installed (the scripts directory of this environment, a user install,
    or ``bin`` beside a ``--target`` install); else ``dsh-exec`` on
    ``PATH``. Raises FileNotFoundError when there is none.
    """
    override = os.environ.get("DSH_EXEC_BIN")
    if override:
        if not _executable(override):
            raise FileNotFoundError(f"DSH_EXEC_BIN={override!r} is not an executable file")
        return override
    for path in _candidates():
        if _executable(path):
            return path
    found: str | None = shutil.which(_NAME)
    if found is not None:
        return found
    raise FileNotFoundError(
        "the dsh-exec binary was not found: not in this environment's scripts "
        "directory nor on PATH (set DSH_EXEC_BIN to its path)"
    )
