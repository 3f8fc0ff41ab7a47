"""The one catalogue of errors and warnings, spaCy style.

Every message is reached as ``Errors.E001`` and reads ``"[SB-E001] ..."``; format it with
``.format(...)``. Messages say what went wrong *and what to do*. Code ranges:

- E001–E099 / W001–W099: general, knowledge bases and readers
- E100–E199 / W100–W199: encoder, index, linker component
- E200–E299 / W200–W299: training
- E300–E399 / W300–W399: evaluation
- E400–E499 / W400–W499: project, assets (UMLS download), NER
- E500–E599 / W500–W599: hardening (E500–E549: interruption, outputs, work folders, command-line input;
  E550–E599: untrusted bytes, integrity of saved folders, damaged files)
- E600–E699 / W600–W699: context (E600–E614 prototypes, re-ranking, type priors; E615–E634 training the context
  encoder; E635 / W602–W614: example names of prototypes; E636–E649: the quantized context encoder);
  E650–E659: documentation, benchmark results files
- E700–E719 / W700–W709: scale-out (link-corpus, Ray back-ends, build-index --ray)
- E720–E734 / W720–W724: multilingual encoders and evaluation readers (brat, XL-BEL, CodiEsp)
- E735–E759 / W735–W739: name languages, translation files, language restriction, cross-lingual pairs
- E760–E779 / W760–W769: research workflow (pooling from the model folder, epoch schedules, config versions,
  dev evaluation and best-model selection)
- E770–E779: multiprocess linking
- E780–E799 / W780–W789: unseen mentions (E780–E789 / W780–W784 sparse + hybrid, E790–E797 / W785–W789
  calibration, E798–E799 abbreviation tables)
- E800–E819 / W800–W809: the cross-encoder re-ranker (its files, training, the linker's use of it)
- E820–E839 / W810–W819: footprint (E820–E822 / W810–W811 lean runtime and extras, E823–E824 the linker's
  settings, E825–E829 / W812–W813 the int8 name encoder, E830–E831 / W814–W815 encoding big KBs, E832–E834 one
  large-KB index and the index settings, E835 compiling the bulk encoder, E836–E839 /
  W816–W817 the load path)

Add new entries only at the end of your range; never renumber or reuse a code. The texts live in one file per
block of ranges (:mod:`.core` E001–E499, :mod:`.hardening` E500–E699, :mod:`.features` E700–E839,
:mod:`.warning_texts` every warning); :class:`Errors` and :class:`Warnings` are the one catalogue read from them.
"""
from __future__ import annotations

from .core import CoreErrors
from .features import FeatureErrors
from .hardening import HardeningErrors
from .warning_texts import WarningTexts


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


class IntegrityError(SapbertError, ValueError):
    """A saved file does not match what was recorded when it was written (damaged, truncated, replaced)."""


class MissingExtraError(SapbertError, ImportError):
    """An optional part of the package is not installed (an extra: ``pip install "spacy-sapbert[train]"``);
    the command line exits with status 2."""


class Warnings(WarningTexts, metaclass=_CodedMessages):
    """Every warning: ``Warnings.W001`` reads ``"[SB-W001] ..."``."""


class Errors(CoreErrors, HardeningErrors, FeatureErrors, metaclass=_CodedMessages):
    """Every error: ``Errors.E001`` reads ``"[SB-E001] ..."``."""


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
    "IntegrityError",
    "MissingExtraError",
]
