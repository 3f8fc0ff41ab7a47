"""The ``sapbert_linker`` spaCy component: the pipe (:mod:`.component`), saving and loading it (:mod:`.storage`,
:mod:`.packing` for bytes, :mod:`.resources` for a KB and index kept outside the pipeline), its confidence
(:mod:`.confidence`) and the ``Span._.kb_ents`` extension (:mod:`.extension`). The entry point
``spacy_sapbert.linker:make_sapbert_linker`` registers the factory."""
from .component import DEFAULT_CONFIG, SapbertLinker, make_sapbert_linker

__all__ = ["SapbertLinker", "make_sapbert_linker", "DEFAULT_CONFIG"]
