"""The `function_call` verifier: the tool call(s) an agent made, checked layer by layer.

reference: the expected call(s) as JSON (`{"name": "issue_refund", "arguments": {...}}`, a list, the
OpenAI form) or as support-desk logs write them, one per line: `issue_refund(order_id="SO12345",
amount=36)`; `[]` when no call is right. params: `tools` (required: `{name: JSON Schema}` or a chat
template's `tools` list), `ordered`, `partial`, `case_sensitive` (false), `rel_tol`, `abs_tol` (0).
The response's calls: its `<tool_call>` blocks (a last unclosed one counts: `</tool_call>` may be
the stop string), else its ```json or unlabeled fences, else the whole response if it is JSON.
JSON inside prose is not a call (no tool-call parser would run it); `<think>` is skipped.
Layers, each naming what failed: parses (else `unparsed`), known tool, arguments valid against
its schema (JSON path), calls equal the reference (missing or extra call, first wrong argument).
Values: integers exactly however large; decimals exactly (36.0 == 36, "36.00" == 36) or within
rel_tol/abs_tol when the reference holds a decimal; NaN and infinities equal nothing; booleans are
not numbers; strings NFKC, whitespace-collapsed, case-folded; an absent argument counts as its
schema default. `partial: true` scores (matched - extra) / expected, at least 0.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from . import verdict as V
from .math.numbers import MAX_EXPONENT, close

MAX_CHARS = 200_000
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
# the info string is short and has no backticks, so a run of "```" without newlines is linear
_FENCE = re.compile(r"```[ \t]*([\w-]*)[^\n`]{0,40}\n(.*?)```", re.DOTALL)
_CALL_FENCES = {"", "json", "tool_call", "tool_calls"}
_INT = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


class Call(NamedTuple):
    name: str
    arguments: dict


class _Opts(NamedTuple):
    rel_tol: Decimal
    abs_tol: Decimal
    case_sensitive: bool
    ordered: bool
    partial: bool


class _DuplicateKey(ValueError):
    """A JSON object names a key twice: which value counts is the parser's guess, so not a call."""


def _pairs(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"key {key!r} appears twice")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(parse_float=Decimal, object_pairs_hook=_pairs)  # decimals kept exact


def _json_values(text: str) -> list:
    """Every JSON value in `text`, one after another; ValueError if anything else is there."""
    values, i, end = [], 0, len(text)
    while True:
        while i < end and text[i].isspace():
            i += 1
        if i == end:
            return values
        value, i = _DECODER.raw_decode(text, i)
        values.append(value)


def _to_calls(value, top: bool = True) -> list[Call]:
    if isinstance(value, list) and top:
        return [c for item in value for c in _to_calls(item, top=False)]
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__} is not a call")
    if "name" not in value and isinstance(value.get("tool_calls"), list) and top:
        return [c for item in value["tool_calls"] for c in _to_calls(item, top=False)]
    if "name" not in value and isinstance(value.get("function"), dict):
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("a call needs a string 'name'")
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):
        args = _DECODER.decode(args) if args.strip() else {}
    if not isinstance(args, dict):
        raise ValueError(f"{name}: 'arguments' must be a JSON object")
    return [Call(name.strip(), args)]


def extract_calls(response: str) -> tuple[list[Call], list[str]]:
    """(calls, problems): every call found, and why each call block that did not parse failed."""
    text = _THINK.sub("", response.rsplit("</think>", 1)[-1])
    kind, blocks = "<tool_call>", [m.group(1) for m in _TAG.finditer(text)]
    if not blocks:
        kind = "fenced block"
        blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in _CALL_FENCES]
    if not blocks:
        if not text.lstrip().startswith(("{", "[")):
            return [], []
        kind, blocks = "response", [text]
    calls, problems = [], []
    for n, block in enumerate(blocks, start=1):
        where = kind if kind == "response" else f"{kind} {n}"
        try:
            found = [c for value in _json_values(block) for c in _to_calls(value)]
        except _DuplicateKey as exc:
            problems.append(f"{where}: {exc}")
        except (ValueError, RecursionError) as exc:
            problems.append(f"{where} is not a JSON call: {V.clip(exc, 80)}")
        else:
            calls.extend(found)
    return calls, problems


