"""Finds a verifier function by name: built-ins, entry points, dotted import paths, `register()`.

A verifier is a plain function `(response: str, reference: str, params: dict) -> Verdict`. It must
be importable by module and name so it pickles into worker processes.

Lookup order for a name:
1. verifiers registered in this process with `register(name)(fn)`;
2. the built-ins below (imported lazily, so `import verifiers` stays light);
3. the entry-point group `rlvrflow.verifiers` of installed packages (a data engineer's own package:
   `[project.entry-points."rlvrflow.verifiers"] tickets = "mypkg.checks:verify_ticket"`);
4. a dotted import path `package.module:function` (or `package.module.function`).
An unknown name raises `UnknownVerifier` listing every valid name.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib import metadata
from typing import Callable

from .verdict import Verdict

VerifierFn = Callable[[str, str, dict], Verdict]
ENTRY_POINT_GROUP = "rlvrflow.verifiers"

BUILTINS: dict[str, str] = {
    "math": "rlvrflow.verifiers.math.verifier:verify_math",
    "code": "rlvrflow.verifiers.code.verifier:verify_code",
    "sql": "rlvrflow.verifiers.sql:verify_sql",
    "json": "rlvrflow.verifiers.jsonv:verify_json",
    "keyword": "rlvrflow.verifiers.keyword:verify_keyword",
    "regex": "rlvrflow.verifiers.keyword:verify_regex",
    "choice": "rlvrflow.verifiers.choice:verify_choice",
    "function_call": "rlvrflow.verifiers.function_call:verify_function_call",
    "refusal": "rlvrflow.verifiers.refusal:verify_refusal",
    "reply": "rlvrflow.verifiers.reply:verify_reply",
    "working": "rlvrflow.verifiers.working:verify_working",
}

_REGISTERED: dict[str, VerifierFn] = {}


class UnknownVerifier(KeyError):
    """A verifier name that no lookup step knows; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0])


def register(name: str) -> Callable[[VerifierFn], VerifierFn]:
    """Decorator: make `fn` available under `name` in this process (and in pool workers, which
    receive the function itself, pickled by reference)."""

    def deco(fn: VerifierFn) -> VerifierFn:
        if not callable(fn):
            raise TypeError(f"register({name!r}) needs a callable, got {type(fn).__name__}")
        _REGISTERED[name] = fn
        return fn

    return deco


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Every name `get_verifier` accepts without a dotted path, sorted."""
    return sorted(set(_REGISTERED) | set(BUILTINS) | set(_entry_points()))


def _import_path(path: str) -> VerifierFn:
    if ":" in path:
        mod_name, attr = path.split(":", 1)
    else:
        mod_name, _, attr = path.rpartition(".")
    module = importlib.import_module(mod_name)
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part)
    if not callable(fn):
        raise TypeError(f"{path!r} is not callable")
    return fn


def check_name(name: str) -> None:
    """Raise UnknownVerifier unless `name` resolves; built-ins are not imported (spec load stays cheap)."""
    if name in _REGISTERED or name in BUILTINS:
        return
    get_verifier(name)


def get_verifier(name: str) -> VerifierFn:
    """Resolve `name` to a verifier function; raise UnknownVerifier (listing valid names) if none."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in BUILTINS:
        return _import_path(BUILTINS[name])
    eps = _entry_points()
    if name in eps:
        return eps[name].load()
    if "." in name or ":" in name:
        try:
            return _import_path(name)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            raise UnknownVerifier(
                f"verifier {name!r}: cannot import it as a dotted path ({type(exc).__name__}: {exc}); "
                f"use 'package.module:function' of an installed module, or one of: "
                f"{', '.join(available())}"
            ) from exc
    raise UnknownVerifier(
        f"unknown verifier {name!r}; valid names: {', '.join(available())} "
        f"(or a dotted path 'package.module:function', or an entry point in group "
        f"'{ENTRY_POINT_GROUP}')"
    )
