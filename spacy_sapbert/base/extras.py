"""The optional parts of the package (setup.cfg's extras) and the check that one is installed.

The runtime install (``pip install spacy-sapbert``) loads a saved pipeline whose encoder runs in ONNX
Runtime and links with it; what else needs more packages asks for them here, before importing them, so
that a runtime-only environment gets a coded error naming the extra (:class:`MissingExtraError`, E820;
the command line exits with status 2) instead of an ``ImportError`` traceback. :func:`extra_for` maps a
module that failed to import to its extra (the command line's last resort for imports not checked first).
"""
from __future__ import annotations

import importlib.util
from typing import Any, Dict, Optional

from ..about import __version__
from ..errors import Errors, MissingExtraError

# top-level module -> (extra, distribution to name in the message)
EXTRAS: Dict[str, tuple] = {
    "torch": ("train", "torch"),
    "transformers": ("train", "transformers"),
    "safetensors": ("train", "safetensors"),
    "onnx": ("train", "onnx"),
    "scispacy": ("abbreviations", "scispacy"),
    "ray": ("ray", "ray[data]"),
    "peft": ("adapters", "peft"),
    "accelerate": ("adapters", "accelerate"),
    "sentencepiece": ("multilingual", "sentencepiece"),
    "matplotlib": ("plot", "matplotlib"),
    "spacy_transformers": ("transformers", "spacy-transformers"),
}


def is_installed(module: str) -> bool:
    """Whether the top-level ``module`` can be found (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, a module with __spec__ None
        return False


def require(what: str, *modules: str) -> None:
    """Raise :class:`MissingExtraError` (E820) naming the extra when one of ``modules`` is not installed."""
    missing = [m for m in modules if not is_installed(m)]
    if missing:
        raise MissingExtraError(missing_message(what, missing[0]))


def missing_message(what: str, module: str, reason: str = "") -> str:
    """E820 for the top-level ``module`` that is missing (``reason``: the import error, when there was one)."""
    top = module.split(".")[0]
    extra, _ = EXTRAS.get(top, ("train", top))
    packages = sorted(dist for name, (ext, dist) in EXTRAS.items() if ext == extra)
    return Errors.E820.format(what=what, packages=", ".join(packages), extra=extra,
                              reason=reason or f"no module named '{top}'")


def declare_extra(meta: Dict[str, Any], extra: str) -> None:
    """Make a pipeline's ``meta["requirements"]`` ask for ``spacy-sapbert[extra]`` (this version's minor range), so
    that the package ``spacy package`` makes of it installs the extra; other requirements are kept."""
    from packaging.requirements import InvalidRequirement, Requirement
    from spacy.util import get_minor_version_range

    kept, extras = [], {extra}
    for line in meta.get("requirements") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            kept.append(line)
            continue
        if req.name.lower().replace("_", "-") == "spacy-sapbert":
            extras |= set(req.extras)
        else:
            kept.append(line)
    meta["requirements"] = kept + [f"spacy-sapbert[{','.join(sorted(extras))}]{get_minor_version_range(__version__)}"]


def extra_for(module: Optional[str]) -> Optional[str]:
    """The extra that provides the top-level module of ``module`` (``"torch.nn"`` -> ``"train"``), or None."""
    if not module:
        return None
    found = EXTRAS.get(module.split(".")[0])
    return found[0] if found else None


__all__ = ["EXTRAS", "is_installed", "require", "missing_message", "extra_for", "declare_extra", "MissingExtraError"]