def _exact(value, where: str):
    """A Python literal from call syntax as the JSON value it stands for (floats as Decimal)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, (list, tuple)):
        return [_exact(v, where) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _exact(v, where) for k, v in value.items()}
    raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")


def _parse_call_syntax(text: str) -> list[Call]:
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError as exc:
        raise ValueError(f"neither JSON nor call syntax like name(arg=1) ({exc.msg})") from None
    nodes = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            raise ValueError(f"line {stmt.lineno} is not a call like name(arg=1)")
        value = stmt.value
        nodes.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError(f"{V.clip(ast.unparse(node), 60)!r} is not a call like name(arg=1)")
        name = node.func.id
        if node.args or any(k.arg is None for k in node.keywords):
            raise ValueError(f"{name}: write every argument as name=value")
        args = {}
        for k in node.keywords:
            try:
                args[k.arg] = _exact(ast.literal_eval(k.value), f"{name}({k.arg}=...)")
            except (ValueError, TypeError, SyntaxError):
                raise ValueError(
                    f"{name}: argument {k.arg} is not a literal (strings, numbers, True/False/None, lists, dicts)"
                ) from None
        calls.append(Call(name, args))
    return calls


def parse_reference(reference: str) -> list[Call]:
    """The expected calls; ValueError naming the problem for a reference that cannot be read."""
    text = reference.strip()
    if not text:
        raise ValueError("the reference is empty (write [] when no call is expected)")
    if not text.startswith(("{", "[")):
        return _parse_call_syntax(text)
    try:
        return [c for value in _json_values(text) for c in _to_calls(value)]
    except _DuplicateKey as exc:
        raise ValueError(f"the reference JSON is ambiguous: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the reference is not valid JSON ({exc.msg} at char {exc.pos})") from None


@lru_cache(maxsize=64)
def _compiled_tools(tools_json: str) -> dict:
    """{tool name: (validator, schema)} for params.tools (as sorted JSON, so it caches)."""
    import jsonschema

    tools = json.loads(tools_json)
    if isinstance(tools, dict):
        items = list(tools.items())
    elif isinstance(tools, list):
        items = []
        for i, tool in enumerate(tools):
            spec = tool.get("function", tool) if isinstance(tool, dict) else None
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise ValueError(
                    f'params.tools[{i}] has no \'name\' (write {{"name": ..., "parameters": '
                    '{JSON Schema}} or the OpenAI form {"type": "function", "function": {...}})'
                )
            items.append((spec["name"], spec.get("parameters", spec.get("input_schema"))))
    else:
        raise ValueError("params.tools must be {name: JSON Schema} or a list of tool definitions")
    out = {}
    for name, schema in items:
        schema = {"type": "object"} if schema is None else schema
        if not isinstance(schema, dict):
            raise ValueError(f"tool {name!r}: its schema must be a JSON object, got {type(schema).__name__}")
        if name in out:
            raise ValueError(f"tool {name!r} is defined twice in params.tools")
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(
                f"tool {name!r}: invalid JSON Schema at {exc.json_path}: {V.clip(exc.message, 120)}"
            ) from None
        out[name] = (cls(schema), schema)
    if not out:
        raise ValueError("params.tools is empty")
    return out


def _options(params: dict) -> tuple[dict, _Opts]:
    if "tools" not in params:
        raise ValueError("params.tools is required: {tool name: JSON Schema of its arguments}")
    tools = _compiled_tools(json.dumps(params["tools"], sort_keys=True, default=str))
    for key in ("ordered", "partial", "case_sensitive"):
        if not isinstance(params.get(key, False), bool):
            raise ValueError(f"params.{key} must be true or false, got {params[key]!r}")
    tols = []
    for key in ("rel_tol", "abs_tol"):
        tol = params.get(key, 0)
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < float("inf"):
            raise ValueError(f"params.{key} must be a number >= 0, got {tol!r}")
        tols.append(Decimal(repr(tol)))
    return tools, _Opts(
        *tols,
        bool(params.get("case_sensitive", False)),
        bool(params.get("ordered", False)),
        bool(params.get("partial", False)),
    )


def _plain(value):
    """Decimals as floats, for the schema check (what a standard JSON parser would hand it)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _invalid(call: Call, tools: dict) -> str | None:
    """Why `call` fails the tool layers (unknown tool, schema), or None."""
    from jsonschema.exceptions import best_match

    if call.name not in tools:
        return f"unknown tool {call.name!r} (known: {', '.join(sorted(tools))})"
    err = best_match(tools[call.name][0].iter_errors(_plain(call.arguments)))
    if err is not None:
        return f"{call.name}: arguments fail its schema at {err.json_path}: {V.clip(err.message, 120)}"
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _number(value) -> int | Decimal | None:
    """A JSON number, or a string holding one, as int or Decimal; None for anything else."""
    if isinstance(value, str):
        text = unicodedata.normalize("NFKC", value).strip()
        if _INT.fullmatch(text) and len(text) < 4000:
            return int(text)
        return Decimal(text) if _DECIMAL.fullmatch(text) else None
    if not _is_number(value):
        return None
    return Decimal(repr(value)) if isinstance(value, float) else value


