"""JSON schemas of the tools the LLM agents force, and the small validator that checks replies.

The validator covers the subset of JSON Schema the tool schemas use (type, properties,
required, additionalProperties, items, enum, minItems, minLength, minimum, maximum), so the
LLM extra needs no jsonschema dependency. Errors read as ``$.kernels[0].lang: 'cu' is not
one of ['cuda', 'c']`` so they can be sent back to the model verbatim in a repair turn.

>>> validate({"a": 1}, {"type": "object", "required": ["b"]})
["$: missing required property 'b'"]
"""

from __future__ import annotations

from typing import Any

from ...plan import TASK_KINDS

_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict, "array": list, "string": str, "boolean": bool,
    "integer": int, "number": (int, float), "null": type(None),
}


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty when it conforms)."""
    errors: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        ok = any(isinstance(value, _TYPES[k]) and not (k in ("integer", "number")
                                                      and isinstance(value, bool))
                 for k in kinds)
        if not ok:
            return [f"{path}: expected {' or '.join(kinds)}, got {_json_type(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {list(schema['enum'])}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        errors.append(f"{path}: must not be empty" if schema["minLength"] == 1
                      else f"{path}: shorter than {schema['minLength']} characters")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        for name, item in value.items():
            if name in props:
                errors += validate(item, props[name], f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected property {name!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: needs at least {schema['minItems']} item(s)")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += validate(item, schema["items"], f"{path}[{i}]")
    return errors


def _json_type(value: Any) -> str:
    for name, t in _TYPES.items():
        if isinstance(value, t) and not (name in ("integer", "number") and isinstance(value, bool)):
            return name
    return type(value).__name__


_STR = {"type": "string"}
_STRS = {"type": "array", "items": {"type": "string"}}

# submit_plan mirrors plan.Task (status is the loop's business, so the model does not set it).
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tasks": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1,
                           "description": "short unique id: t1, t2, ..."},
                    "kind": {"type": "string", "enum": list(TASK_KINDS)},
                    "ops": {**_STRS, "minItems": 1,
                            "description": "graph node names the task covers, in graph order"},
                    "targets": {**_STRS, "description": "their aten targets, e.g. aten.relu.default"},
                    "share": {"type": "number", "minimum": 0, "maximum": 1,
                              "description": "estimated share of eager time, 0..1"},
                    "technique": {**_STR, "description": "how, in one line"},
                    "reason": {**_STR, "minLength": 1, "description": "why, in one line"},
                    "refs": {**_STRS, "description": "ids of the knowledge-base sections used"},
                    "params": {"type": "object",
                               "description": "emitter knobs, e.g. {\"block\": 256, \"vec\": 4}"},
                },
                "required": ["id", "kind", "ops", "reason"],
                "additionalProperties": False,
            },
        },
        "notes": {**_STRS, "description": "short notes for the person approving the plan"},
    },
    "required": ["tasks"],
    "additionalProperties": False,
}

CANDIDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kernels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1,
                             "description": "key in SOURCES/LANGS, a Python identifier"},
                    "lang": {"type": "string", "enum": ["cuda", "c"]},
                    "code": {"type": "string", "minLength": 1},
                    "entry": {**_STRS, "minItems": 1,
                              "description": "exported function names (extern \"C\")"},
                },
                "required": ["name", "lang", "code", "entry"],
                "additionalProperties": False,
            },
        },
        "program": {"type": "string", "minLength": 1,
                    "description": "Python source defining ModelNew; uses SOURCES/LANGS"},
        "replaced": {**_STRS, "description": "aten targets computed by own kernels"},
        "kept": {**_STRS, "description": "aten targets still run by the library"},
        "notes": _STR,
    },
    "required": ["kernels", "program", "replaced", "kept"],
    "additionalProperties": False,
}

_CRITERION = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": _STR},
    "required": ["score", "reason"],
    "additionalProperties": False,
}

REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "anti_hacking": _CRITERION,
        "cuda_engineering": _CRITERION,
        "coverage": _CRITERION,
        "compliance": _CRITERION,
        "notes": _STR,
    },
    "required": ["anti_hacking", "cuda_engineering", "coverage", "compliance"],
    "additionalProperties": False,
}
