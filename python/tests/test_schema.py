"""The dataclasses against the JSON schemas dsh-exec publishes: a property
added to (or removed from) a Rust type must show here as a failure, not go
missing in Python silently."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import dsh_exec

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"

# The schema's name of each object (a $defs entry, or the file's root) and
# the class that holds it.
CLASSES: dict[str, type[Any]] = {
    "RunResult": dsh_exec.RunResult,
    "CollectedOutput": dsh_exec.Stream,
    "SandboxFacts": dsh_exec.Sandbox,
    "DenialFact": dsh_exec.Denial,
    "NetworkDenial": dsh_exec.NetworkDenial,
    "ProtectedChangeFact": dsh_exec.ProtectedChange,
    "Resources": dsh_exec.Resources,
    "LimitFacts": dsh_exec.Limits,
    "NotEnforced": dsh_exec.NotEnforced,
    "ReadReply": dsh_exec.JobRead,
    "TransactionFacts": dsh_exec.Transaction,
    "Change": dsh_exec.Change,
    "CommitReport": dsh_exec.CommitReport,
    "Refusal": dsh_exec.Refusal,
}


def load(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())


def objects(schema: dict[str, Any]) -> list[tuple[str, set[str]]]:
    """Every object with properties in a schema file: the root (by its
    title) and each $defs entry, with its property names."""
    found = [(schema["title"], set(schema["properties"]))] if "properties" in schema else []
    for name, definition in schema.get("$defs", {}).items():
        if "properties" in definition:
            found.append((name, set(definition["properties"])))
    return found


def field_names(cls: type[Any]) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if not f.metadata.get("dsh_exec_not_in_schema")}


@pytest.mark.parametrize("schema_name", ["run-result", "job-read"])
def test_every_schema_object_has_a_class_with_exactly_its_properties(schema_name: str) -> None:
    for name, properties in objects(load(schema_name)):
        assert name in CLASSES, f"{schema_name}: object {name} has no dataclass in dsh_exec"
        cls = CLASSES[name]
        fields = field_names(cls)
        assert properties - fields == set(), f"{name}: properties with no field in {cls.__name__}"
        assert fields - properties == set(), f"{cls.__name__}: fields that {name} does not have"


def test_a_required_property_is_defaulted_only_where_the_schema_allows() -> None:
    # A default here for a required, non-null property would hide its
    # absence from a reply, unless the schema names that default itself.
    for schema_name in ("run-result", "job-read"):
        schema = load(schema_name)
        for name, definition in {schema["title"]: schema, **schema["$defs"]}.items():
            if name not in CLASSES:
                continue
            cls = CLASSES[name]
            by_name = {f.name: f for f in dataclasses.fields(cls)}
            for prop in definition.get("required", []):
                spec = definition["properties"][prop]
                nullable = "null" in spec.get("type", []) or any(
                    alt.get("type") == "null" for alt in spec.get("anyOf", [])
                )
                field = by_name[prop]
                defaulted = (
                    field.default is not dataclasses.MISSING
                    or field.default_factory is not dataclasses.MISSING
                )
                if defaulted and not nullable:
                    assert "default" in spec, f"{cls.__name__}.{prop}: required, yet defaulted"


def test_job_started_is_what_a_job_holds() -> None:
    assert set(load("job-started")["properties"]) == {"dir", "job_id", "pid"}
    job = dsh_exec.Job("j1", 42, "/x")
    assert (job.id, job.pid, job.dir) == ("j1", 42, "/x")


def test_error_object_is_code_and_message() -> None:
    detail = load("error")["$defs"]["ErrorDetail"]
    assert set(detail["properties"]) == {"code", "message"}


def test_unknown_keys_are_kept_not_fatal() -> None:
    stream = {"text": "hi\n", "truncated": False, "kept": "tail", "omitted_bytes": 0,
              "total_bytes": 3, "spill_path": None, "from_the_future": 1}  # fmt: skip
    data = {
        "command": "echo hi", "workdir": "/", "exit_code": 0, "signal": None,
        "timed_out": False, "aborted": False, "timeout_ms": 1000, "duration_ms": 2,
        "stdout": stream, "stderr": dict(stream, text="", total_bytes=0),
        "sandbox": {"mode": "read-only", "denied": True, "enforcement": "full",
                    "network": "loopback", "network_enforcement": "gate",
                    "runner_failed": False, "read_enforcement": None,
                    "denials_more": 0, "network_denied": False,
                    "denials": [{"op": "write", "errno": "EROFS", "source": "output",
                                 "path": "/etc/x", "hint": None, "network": False,
                                 "count": 1, "new_denial_key": [1]}]},
        "env_scrubbed": [], "resources": None, "limit_exceeded": None,
        "a_new_top_level_key": {"nested": True},
    }  # fmt: skip
    result = dsh_exec.RunResult.from_json(data)
    assert result.extra == {"a_new_top_level_key": {"nested": True}}
    assert result.stdout.text == "hi\n"
    assert result.stdout.extra == {"from_the_future": 1}
    assert result.sandbox is not None
    assert result.sandbox.denials == (
        dsh_exec.Denial(op="write", errno="EROFS", source="output", path="/etc/x"),
    )
    assert result.sandbox.denials[0].extra == {"new_denial_key": [1]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.exit_code = 1  # type: ignore[misc]


def test_every_event_kind_has_its_class() -> None:
    """Each variant of schema/event.schema.json against the class events()
    yields for it: a new kind, or a property added to one, fails here."""
    schema = load("event")
    carried = {
        # kind: (class, how its properties map to the class's fields)
        "start": (dsh_exec.StartEvent, None),
        "stdout": (dsh_exec.OutputEvent, {"text", "encoding"}),
        "stderr": (dsh_exec.OutputEvent, {"text", "encoding"}),
        "notice": (dsh_exec.NoticeEvent, None),
        "dropped": (dsh_exec.DroppedEvent, None),
        "denial": (dsh_exec.DenialEvent, None),
        "limit": (dsh_exec.LimitEvent, None),
        "exit": (dsh_exec.ExitEvent, None),
        "error": (dsh_exec.DshExecError, {"code", "message"}),
    }
    kinds = {v["properties"]["event"]["const"]: v for v in schema["oneOf"]}
    assert set(kinds) == set(carried)
    for kind, variant in kinds.items():
        properties = set(variant["properties"]) - {"event"}
        cls, mapped = carried[kind]
        if kind == "denial":
            expected = field_names(dsh_exec.Denial)
        elif mapped is not None:
            expected = mapped
        else:
            expected = field_names(cls)
        assert properties == expected, f"{kind}: {properties} against {cls.__name__}"