def _numbers_equal(ref: int | Decimal, got: int | Decimal, opts: _Opts) -> bool:
    """Exact as the math verifier compares (verifiers/math/numbers.py `close`); the tolerance only for a
    decimal reference (an integer argument, an id or a count, is exact whatever the rule says)."""
    r, g = Decimal(ref), Decimal(got)
    if not (r.is_finite() and g.is_finite()):
        return False
    if r == g:
        return True
    if isinstance(ref, int) or max(abs(r.adjusted()), abs(g.adjusted())) > MAX_EXPONENT:
        return False  # beyond MAX_EXPONENT a value is never held exactly (as in the math verifier)
    return close(Fraction(r), Fraction(g), opts.rel_tol, opts.abs_tol)


def _text(value: str, opts: _Opts) -> str:
    text = " ".join(unicodedata.normalize("NFKC", value).split())
    return text if opts.case_sensitive else text.casefold()


def _show(value) -> str:
    return V.clip(_dump(value), 60)


def _diff(ref, got, path: str, opts: _Opts) -> str | None:
    """None when `got` matches `ref`, else which argument differs and how."""
    differs = f"argument {path!r} is {_show(got)}, expected {_show(ref)}"
    if isinstance(ref, bool) or isinstance(got, bool) or ref is None or got is None:
        return None if type(ref) is type(got) and ref == got else differs
    if _is_number(ref) or _is_number(got):
        r, g = _number(ref), _number(got)
        return None if r is not None and g is not None and _numbers_equal(r, g, opts) else differs
    if isinstance(ref, str) and isinstance(got, str):
        return None if _text(ref, opts) == _text(got, opts) else differs
    if isinstance(ref, dict) and isinstance(got, dict):
        for key in ref:
            if key not in got:
                return f"argument {_join(path, key)!r} is missing"
        for key in got:
            if key not in ref:
                return f"argument {_join(path, key)!r} is not expected"
        return next((d for key in ref if (d := _diff(ref[key], got[key], _join(path, key), opts))), None)
    if isinstance(ref, list) and isinstance(got, list):
        if len(ref) != len(got):
            return f"argument {path!r} has {len(got)} items, expected {len(ref)}"
        return next((d for i, (r, g) in enumerate(zip(ref, got)) if (d := _diff(r, g, f"{path}[{i}]", opts))), None)
    return differs


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _call_diff(ref: Call, got: Call, tools: dict, opts: _Opts) -> str | None:
    if ref.name != got.name:
        return f"calls {got.name}, expected {ref.name}"
    props = tools[ref.name][1].get("properties")
    defaults = (
        {k: s["default"] for k, s in props.items() if isinstance(s, dict) and "default" in s}
        if isinstance(props, dict)
        else {}
    )
    d = _diff({**defaults, **ref.arguments}, {**defaults, **got.arguments}, "", opts)
    return f"{ref.name}: {d}" if d else None


def _match(ref: list[Call], got: list[Call], tools: dict, opts: _Opts) -> list[tuple[int, int]]:
    """Pairs (reference index, response index) of equal calls, as many as possible: the longest
    common subsequence when ordered, else a maximum bipartite matching."""
    eq = [[_call_diff(r, g, tools, opts) is None for g in got] for r in ref]
    if opts.ordered:
        best = [[0] * (len(got) + 1) for _ in range(len(ref) + 1)]
        for i in range(len(ref) - 1, -1, -1):
            for j in range(len(got) - 1, -1, -1):
                best[i][j] = best[i + 1][j + 1] + 1 if eq[i][j] else max(best[i + 1][j], best[i][j + 1])
        pairs, i, j = [], 0, 0
        while i < len(ref) and j < len(got):
            if eq[i][j] and best[i][j] == best[i + 1][j + 1] + 1:
                pairs.append((i, j))
                i, j = i + 1, j + 1
            elif best[i + 1][j] >= best[i][j + 1]:
                i += 1
            else:
                j += 1
        return pairs
    owner: dict[int, int] = {}  # response index -> reference index

    def augment(i: int, seen: set) -> bool:
        for j in range(len(got)):
            if eq[i][j] and j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(ref)):
        augment(i, set())
    return sorted((i, j) for j, i in owner.items())


