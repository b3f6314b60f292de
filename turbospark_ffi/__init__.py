"""turbospark_ffi: the turbospark-runtime speculation policy behind a C ABI.

The Python API (api.py, re-exported here) is importable on its own (no C
involved)::

    from turbospark_ffi import speculation_choices, speculation_plan
    result = speculation_plan("/models/qwen-27b", '{"speculation": 2}')
    table = speculation_choices("/models/qwen-27b", '{"tsffi": {"temperature": 0}}')

Names are loaded on first use: the package also runs inside an interpreter a
C host starts on its first call, where every import is start-up time.
"""

from __future__ import annotations

__version__ = "0.1.0"

_EXPORTS = {
    "DEFAULT_SPECULATION_BLOCK": "policy", "DFLASH_SERVING_BLOCK": "policy",
    "ALLOWED_SPECULATION_BLOCKS": "policy", "DFLASH_AUTO_NOTE": "policy",
    "SAMPLED_BLOCK_DRAFTER_REASON": "policy", "Speculation": "policy",
    "SpeculativeDrafter": "policy", "DrafterChoice": "policy", "SpeculationPlan": "policy",
    "SpeculationEnabled": "policy", "SpeculationDisabled": "policy", "DraftMode": "policy",
    "MtpDraftPolicy": "policy", "DflashDraftPolicy": "policy", "DraftPolicies": "policy",
    "resolve_drafter": "policy", "draft_policies": "policy", "resolve_speculation": "policy",
    "TurbosparkError": "errors", "InvalidArgument": "errors", "JsonArgumentError": "errors",
    "SpeculationRefused": "errors", "ResidentIndexError": "errors", "OpenRefused": "errors",
    "ResidentIndex": "resident_index", "load_resident_index": "resident_index",
    "install_has_mtp_head": "resident_index", "install_has_dflash": "resident_index",
    "Options": "options", "parse_options": "options",
    "PlanResult": "plan", "speculation_plan": "api", "install_info": "api",
    "speculation_choices": "api", "store_listing": "store_listing",
    "speculation_blocker": "blockers", "write_install": "install_writer",
    "ManifestArch": "manifest_arch", "load_manifest_arch": "manifest_arch",
    "Turn": "turn",
    "reconcile_dict": "api", "OpenFailed": "errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'turbospark_ffi' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
