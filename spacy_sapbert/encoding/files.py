"""The files of a saved encoder folder: ``sapbert_encoder.json`` (settings + file records) read with
checks, and the checksums of weights, tokenizer and ONNX export recorded and checked.

``sapbert_encoder.json`` records the files :meth:`Encoder.to_disk` wrote (weights, config,
tokenizer) under ``"files"``; ``onnx_export.json`` records ``model.onnx`` the same way. Loading
checks them (sizes + sampled hashes, see :mod:`spacy_sapbert.base.integrity`); ``spacy-sapbert verify``
checks them in full. A folder written before records were kept loads with warning W550.

A model named by hub id rather than folder is checked first (:func:`check_hub_model`): one that is in
neither a local folder nor the Hugging Face cache, while the hub is switched off, unreachable or without
it, fails at once with E512 (transformers would retry for a minute before failing).
"""
from __future__ import annotations

import enum
import json
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Tuple

from ..errors import DataFormatError, Errors, MissingInputError, Warnings
from ..base.integrity import check_files, file_records
from ..base.util import atomic_write

SETTINGS_FILE = "sapbert_encoder.json"
_FIX = ("Save the encoder again (Encoder.to_disk / nlp.to_disk) or re-download the pipeline; "
        "`spacy-sapbert verify {folder}` checks every file.")
_SETTING_TYPES = {"pooling": str, "max_length": int, "dim": int, "fingerprint": str}


def read_json_file(path: Path, *, what: str, fix: str = _FIX) -> Dict[str, Any]:
    """A JSON object from ``path``; a damaged file gives E552 naming it, with ``fix`` (``{folder}``: its folder)."""
    try:
        data = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataFormatError(Errors.E552.format(path=path, what=what, why=f"not valid JSON: {err}",
                                                 fix=fix.format(folder=path.parent))) from None
    if not isinstance(data, dict):
        raise DataFormatError(Errors.E552.format(path=path, what=what, why="not a JSON object",
                                                 fix=fix.format(folder=path.parent)))
    return data


def read_settings(folder: Path) -> Dict[str, Any]:
    """The settings of an encoder folder (E104 when missing, E552 when damaged)."""
    path = folder / SETTINGS_FILE
    if not path.is_file():
        raise MissingInputError(Errors.E104.format(path=folder, file=SETTINGS_FILE))
    settings = read_json_file(path, what="the encoder settings")
    for key, kind in _SETTING_TYPES.items():
        value = settings.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise DataFormatError(Errors.E552.format(
                path=path, what="the encoder settings", why=f"'{key}' is {value!r}, not a {kind.__name__}",
                fix=_FIX.format(folder=folder)))
    return settings


def weight_files(folder: Path, exclude: Iterable[str]) -> List[str]:
    """Names of the regular files in ``folder`` except ``exclude``, the settings and hidden files."""
    skip = set(exclude) | {SETTINGS_FILE}
    return sorted(p.name for p in folder.iterdir()
                  if p.is_file() and not p.is_symlink() and p.name not in skip and not p.name.startswith("."))


def write_settings(folder: Path, settings: Mapping[str, Any], *, exclude: Iterable[str] = ()) -> None:
    """Write ``sapbert_encoder.json``: ``settings`` plus the records of the folder's other files
    (except ``exclude``: files written later that record themselves, e.g. the ONNX export)."""
    data = dict(settings)
    data["files"] = file_records(folder, weight_files(folder, exclude))
    with atomic_write(folder / SETTINGS_FILE) as fh:
        json.dump(data, fh, indent=2, sort_keys=True)


def check_recorded(folder: Path, holder: Mapping[str, Any], *, full: bool = False, what: str = "encoder") -> None:
    """Check the files recorded under ``holder["files"]``; without records warn once (W550)."""
    records = holder.get("files")
    if records is None:
        warnings.warn(Warnings.W550.format(path=folder, what=what))
        return
    if not isinstance(records, dict):
        raise DataFormatError(Errors.E552.format(path=folder / SETTINGS_FILE, what=f"the {what} settings",
                                                 why="'files' is not a mapping", fix=_FIX.format(folder=folder)))
    check_files(folder, records, full=full, what=what)


# ---- models named by hub id ----------------------------------------------------------------------------
class HubAnswer(enum.Enum):
    """What the hub said about a model id (:func:`_probe_hub`)."""

    HAS_MODEL = "has the model"
    NOT_FOUND = "has no such model"
    UNREACHABLE = "cannot be reached"


def looks_local(name_or_path: str) -> bool:
    """Whether a model name is meant as a folder: it exists, or starts like a path (``./``, ``/``, ``~``)."""
    return name_or_path.startswith((".", "/", "~")) or Path(name_or_path).exists()


def _hub_offline() -> bool:
    """HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set: transformers loads from the cache only (read without
    importing transformers, which takes seconds)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _probe_hub(name: str, timeout: float = 5.0) -> Tuple[HubAnswer, str]:
    """Ask the hub once, without retries, whether it has model ``name``: ``(answer, detail)``."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        HfApi().model_info(name, timeout=timeout)
    except GatedRepoError:  # it exists; loading it says what the licence needs
        return HubAnswer.HAS_MODEL, ""
    except RepositoryNotFoundError:
        return HubAnswer.NOT_FOUND, ""
    except HfHubHTTPError:  # a server error: let the download try (and report) it
        return HubAnswer.HAS_MODEL, ""
    except OSError as err:  # requests' ConnectionError and Timeout are OSErrors
        return HubAnswer.UNREACHABLE, type(err).__name__
    return HubAnswer.HAS_MODEL, ""


def _in_cache(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def check_hub_model(name: str) -> None:
    """Fail at once (E512) when ``name`` is neither a local folder nor a hub model that can be loaded here:
    not a valid hub id; or not in the Hugging Face cache while the hub is switched off (HF_HUB_OFFLINE),
    unreachable or without that model. A local folder, or a cached model, passes without a request."""
    if looks_local(name):
        return
    from huggingface_hub import constants
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        raise MissingInputError(Errors.E512.format(
            name=name, reason="it is no hub id either (those read NAME or ORG/NAME)", fix="check the path")) from None
    if _in_cache(name):
        return
    if _hub_offline():
        raise MissingInputError(Errors.E512.format(
            name=name, reason=f"it is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) while the hub is "
                              "switched off (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set)",
            fix="download it once where the hub can be reached, with HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE unset"))
    answer, detail = _probe_hub(name)
    if answer is HubAnswer.UNREACHABLE:
        raise MissingInputError(Errors.E512.format(
            name=name, reason=f"the hub ({constants.ENDPOINT}) cannot be reached ({detail}) and the model is not in "
                              f"the Hugging Face cache ({constants.HF_HUB_CACHE})",
            fix="download it once where the hub can be reached (a proxy is taken from HTTPS_PROXY)"))
    if answer is HubAnswer.NOT_FOUND:
        raise MissingInputError(Errors.E512.format(
            name=name, reason=f"the hub ({constants.ENDPOINT}) has no model of that name",
            fix="check the id (a private or gated model needs `huggingface-cli login` first)"))


__all__ = ["SETTINGS_FILE", "read_settings", "write_settings", "read_json_file", "weight_files", "check_recorded",
           "HubAnswer", "check_hub_model", "looks_local"]
