"""spaCy DocBin files (``.spacy``): their docs as spaCy ``Doc`` s (:func:`load_docbin`, what ``convert-ner``
writes and ``spacy train`` reads) or as annotated :class:`~spacy_sapbert.mentions.records.Document` s
(:func:`read_docbin`: ``doc.ents`` or ``doc.spans[key]`` with their ``kb_id_``, for building context prototypes).

A missing file is E001 (a folder E511); a file that is not a DocBin is E613. spaCy is imported when a file is read,
not with this module.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from ..errors import DataFormatError, Errors
from ..base.lines import require_file
from ..base.util import PathLike
from .records import Document, Mention, split_ids

if TYPE_CHECKING:  # for annotations only
    from spacy.tokens import Doc
    from spacy.vocab import Vocab

_HINT = "write one with `spacy-sapbert convert-ner` or DocBin(docs=...).to_disk(path)."


def load_docbin(path: PathLike, vocab: Optional["Vocab"] = None) -> List["Doc"]:
    """The docs of a ``.spacy`` file, with ``vocab`` (default: a blank multi-language one)."""
    import spacy  # lazy: spacy
    from spacy.tokens import DocBin  # lazy: spacy

    path = require_file(path, "DocBin file", _HINT)
    if vocab is None:
        vocab = spacy.blank("xx").vocab
    try:
        return list(DocBin().from_disk(path).get_docs(vocab))
    except Exception as err:  # srsly/zlib raise several types on a foreign file
        raise DataFormatError(Errors.E613.format(path=path, reason=" ".join(str(err).split())[:200])) from None


def read_docbin(path: PathLike, *, spans_key: Optional[str] = None, types: Optional[Sequence[str]] = None
                ) -> List[Document]:
    """A DocBin's docs as ``Document`` s: ``doc.ents`` (or ``doc.spans[spans_key]``) with their ``kb_id_``
    (``A|B`` composite, empty = no id) and label as type; ``types`` keeps the spans of those labels only.
    Documents are named by their position in the file (``"0"``, ``"1"``, ...)."""
    out = []
    for n, doc in enumerate(load_docbin(path)):
        spans: Any = doc.ents if spans_key is None else doc.spans.get(spans_key, [])
        mentions = []
        for span in spans:
            if types and span.label_ not in types:
                continue
            ids, composite = split_ids(span.kb_id_)
            mentions.append(Mention(text=span.text, ids=ids, start=span.start_char, end=span.end_char,
                                    type=span.label_, doc_id=str(n), composite=composite))
        out.append(Document(doc_id=str(n), text=doc.text, mentions=mentions))
    return out


__all__ = ["load_docbin", "read_docbin"]
