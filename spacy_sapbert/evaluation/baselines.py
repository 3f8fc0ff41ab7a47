"""Systems compared side by side on one dictionary: exact match, char-3gram tf-idf, a dense
encoder (the base encoder, or the model under test, mention-only), and scispaCy's ``EntityLinker``.

All of them rank the same :class:`Dictionary` (the KB's normalised names, after the run's
punctuation folding, duplicates merged) and return :class:`~.metrics.Ranking` lists: names best
first (for the lenient protocol) and concepts ranked by their best name, at equal scores the concept whose
preferred (canonical) name it is first, then by concept id (for the strict one), as the linker ranks them.
Searches are exact (brute force) and deterministic: equal scores are ordered by dictionary row.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..base.util import PathLike, get_logger
from ..index.aggregate import preferred_rows
from .cache import VectorCache, encoder_key
from ..mentions.metrics import Ranking

logger = get_logger("evaluation.baselines")

# concepts are ranked over the best NAME_POOL * k names (a concept with several near names must not
# push others out of its top k); the name list itself is cut at k
NAME_POOL = 4


class Dictionary:
    """The names every system searches: ``names[i]`` belongs to the concepts ``concepts[i]``."""

    def __init__(self, names: Sequence[str], concepts: Sequence[Tuple[str, ...]],
                 preferred: Optional[Sequence[Tuple[str, ...]]] = None) -> None:
        """``preferred[i]``: the concepts of ``concepts[i]`` whose preferred name ``names[i]`` is (None: none)."""
        self.names: List[str] = list(names)
        self.concepts: List[Tuple[str, ...]] = [tuple(c) for c in concepts]
        self.preferred: List[frozenset] = ([frozenset(p) for p in preferred] if preferred is not None
                                           else [frozenset()] * len(self.names))
        self._row = {n: i for i, n in enumerate(self.names)}

    @classmethod
    def from_kb(cls, kb, prep: Optional[Callable[[str], str]] = None) -> "Dictionary":
        """Rows of ``kb.names`` with ``prep`` applied; names that become equal are merged and
        their concepts united (and the concepts they are the preferred name of); names that become
        empty are dropped."""
        ptr, idx = kb.row_concept_csr()
        cids = kb.concept_ids
        first = preferred_rows(*kb.concept_row_csr())
        merged: Dict[str, set] = {}
        prefer: Dict[str, set] = {}
        for row, name in enumerate(kb.names):
            key = prep(name) if prep is not None else name
            if not key:
                continue
            owners = [int(j) for j in idx[int(ptr[row]) : int(ptr[row + 1])]]
            merged.setdefault(key, set()).update(cids[j] for j in owners)
            prefer.setdefault(key, set()).update(cids[j] for j in owners if first[j] == row)
        names = list(merged)
        return cls(names, [tuple(sorted(merged[n])) for n in names], [tuple(sorted(prefer[n])) for n in names])

    def __len__(self) -> int:
        return len(self.names)

    def row(self, name: str) -> int:
        return self._row.get(name, -1)

    def ranking(self, rows: Sequence[int], scores: Sequence[float], k: int) -> Ranking:
        """A :class:`Ranking` from name rows best first: names cut at ``k``; concepts scored by
        their best name among *all* ``rows`` given, ordered by (-score, not its preferred name, concept id), cut
        at ``k``."""
        names = [(self.names[r], self.concepts[r], float(s)) for r, s in zip(rows[:k], scores[:k])]
        best: Dict[str, Tuple[float, bool]] = {}  # concept -> (score, its best name is its preferred one)
        for r, s in zip(rows, scores):
            for cid in self.concepts[r]:
                mine = cid in self.preferred[r]
                if cid not in best or (float(s), mine) > best[cid]:
                    best[cid] = (float(s), mine)
        order = sorted(best.items(), key=lambda x: (-x[1][0], not x[1][1], x[0]))[:k]
        concepts = [(cid, score) for cid, (score, _mine) in order]
        return Ranking(concepts=concepts, names=names)


def top_rows(scores: np.ndarray, k: int, *, min_score: float = -np.inf) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Per row of ``scores`` [n, m]: the ``k`` best columns (score descending, then column), with
    scores; columns scoring ≤ ``min_score`` are left out. Exact, deterministic under ties."""
    out = []
    m = scores.shape[1]
    kk = min(k, m)
    for row in scores:
        if kk == 0:
            out.append((np.zeros(0, np.int64), np.zeros(0, np.float32)))
            continue
        kth = np.partition(row, m - kk)[m - kk]
        cand = np.nonzero(row >= kth)[0]
        order = np.lexsort((cand, -row[cand]))[:kk]
        cols = cand[order]
        vals = row[cols]
        keep = vals > min_score
        out.append((cols[keep].astype(np.int64), vals[keep].astype(np.float32)))
    return out


