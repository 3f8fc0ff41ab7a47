"""Saving and loading the ``sapbert_linker`` component: ``to_disk``/``from_disk`` (encoder, prototypes, calibration,
abbreviation table, and KB + index or a pointer to them outside the pipeline), ``to_bytes``/``from_bytes`` (only the
files ``to_disk`` writes), and :meth:`~LinkerStorage.export_resources`. A mixin of
:class:`~spacy_sapbert.linker.SapbertLinker`, kept apart so that the component's linking code and its file handling
can be read on their own."""
from __future__ import annotations

import shutil
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Tuple

from ..base.util import ensure_path
from ..calibration.model import Calibration
from ..calibration.model import FILE_NAME as CALIBRATION_FILE
from ..context.store import PrototypeStore
from ..encoding.cached import CachedEncoder
from ..encoding.onnx_encoder import INT8, ensure_int8, load_saved_encoder, write_export_for
from ..encoding.torch_encoder import Encoder
from ..errors import ConfigError, Errors
from ..index import ConceptIndex
from ..kb import KnowledgeBase
from ..mentions.abbreviation_table import FILE_NAME as ABBREVIATIONS_FILE
from ..mentions.abbreviation_table import AbbreviationTable
from ..rerank.stage import RerankStage
from .packing import checked_files, pack_folder, unpack_folder
from .resources import check, export_resources, find, pointer_for, read_pointer, write_pointer

if TYPE_CHECKING:  # for annotations only
    from .component import SapbertLinker


def _open_index(folder: Path, kb: Optional[KnowledgeBase]) -> Tuple[KnowledgeBase, ConceptIndex]:
    """The KB below ``folder`` (unless the resources check opened it already) and its index."""
    if kb is None:
        kb = KnowledgeBase.from_disk(folder / "kb")
    return kb, ConceptIndex.from_disk(folder / "index", kb)


