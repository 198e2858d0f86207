"""TOML profile -> typed, validated configuration.

A profile says how to build an engine, how to run its bench and logits commands, and which
rules the gate applies. Its tables are declared once (``spec`` for the console's own sections,
``tables`` for the rest), and the loader, the JSON Schema (`console profile schema`) and
docs/PROFILES.md are all read from those declarations. Every error names the file, the key
(dotted path) and what was expected, and is raised before anything is built. Relative paths are
resolved against the profile file's directory.

The declarations use pydantic v2: it validates nested tables with the exact location of each
problem and writes the JSON Schema editors need, where a hand-written validator would have to
do both again; its dataclasses stay dataclasses (``replace``, ``asdict``) for every caller.
"""
from ..core.decisions.health import HealthRules, PreflightRules
from ..core.decisions.queue import QueueRules
from ..core.records.rules import Bands, GateRules, Guard, rules_from_dict
from .loader import ProfileError, json_schema, load_profile, schema_text
from .spec import (AccuracySpec, AdjudicationSpec, BenchSpec, HarnessSpec, ImageSpec, ModelFile, ParitySpec,
                   Profile, ReferenceSpec, RunSpec, Source, Tool, Variant)

__all__ = [
    "AccuracySpec", "AdjudicationSpec", "Bands", "BenchSpec", "GateRules", "Guard", "HarnessSpec", "HealthRules",
    "ImageSpec", "ModelFile", "ParitySpec", "PreflightRules", "Profile", "ProfileError", "QueueRules",
    "ReferenceSpec", "RunSpec", "Source", "Tool", "Variant", "json_schema", "load_profile", "rules_from_dict",
    "schema_text",
]