class System:
    """A linker that ranks dictionary names (or concepts) for mention strings."""

    name: str = "system"

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> Dict[str, object]:
        return {"name": self.name, "class": type(self).__name__}


class ExactMatch(System):
    """The query string equals a dictionary name (after the same preprocessing): that name, score 1."""

    def __init__(self, dictionary: Dictionary, name: str = "exact match") -> None:
        self.dictionary = dictionary
        self.name = name

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        out = []
        for q in queries:
            r = self.dictionary.row(q)
            out.append(self.dictionary.ranking([r], [1.0], k) if r >= 0 else Ranking(concepts=[], names=[]))
        return out


class TfidfCharNgrams(System):
    """Character 3-gram tf-idf (``char_wb``, fitted on the dictionary), exact sparse cosine."""

    def __init__(self, dictionary: Dictionary, *, ngram_range: Tuple[int, int] = (3, 3),
                 chunk_size: int = 256, name: str = "char-3gram tf-idf") -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.dictionary = dictionary
        self.name = name
        self.chunk_size = chunk_size
        self.ngram_range = tuple(ngram_range)
        self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=self.ngram_range, min_df=1,
                                          dtype=np.float32)
        self.matrix = self.vectorizer.fit_transform(dictionary.names).T.tocsr()

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        out: List[Ranking] = []
        q = self.vectorizer.transform(list(queries))
        for start in range(0, q.shape[0], self.chunk_size):
            sims = (q[start : start + self.chunk_size] @ self.matrix).toarray()
            for rows, vals in top_rows(sims, NAME_POOL * k, min_score=0.0):
                out.append(self.dictionary.ranking(rows.tolist(), vals.tolist(), k))
        return out

    def describe(self) -> Dict[str, object]:
        return {**super().describe(), "analyzer": "char_wb", "ngram_range": list(self.ngram_range), "search": "exact"}


class DenseEncoder(System):
    """An :class:`~spacy_sapbert.encoding.torch_encoder.Encoder` ([CLS] or its pooling) over the dictionary,
    exact inner-product search (vectors are L2-normalised: cosine)."""

    def __init__(self, encoder, dictionary: Dictionary, *, name: str = "encoder", batch_size: int = 128,
                 cache_dir: Optional[PathLike] = None, show_progress: bool = True, chunk_size: int = 256) -> None:
        self.encoder = encoder
        self.dictionary = dictionary
        self.name = name
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.chunk_size = chunk_size
        self.cache = VectorCache(cache_dir, encoder_key(encoder), dim=encoder.dim)
        logger.info("%s: encoding %d dictionary names", name, len(dictionary))
        self.matrix = self.cache.get(encoder, dictionary.names, batch_size=batch_size, show_progress=show_progress)

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        import torch  # lazy: torch

        qv = self.encoder.encode(list(queries), batch_size=self.batch_size)
        names = torch.from_numpy(self.matrix)
        out: List[Ranking] = []
        for start in range(0, len(qv), self.chunk_size):
            sims = (torch.from_numpy(qv[start : start + self.chunk_size]) @ names.T).numpy()
            for rows, vals in top_rows(sims, NAME_POOL * k):
                out.append(self.dictionary.ranking(rows.tolist(), vals.tolist(), k))
        return out

    def describe(self) -> Dict[str, object]:
        return {**super().describe(), "model": str(getattr(self.encoder, "name", "")),
                "fingerprint": self.encoder.fingerprint, "pooling": self.encoder.pooling,
                "pooling_source": str(getattr(self.encoder, "pooling_source", "explicit")),
                "max_length": self.encoder.max_length, "search": "exact"}


