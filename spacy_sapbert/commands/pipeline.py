"""Plain functions behind the ``build-index``, ``link`` and ``create-pipeline`` commands.

- :func:`build_index_dir`: KB folder + model → index folder (its metadata also records the model
  and the KB folder, so ``link`` can use the index folder alone);
- :func:`load_linking_nlp`: a spaCy pipeline folder, or an index folder (then every text is one
  mention: a blank pipeline with the linker);
- :func:`link_records`: texts → one JSON-able record per text (entities with ``kb_id`` and
  ``kb_ents``);
- :func:`create_pipeline`: a blank or given NER pipeline + the linker, initialised, written to a folder.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..base.defaults import MAX_LENGTH
from ..base.lines import require_file
from ..base.ray_session import check_address, import_ray
from ..base.util import PathLike, atomic_dir, atomic_write, ensure_path, get_logger
from ..encoding.bulk import (ENCODER_FOLDER, bulk_batch_size, bulk_encoder, check_bulk_options, names_precision,
                             ray_encoder_options, resolve_runtime, warn_emulated_bf16)
from ..encoding.int8_recipes import NAME_RECIPE, get_recipe
from ..encoding.onnx_encoder import check_int8_settings, export_onnx, quantize_export
from ..encoding.torch_encoder import SETTINGS_FILE, Encoder
from ..errors import ConfigError, DataFormatError, Errors, MissingInputError
from ..index import META_FILE, ConceptIndex, IndexSettings
from ..index.ray_build import encode_names_ray
from ..index.settings import DEFAULTS
from ..kb import KnowledgeBase

logger = get_logger("commands")


def build_index_dir(
    kb_dir: PathLike,
    model: str,
    output: PathLike,
    settings: Optional[IndexSettings] = None,
    *,
    pooling: str = "auto",
    max_length: int = MAX_LENGTH,
    device: str = "auto",
    precision: str = "auto",
    batch_size: Optional[int] = None,
    work_dir: Optional[PathLike] = None,
    overwrite: bool = False,
    show_progress: bool = True,
    chunk_size: int = 8192,
    ray: bool = False,
    actors: int = 2,
    gpus_per_actor: float = 0.0,
    address: Optional[str] = None,
    runtime: str = "auto",
    compile: bool = False,
    **options: Any,
) -> ConceptIndex:
    """Encode every name of the KB at ``kb_dir`` and write the index to ``output`` (atomically), built as
    ``settings`` say (:class:`~spacy_sapbert.index.IndexSettings`: kind, depth, cells, re-scoring, threads,
    default languages, the sparse part; keyword ``options`` change single settings, e.g. ``kind="ivf"``).
    With ``ray`` the names are encoded in chunks of ``chunk_size`` on ``actors`` Ray actors
    (``gpus_per_actor`` GPUs each; the cluster at ``address``, else a local Ray) into the work folder,
    then the index is built here from those chunks (see :mod:`spacy_sapbert.index.ray_build`).
    ``settings.languages``: the index searches only the names in these languages by default (every name is
    still indexed: :meth:`ConceptIndex.set_languages` changes it without a rebuild). ``settings.sparse``: also
    fit the char n-gram tf-idf of the names (:mod:`spacy_sapbert.index.sparse`) that hybrid scoring (the
    linker's ``sparse_weight``) reads; saved in the same folder. ``runtime``: what encodes the
    names, ``torch``, ``onnx`` (an ONNX export of the model's weights, made in the work folder, run by ONNX
    Runtime on the CPU; ``precision="int8"`` its quantized copy) or ``auto`` (ONNX float32 on a CPU from
    20,000 names, else torch; torch with ``ray``): see :mod:`spacy_sapbert.encoding.bulk`. ``batch_size``: names per
    encoder batch (default: 64; 256 for bf16 on a CPU, :func:`~spacy_sapbert.encoding.bulk.bulk_batch_size`).
    ``compile``: run the PyTorch encoder through ``torch.compile`` (a one-off ~20 s, then faster batches; with
    ``precision="bf16"`` on a CPU with AMX the fastest build, docs/scale.md); E831 with ONNX Runtime or int8."""
    settings = IndexSettings.of(settings, **options)  # every setting checked before any work
    kb_dir = ensure_path(kb_dir)
    output = ensure_path(output)
    if output.exists() and not overwrite:
        raise ConfigError(Errors.E003.format(path=output))
    check_bulk_options(runtime, precision, device, compile=compile)
    batch_size = bulk_batch_size(batch_size, precision, device, gpus_per_actor=gpus_per_actor if ray else 0.0)
    warn_emulated_bf16(precision, device)
    if ray:  # before any work: the extra is installed, the cluster answers
        import_ray("build-index --ray")
        if address:
            check_address(address)
    kb = KnowledgeBase.from_disk(kb_dir)
    if settings.languages:
        kb.row_language_mask(settings.languages)  # an unknown code fails before the model loads (E735)
    enc = Encoder.load(model, pooling=pooling, max_length=max_length, device=device,
                       precision="fp32" if precision == "int8" else precision)
    if work_dir is None:
        work_dir = output.with_name(f".{output.name}.work")
    run = resolve_runtime(runtime, precision, device, len(kb.names), ray=ray, compile=compile)
    enc = bulk_encoder(enc, run, precision, ensure_path(work_dir) / ENCODER_FOLDER, compile=compile)
    logger.info("encoding %d names with %s (%s)", len(kb.names), type(enc).__name__, names_precision(enc))
    if ray:
        encode_names_ray(kb, enc, kb_dir=kb_dir, model=model, work_dir=work_dir, chunk_size=chunk_size,
                         encoder_options=ray_encoder_options(enc, {"pooling": pooling, "max_length": max_length,
                                                                   "device": device, "precision": precision}),
                         batch_size=batch_size, actors=actors, gpus_per_actor=gpus_per_actor, address=address,
                         show_progress=show_progress)
    index = ConceptIndex.build(kb, enc, settings, batch_size=batch_size, work_dir=work_dir,
                               show_progress=show_progress, chunk_size=chunk_size)
    index.meta["model"] = enc.name
    index.meta["kb_path"] = str(kb_dir.resolve())
    index.meta["names_precision"] = names_precision(enc)
    with atomic_dir(output, overwrite=overwrite) as tmp:
        index.to_disk(tmp)
    import shutil

    shutil.rmtree(work_dir, ignore_errors=True)  # done: the chunks are no longer needed
    return index


def load_linking_nlp(
    path: PathLike,
    *,
    model: Optional[str] = None,
    kb_path: Optional[PathLike] = None,
    device: str = "auto",
    overrides: Optional[Dict[str, Any]] = None,
) -> Tuple[Any, bool]:
    """Load a spaCy pipeline folder, or build a one-component pipeline around an index folder.

    Returns ``(nlp, whole_text)``: ``whole_text`` is True for an index folder, where each text is
    linked as one mention. ``overrides`` sets linker options (``k``, ``threshold``...).
    """
    import spacy

    path = ensure_path(path)
    overrides = dict(overrides or {})
    if (path / "config.cfg").exists():
        config = {f"components.{name}.{k}": v for name in _linker_names(path) for k, v in overrides.items()}
        return spacy.load(path, config=config), False
    if not (path / META_FILE).exists():
        raise MissingInputError(Errors.E117.format(path=path))
    meta = ConceptIndex.read_meta(path)
    model = model or meta.get("model") or meta.get("encoder_name")
    if not model:
        raise MissingInputError(Errors.E118.format(path=path, what="the model", option="--model"))
    kb_path = kb_path or meta.get("kb_path")
    if not kb_path:
        raise MissingInputError(Errors.E118.format(path=path, what="the KB folder", option="--kb"))
    kb = KnowledgeBase.from_disk(kb_path)
    index = ConceptIndex.from_disk(path, kb)
    enc = Encoder.load(model, pooling=meta["pooling"], max_length=int(meta["max_length"]), device=device)
    nlp = spacy.blank("en")
    config = dict(overrides, model=str(model), pooling=meta["pooling"], max_length=int(meta["max_length"]),
                  device=device)
    config.setdefault("languages", meta.get("languages"))  # the default that build-index recorded
    linker = nlp.add_pipe("sapbert_linker", config=config)
    linker.set_resources(enc, index, path=path)
    return nlp, True


def _linker_names(path: Path) -> Iterable[str]:
    from thinc.api import Config

    config = Config().from_disk(path / "config.cfg", interpolate=False)
    return [name for name, comp in config.get("components", {}).items() if comp.get("factory") == "sapbert_linker"]


def link_records(nlp: Any, texts: Iterable[Tuple[str, str]], *, whole_text: bool = False,
                 batch_size: int = 64, names: bool = False) -> Iterator[Dict[str, Any]]:
    """``(id, text)`` pairs → one record per text: ``{"id", "text", "ents": [{start, end, text, label,
    kb_id, kb_ents}]}``; offsets are characters. With ``whole_text`` each text is one mention. With
    ``names`` each ``kb_ents`` entry is ``[concept_id, score, canonical name]`` (from the linker's KB)."""
    from spacy.tokens import Span

    pairs = list(texts)
    for doc_id, text in pairs:  # spaCy's E088 (a ValueError from deep inside nlp.pipe) as a coded error, up front
        if len(text) > nlp.max_length:
            raise DataFormatError(Errors.E560.format(doc_id=doc_id, n=len(text), maximum=nlp.max_length))
    ext = linker_extension(nlp) or "kb_ents"
    name_of = canonical_names(nlp) if names else None
    if whole_text:
        docs = []
        for _, text in pairs:
            doc = nlp.make_doc(text)
            doc.ents = [Span(doc, 0, len(doc), label="MENTION")] if len(doc) else []
            docs.append(doc)
        stream = docs
        for _, proc in nlp.pipeline:
            stream = proc.pipe(stream, batch_size=batch_size)
        out = stream
    else:
        out = nlp.pipe((text for _, text in pairs), batch_size=batch_size)
    for (doc_id, text), doc in zip(pairs, out):
        yield {"id": doc_id, "text": text, "ents": doc_entities(doc, ext, name_of)}


def doc_entities(doc: Any, extension: str = "kb_ents",
                 name_of: Optional[Callable[[str], str]] = None) -> List[Dict[str, Any]]:
    """The entities of a linked ``doc``: ``{start, end, text, label, kb_id, kb_ents}`` each (character
    offsets; ``kb_ents`` = ``[[concept_id, score], ...]`` read from ``span._.<extension>``, with
    ``name_of`` ``[[concept_id, score, name_of(concept_id)], ...]``)."""
    ents = []
    for ent in doc.ents:
        cands = ent._.get(extension) if ent.has_extension(extension) else None
        kb_ents = [[c, s] if name_of is None else [c, s, name_of(c)] for c, s in (cands or [])]
        ents.append({"start": ent.start_char, "end": ent.end_char, "text": ent.text, "label": ent.label_,
                     "kb_id": ent.kb_id_, "kb_ents": kb_ents})
    return ents


def canonical_names(nlp: Any) -> Callable[[str], str]:
    """``concept id -> canonical name`` in the KB of the last ``sapbert_linker`` of ``nlp`` (memoised;
    ``""`` for an id it does not know, or without a linker)."""
    names = [name for name, proc in nlp.pipeline if proc.__class__.__name__ == "SapbertLinker"]
    entities = nlp.get_pipe(names[-1]).kb.cui_to_entity if names else {}
    seen: Dict[str, str] = {}

    def name_of(concept_id: str) -> str:
        if concept_id not in seen:
            entity = entities.get(concept_id) if entities else None
            seen[concept_id] = entity.canonical_name if entity is not None else ""
        return seen[concept_id]

    return name_of


def linker_extension(nlp: Any) -> Optional[str]:
    """The ``span._`` extension the last ``sapbert_linker`` of ``nlp`` writes, or None without a linker."""
    names = [name for name, proc in nlp.pipeline if proc.__class__.__name__ == "SapbertLinker"]
    return nlp.get_pipe(names[-1]).cfg["extension_name"] if names else None


def create_pipeline(
    output: PathLike,
    *,
    kb_path: PathLike,
    model: str,
    base: Optional[PathLike] = None,
    lang: str = "en",
    index_path: Optional[PathLike] = None,
    config: Optional[Dict[str, Any]] = None,
    overwrite: bool = False,
    show_progress: bool = True,
    resources_dir: Optional[PathLike] = None,
    index_settings: Optional[IndexSettings] = None,
    abbreviations_path: Optional[PathLike] = None,
    **options: Any,
) -> Any:
    """A blank (``lang``) or given pipeline (``base``) + ``sapbert_linker`` (``config``), initialised
    with the KB (and the index at ``index_path``, built when absent, as ``index_settings`` say: an
    :class:`~spacy_sapbert.index.IndexSettings`; keyword ``options`` change single settings, e.g.
    ``kind="ivf"``), written to ``output``; the settings that differ from the defaults are recorded in its
    config's ``[initialize.components.sapbert_linker.index_settings]``.
    With ``resources_dir`` the KB and index are written there and the pipeline holds only a pointer
    to them (``resources = "outside"``: a small package for a UMLS-sized index). ``abbreviations_path``: an
    abbreviation table the linker uses and saves (initialize's ``abbreviations_path``)."""
    import spacy

    index_settings = IndexSettings.of(index_settings, **options)
    output = ensure_path(output)
    if output.exists() and not overwrite:
        raise ConfigError(Errors.E003.format(path=output))
    nlp = spacy.load(base) if base is not None else spacy.blank(lang)
    config = dict(config or {}, model=str(model))
    if resources_dir is not None:
        config["resources"] = "outside"
    linker = nlp.add_pipe("sapbert_linker", config=config)
    default = DEFAULTS.to_dict()
    chosen = {k: v for k, v in index_settings.to_dict().items() if v != default[k]}
    settings: Dict[str, Any] = {"kb_path": str(ensure_path(kb_path).resolve()), "index_settings": chosen}
    if index_path is not None:
        settings["index_path"] = str(ensure_path(index_path).resolve())
    if abbreviations_path is not None:
        settings["abbreviations_path"] = str(ensure_path(abbreviations_path).resolve())
    linker.initialize(lambda: [], nlp=nlp, show_progress=show_progress, **settings)
    if resources_dir is not None:
        linker.export_resources(resources_dir, overwrite=overwrite)
    nlp.config["initialize"]["components"]["sapbert_linker"] = {k: v for k, v in settings.items() if v}
    with atomic_dir(output, overwrite=overwrite) as tmp:
        nlp.to_disk(tmp)
    return nlp


def export_onnx_dir(path: PathLike, *, quantize: bool = False, recipe: str = NAME_RECIPE) -> List[Path]:
    """Write the ONNX export of an encoder folder (one with ``sapbert_encoder.json``), or of every
    ``sapbert_linker`` encoder of a pipeline folder. ``quantize``: also its int8 copy made by ``recipe``
    (:mod:`~spacy_sapbert.encoding.int8_recipes`; recorded in ``onnx_export.json``), and in a pipeline folder
    each linker's ``precision`` set to ``int8`` in ``config.cfg`` so that the pipeline runs it (E825 for a
    linker that runs PyTorch or a GPU, E828 for an unknown recipe: first, before anything is written).
    Returns the encoder folders exported."""
    path = ensure_path(path)
    if quantize:
        get_recipe(recipe)
    if (path / SETTINGS_FILE).is_file():
        folders = [path]
    else:
        folders = sorted(p.parent for p in path.glob(f"*/encoder/{SETTINGS_FILE}"))
    if not folders:
        raise MissingInputError(Errors.E104.format(path=path, file=SETTINGS_FILE))
    config = _int8_config(path, [f.parent.name for f in folders]) if quantize and folders[0] != path else None
    for folder in folders:
        export_onnx(Encoder.from_disk(folder, device="cpu", precision="fp32"), folder)
        if quantize:
            quantize_export(folder, recipe)
    if config is not None:
        with atomic_write(path / "config.cfg") as fh:
            fh.write(config.to_str())
    return folders


def _int8_config(pipeline: Path, names: Sequence[str]) -> Any:
    """The pipeline's config with ``precision = "int8"`` for the linkers ``names`` (E825 for one whose runtime or
    device cannot run it)."""
    from spacy.util import load_config

    config = load_config(pipeline / "config.cfg", interpolate=False)
    for name in names:
        cfg = config["components"].get(name, {})
        check_int8_settings(name, cfg.get("runtime", "auto"), cfg.get("device", "auto"))
        cfg["precision"] = "int8"
    return config


def read_texts(paths: Sequence[PathLike], stdin: BinaryIO) -> List[Tuple[str, str]]:
    """The ``link`` command's input as ``(id, text)`` pairs: each file is one document (id: its path),
    else each line of ``stdin`` is one (id: its line number). Input must be UTF-8 (E506 names the file
    and line otherwise); a missing input file is E001, a folder E511."""
    if not paths:
        return [(str(i), _decode(line, "<stdin>", i).rstrip("\r\n")) for i, line in enumerate(stdin, start=1)]
    texts = []
    for path in paths:
        path = require_file(path, "Input text file", "give text files (one document each), or lines on stdin.")
        data = path.read_bytes()
        texts.append((str(path), _decode(data, str(path), 1)))
    return texts


def _decode(data: bytes, name: str, first_line: int) -> str:
    try:
        return data.decode("utf8")
    except UnicodeDecodeError as err:
        line = first_line + data[: err.start].count(b"\n")
        raise DataFormatError(Errors.E506.format(path=name, line=line, reason=err.reason)) from None


def write_jsonl(records: Iterable[Dict[str, Any]], fh: Any) -> int:
    n = 0
    for record in records:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        n += 1
    return n


__all__ = ["build_index_dir", "load_linking_nlp", "link_records", "create_pipeline", "read_texts", "write_jsonl"]