def _mismatch(ref: list[Call], got: list[Call], pairs: list, tools: dict, opts: _Opts) -> str:
    """The first unmatched reference call and why, else the first extra call."""
    done_r, done_g = {i for i, _ in pairs}, {j for _, j in pairs}
    for i, r in enumerate(ref):
        if i in done_r:
            continue
        for j, g in enumerate(got):
            if j not in done_g and g.name == r.name:
                why = _call_diff(r, g, tools, opts)
                return why or f"call {j + 1} ({g.name}) is out of order (params.ordered is true)"
        return f"missing call {_render(r)}"
    extra = [g for j, g in enumerate(got) if j not in done_g]
    return f"{len(extra)} extra call(s): {_render(extra[0])}"


def _load(reference: str, params: dict) -> tuple[list[Call], dict, _Opts]:
    tools, opts = _options(params)
    calls = parse_reference(reference)
    for call in calls:
        problem = _invalid(call, tools)
        if problem:
            raise ValueError(f"the reference call fails its own tool layer: {problem}")
        try:
            json.dumps(_plain(call.arguments), allow_nan=False)
        except ValueError:
            raise ValueError(f"{call.name}: a NaN or infinity in the reference can never be matched") from None
    return calls, tools, opts


def verify_function_call(response: str, reference: str, params: dict) -> V.Verdict:
    try:
        ref, tools, opts = _load(reference, params)
    except ValueError as exc:
        return V.error(f"function_call reference unusable: {exc}")
    if len(response) > MAX_CHARS:
        return V.unparsed(f"response longer than {MAX_CHARS} characters")
    got, problems = extract_calls(response)
    shown = V.clip("; ".join(_render(c) for c in got), 300)
    if not got and problems:
        return V.unparsed(problems[0])
    if not got and not ref and not problems:
        return V.correct("", "no tool call, as the reference expects")
    if not got:
        return V.unparsed("no tool call found: expected <tool_call> tags, a ```json block or a JSON response")
    checked = [(c, _invalid(c, tools)) for c in got]
    invalid = [why for _, why in checked if why]
    valid = [c for c, why in checked if not why]
    pairs = _match(ref, valid, tools, opts)
    if not problems and not invalid and len(pairs) == len(ref) == len(valid):
        return V.correct(shown, f"{len(ref)} call(s) match the reference")
    detail = (problems + invalid)[0] if problems or invalid else _mismatch(ref, valid, pairs, tools, opts)
    score = 0.0
    if opts.partial and ref:
        extra = len(problems) + len(invalid) + len(valid) - len(pairs)
        score = max(0.0, (len(pairs) - extra) / len(ref))
    return V.wrong(shown, detail, score)


def check_reference(reference: str, params: dict) -> str | None:
    try:
        _load(reference, params)
    except Exception as exc:  # noqa: BLE001 - e.g. a schema's unresolvable $ref: a data error to report
        return f"function_call reference unusable: {exc}"
    return None


def _dump(value) -> str:
    """JSON text that keeps decimals as written (json.dumps cannot write a Decimal)."""
    if isinstance(value, Decimal):
        return str(value) if value.is_finite() else json.dumps(float(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _render(call: Call) -> str:
    return f"{call.name}(" + ", ".join(f"{k}={_dump(v)}" for k, v in call.arguments.items()) + ")"


def _dump_call(call: Call) -> str:
    return _dump({"name": call.name, "arguments": call.arguments})


def solution_from_reference(reference: str, prompt: str) -> str | None:
    """The reference calls as the prompt asks for them: <tool_call> tags when it mentions them,
    else a ```json block when it shows fences, else plain JSON (one object, or a list)."""
    try:
        calls = parse_reference(reference)
    except ValueError:
        return None
    if not calls:
        return None
    if "<tool_call>" in prompt:
        return "\n".join(f"<tool_call>\n{_dump_call(c)}\n</tool_call>" for c in calls)
    body = _dump_call(calls[0]) if len(calls) == 1 else "[" + ", ".join(_dump_call(c) for c in calls) + "]"
    return f"```json\n{body}\n```" if "```" in prompt else body