class _ScispacyKB:
    """The two views scispaCy's candidate generator and linker read, over our dictionary."""

    def __init__(self, dictionary: Dictionary, cui_to_entity) -> None:
        self.alias_to_cuis = {n: set(c) for n, c in zip(dictionary.names, dictionary.concepts)}
        self.cui_to_entity = cui_to_entity


class ScispacyLinker(System):
    """scispaCy's own ``EntityLinker`` over the same dictionary, built by hand (its ``from_kb`` is
    broken on Python 3.11): char-3gram tf-idf (``min_df=1``) + an nmslib HNSW index
    (``cosinesimil_sparse``). ``filter_for_definitions`` is off (MEDIC has no definitions) and
    ``threshold`` defaults to 0 so that acc@k curves are not cut; both are reported."""

    def __init__(self, dictionary: Dictionary, kb, *, k: int = 30, threshold: float = 0.0,
                 M: int = 30, ef_construction: int = 200, ef_search: int = 200, num_threads: int = 1,
                 resolve_abbreviations: bool = False, name: str = "scispaCy EntityLinker") -> None:
        import nmslib
        import spacy
        from scispacy.candidate_generation import CandidateGenerator  # lazy: scispacy
        from scispacy.linking import EntityLinker  # lazy: scispacy
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.name = name
        self.dictionary = dictionary
        self.params = {"k": k, "threshold": threshold, "M": M, "efConstruction": ef_construction,
                       "efSearch": ef_search, "threads": num_threads, "filter_for_definitions": False,
                       "resolve_abbreviations": resolve_abbreviations}
        vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), min_df=1, dtype=np.float32)
        vectors = vectorizer.fit_transform(dictionary.names)
        keep = np.asarray(vectors.sum(axis=1)).reshape(-1) != 0
        aliases = [n for n, f in zip(dictionary.names, keep) if f]
        index = nmslib.init(method="hnsw", space="cosinesimil_sparse", data_type=nmslib.DataType.SPARSE_VECTOR)
        index.addDataPointBatch(vectors[keep])
        index.createIndex({"M": M, "efConstruction": ef_construction, "post": 0, "indexThreadQty": num_threads},
                          print_progress=False)
        index.setQueryTimeParams({"efSearch": ef_search})
        self.candidate_generator = CandidateGenerator(
            ann_index=index, tfidf_vectorizer=vectorizer, ann_concept_aliases_list=aliases,
            kb=_ScispacyKB(dictionary, kb.cui_to_entity),
        )
        self.nlp = spacy.blank("en")
        self.linker = EntityLinker(
            candidate_generator=self.candidate_generator, resolve_abbreviations=resolve_abbreviations, k=k,
            threshold=threshold, filter_for_definitions=False, max_entities_per_mention=k,
        )

    def link_docs(self, docs: Sequence) -> None:
        """Set ``ent._.kb_ents`` on docs whose ``ents`` are set (end-to-end mode)."""
        for doc in docs:
            self.linker(doc)

    def rank(self, queries: Sequence[str], k: int) -> List[Ranking]:
        from spacy.tokens import Span

        out: List[Ranking] = []
        for q in queries:
            doc = self.nlp.make_doc(q)
            if len(doc) == 0:
                out.append(Ranking(concepts=[]))
                continue
            doc.ents = [Span(doc, 0, len(doc), label="ENTITY")]
            self.linker(doc)
            out.append(Ranking(concepts=[(c, float(s)) for c, s in doc.ents[0]._.kb_ents[:k]]))
        return out

    def describe(self) -> Dict[str, object]:
        return {**super().describe(), **self.params, "search": "nmslib hnsw (approximate)"}


__all__ = ["Dictionary", "System", "ExactMatch", "TfidfCharNgrams", "DenseEncoder", "ScispacyLinker",
           "VectorCache", "top_rows"]
