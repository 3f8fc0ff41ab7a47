"""The one catalogue of errors and warnings, spaCy style.

Every message is reached as ``Errors.E001`` and reads ``"[SB-E001] ..."``; format it with
``.format(...)``. Messages say what went wrong *and what to do*. Code ranges:

- E001–E099 / W001–W099: general, knowledge bases and readers
- E100–E199 / W100–W199: encoder, index, linker component
- E200–E299 / W200–W299: training
- E300–E399 / W300–W399: evaluation
- E400–E499 / W400–W499: project, assets (UMLS download), NER

Add new entries only at the end of your range; never renumber or reuse a code.
"""
from __future__ import annotations


class _CodedMessages(type):
    def __getattribute__(cls, name: str) -> str:
        value = super().__getattribute__(name)
        if name[:1] in ("E", "W") and name[1:].isdigit():
            return f"[SB-{name}] {value}"
        return value


class SapbertError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(SapbertError, ValueError):
    """An option or argument has a value we cannot use."""


class DataFormatError(SapbertError, ValueError):
    """An input file is malformed (the message names file and line)."""


class MissingInputError(SapbertError, FileNotFoundError):
    """A file or folder we need does not exist."""


class IncompatibleError(SapbertError, ValueError):
    """Two artefacts do not belong together (an index built with another encoder or KB, ...)."""


class EmptyResultError(SapbertError, ValueError):
    """Filtering or reading left nothing to work with."""


class DownloadError(SapbertError, RuntimeError):
    """A download failed; the partial file is kept so the next run resumes."""


class TrainingError(SapbertError, RuntimeError):
    """Training cannot start or continue."""


class Warnings(metaclass=_CodedMessages):
    # ---- W001–W099: general, knowledge bases and readers ----
    W001 = "{path}: line {line}: {what}; the line was skipped."

    # ---- W100–W199: encoder, index, linker ----

    # ---- W200–W299: training ----

    # ---- W300–W399: evaluation ----

    # ---- W400–W499: project, assets, NER ----


class Errors(metaclass=_CodedMessages):
    # ---- E001–E099: general, knowledge bases and readers ----
    E001 = "{what} not found: '{path}'. Check the path; {hint}"
    E002 = "Unknown {what} '{value}'. Choose one of: {choices}."
    E003 = "Output '{path}' already exists. Pass overwrite=True (--overwrite on the command line) to replace it."
    E004 = "'{path}' is not valid UTF-8 (line {line}). Re-encode the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`."

    # ---- E100–E199: encoder, index, linker ----

    # ---- E200–E299: training ----

    # ---- E300–E399: evaluation ----

    # ---- E400–E499: project, assets, NER ----


__all__ = [
    "Errors",
    "Warnings",
    "SapbertError",
    "ConfigError",
    "DataFormatError",
    "MissingInputError",
    "IncompatibleError",
    "EmptyResultError",
    "DownloadError",
    "TrainingError",
]
