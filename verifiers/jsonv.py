"""The `json` verifier: the response holds a JSON value that matches a schema and field checks.

reference: a JSON object with optional `schema` (a JSON Schema) and `fields` (a mapping from a
dotted path such as `order.items.0.sku` to the expected value); params may carry the same two keys
(a reference key wins). The response's JSON is the last ```json block, else the whole response,
else the last balanced {...} object in it. Two different top-level JSON objects in fences count as
hedging. A response that parses but fails the schema or a field scores 0 with the reason.
"""

from __future__ import annotations

import json
import re

from . import verdict as V

# the info string is short and has no backticks, so a run of "```" without newlines is linear
_FENCE = re.compile(r"```[ \t]*(?:json)?[^\n`]{0,40}\n(.*?)```", re.DOTALL | re.IGNORECASE)
_MISSING = object()


def _spec(reference: str, params: dict) -> dict:
    ref = json.loads(reference) if reference.strip() else {}
    if not isinstance(ref, dict):
        raise ValueError("json reference must be a JSON object with 'schema' and/or 'fields'")
    spec = {"schema": params.get("schema"), "fields": params.get("fields") or {}}
    spec.update({k: ref[k] for k in ("schema", "fields") if k in ref})
    if spec["schema"] is None and not spec["fields"]:
        raise ValueError("json reference has neither 'schema' nor 'fields'; nothing to check")
    return spec


class Hedging(ValueError):
    """The response holds several different JSON answers."""


# json.loads raises these on model output too: too-deep nesting, integers past 4,300 digits
_BAD_JSON = (json.JSONDecodeError, ValueError, RecursionError)


def extract_json(response: str):
    blocks = _FENCE.findall(response)
    values = []
    for block in blocks:
        try:
            values.append(json.loads(block))
        except _BAD_JSON:
            continue
    if values:
        distinct = {json.dumps(v, sort_keys=True) for v in values}
        if len(distinct) > 1:
            raise Hedging(f"hedged between {len(distinct)} different JSON blocks")
        return values[-1]
    try:
        return json.loads(response)
    except _BAD_JSON:
        pass
    return _last_object(response)


MAX_FAILED_OPENERS = 2000


def _last_object(text: str):
    """The last top-level JSON object in prose: decode forward from each `{`, skipping the inside
    of every object read. Trying every `{`/`}` pair was quadratic (30 s on 4,000 nested braces);
    here each character is read once per failed opener, and after MAX_FAILED_OPENERS failures
    the search stops with what it found."""
    decoder = json.JSONDecoder()
    found, pos, failed = _MISSING, 0, 0
    while (start := text.find("{", pos)) >= 0 and failed < MAX_FAILED_OPENERS:
        try:
            value, pos = decoder.raw_decode(text, start)
        except _BAD_JSON:
            failed, pos = failed + 1, start + 1
            continue
        found = value
    return found


def _get(value, path: str):
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def verify_json(response: str, reference: str, params: dict) -> V.Verdict:
    try:
        spec = _spec(reference, params)
    except (ValueError, json.JSONDecodeError) as exc:
        return V.error(f"json reference unusable: {exc}")
    if len(response) > int(params.get("max_chars", 200_000)):
        return V.unparsed("response longer than max_chars")
    try:
        value = extract_json(response)
    except Hedging as exc:
        return V.hedged("", str(exc))
    if value is _MISSING:
        return V.unparsed("no JSON value found in the response")
    shown = V.clip(json.dumps(value, ensure_ascii=False), 200)
    if spec["schema"] is not None:
        import jsonschema

        try:
            jsonschema.validate(value, spec["schema"])
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            return V.wrong(shown, f"schema: at {where}: {V.clip(exc.message, 200)}")
        except jsonschema.SchemaError as exc:
            return V.error(f"json reference schema is invalid: {V.clip(exc.message, 200)}")
    for path, expected in spec["fields"].items():
        got = _get(value, path)
        if got is _MISSING:
            return V.wrong(shown, f"field {path!r} is missing")
        if got != expected:
            return V.wrong(shown, f"field {path!r} is {V.clip(repr(got), 60)}, expected {V.clip(repr(expected), 60)}")
    return V.correct(shown, "valid JSON matching the schema and fields")


def check_reference(reference: str, params: dict) -> str | None:
    try:
        spec = _spec(reference, params)
        if spec["schema"] is not None:
            import jsonschema

            jsonschema.validators.validator_for(spec["schema"]).check_schema(spec["schema"])
    except Exception as exc:  # noqa: BLE001 - any failure here is a data error to report
        return f"json reference unusable: {exc}"
    return None


def solution_from_reference(reference: str, prompt: str) -> str | None:
    return None