class LinkerStorage:
    """``to_disk``/``from_disk``/``to_bytes``/``from_bytes`` of the linker (see the module docstring)."""

    name: str
    cfg: Dict[str, Any]
    encoder: Optional[CachedEncoder]
    index: Optional[ConceptIndex]
    prototypes: Any
    reranker: Any
    calibration: Any
    abbreviations: Any
    _resources_dir: Optional[Path]
    kb: Any  # the component's KB (a property of the component)

    def to_disk(self, path: Any, *, exclude: Iterable[str] = ()) -> None:
        """Write encoder (safetensors + tokenizer), prototypes, and KB and index (or, with
        ``resources="outside"``, the pointer to them) below ``path``."""
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.encoder is None or self.index is None:
            return  # an uninitialised component has nothing to save; from_disk leaves it so
        self.encoder.to_disk(path / "encoder")
        if isinstance(self.encoder, Encoder) and self.cfg["runtime"] != "torch":
            write_export_for(self.encoder, path / "encoder", required=self.cfg["runtime"] == "onnx")
        if self.cfg["precision"] == INT8:  # the int8 copy travels (and is checked at load) like model.onnx
            ensure_int8(path / "encoder")
        if self.prototypes is not None:
            self.prototypes.to_disk(path / "prototypes")
        if self.reranker is not None:
            self.reranker.to_disk(path / "reranker")
        if self.calibration is not None:
            self.calibration.to_disk(path / CALIBRATION_FILE)
        elif (path / CALIBRATION_FILE).exists():  # saving over an older pipeline folder: not another's file
            (path / CALIBRATION_FILE).unlink()
        if self.abbreviations is not None:
            self.abbreviations.to_disk(path / ABBREVIATIONS_FILE)
        elif (path / ABBREVIATIONS_FILE).exists():
            (path / ABBREVIATIONS_FILE).unlink()
        if self.cfg["resources"] == "outside":
            self._save_pointer(path)
            return
        kb_dir = path / "kb"
        if kb_dir.exists():
            shutil.rmtree(kb_dir)
        self.kb.to_disk(kb_dir)
        self.index.to_disk(path / "index")

    def from_disk(self, path: Any, *, exclude: Iterable[str] = ()) -> "SapbertLinker":
        path = ensure_path(path)
        pointer = read_pointer(path)
        if pointer is None and not (path / "index").exists():  # an uninitialised linker was saved: so is this one
            self.encoder, self.index, self._resources_dir = None, None, None
            self.set_prototypes(None)
            return self
        folder, kb = path, None
        if pointer is not None:  # the KB the check opened is the one used
            folder, kb = find(pointer, self.cfg["resources_path"], pipeline_path=path, component=self.name)
        # the KB and index open in a second thread while this one loads the encoder: both spend most of their
        # time in native code that releases the GIL (hnswlib's file read, ONNX Runtime's session), so a warm load
        # waits for the slower of the two instead of their sum (docs/footprint.md). The thread ends before
        # from_disk returns (no thread outlives the load: nlp.pipe(n_process=...) forks after it), and the
        # errors are raised in the sequential order: the encoder's first, then the KB's or index's.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sapbert_linker_load") as pool:
            opened = pool.submit(_open_index, folder, kb)
            try:
                encoder = load_saved_encoder(path / "encoder", runtime=self.cfg["runtime"],
                                             device=self.cfg["device"], precision=self.cfg["precision"])
            except BaseException:
                opened.cancel()
                raise
            kb, index = opened.result()
        if (path / "prototypes").exists():  # prototypes travel with the pipeline, even with outside resources
            self.prototypes = PrototypeStore.from_disk(path / "prototypes", kb=kb, device=self.cfg["device"])
        if (path / "reranker").exists():  # the re-ranker travels with the pipeline too
            self.reranker = RerankStage(path / "reranker", device=self.cfg["device"],
                                        precision=self.cfg["reranker_precision"])
        self.calibration = None  # the folder's own calibration (or none) replaces one held before
        self.set_resources(encoder, index, path=folder / "index")
        calibration = None
        if (path / CALIBRATION_FILE).exists():  # travels with the pipeline, even with outside resources
            calibration = Calibration.from_disk(path / CALIBRATION_FILE)
        self.set_calibration(calibration, path=path / CALIBRATION_FILE)
        # travels with the pipeline too; the folder's own table (or none) replaces one held before
        table = path / ABBREVIATIONS_FILE
        self.set_abbreviations(AbbreviationTable.from_disk(table) if table.exists() else None)
        self._resources_dir = folder if pointer is not None else None
        return self

    def export_resources(self, folder: Any, *, overwrite: bool = False) -> Path:
        """Write the KB and index to the resources folder ``folder`` (``kb/`` + ``index/``) and use it
        from now on: with ``resources="outside"`` the pipeline then saves only a pointer to it."""
        if self.encoder is None or self.index is None:
            raise ConfigError(Errors.E114.format(name=self.name))
        self._resources_dir = export_resources(self.kb, self.index, folder, overwrite=overwrite)
        return self._resources_dir

    def _save_pointer(self, path: Path) -> None:
        folder = self._resources_dir
        if folder is None and self.cfg["resources_path"]:
            folder = ensure_path(self.cfg["resources_path"])
            if not (folder / "index").exists():
                self.export_resources(folder)
        if folder is None:
            raise ConfigError(Errors.E130.format(component=self.name))
        pointer = pointer_for(folder.name, self.kb, ConceptIndex.read_meta(folder / "index"))
        check(folder, pointer)  # the folder holds this linker's KB and index, not another's
        write_pointer(path, pointer)

    def to_bytes(self, *, exclude: Iterable[str] = ()) -> bytes:
        with tempfile.TemporaryDirectory() as tmp:
            self.to_disk(tmp)
            return pack_folder(Path(tmp))

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = ()) -> "SapbertLinker":
        """Load bytes from :meth:`to_bytes`; only the file names ``to_disk`` writes are accepted (E550)."""
        checked_files(data)  # refuse a bad blob before making the folder
        # the files stay on disk while this component lives: the KB is memory-mapped and an ONNX
        # encoder reads its model file again in a forked process
        tmp = Path(tempfile.mkdtemp(prefix="sapbert_linker_"))
        weakref.finalize(self, shutil.rmtree, str(tmp), ignore_errors=True)
        unpack_folder(data, tmp)
        return self.from_disk(tmp)
