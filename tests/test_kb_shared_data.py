"""Readers on the real files in ../shared/data (slow; skipped when the data is absent)."""
from __future__ import annotations

import re

import pytest

from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.kb.readers import read_medic, read_obo, read_umls

pytestmark = pytest.mark.slow


def test_medic_resolves_every_ncbi_disease_gold_id(shared_data):
    kb = KnowledgeBase.from_concepts(read_medic(shared_data / "medic" / "medic_06Jul2012.txt"))
    assert len(kb) == 11915
    gold = set()
    for path in sorted((shared_data / "ncbi_disease").glob("NCBI*_corpus.txt")):
        for line in path.read_text(encoding="utf8").splitlines():
            parts = line.split("\t")
            if len(parts) == 6:
                gold.update(i.strip() for i in re.split(r"[|+]", parts[5]) if i.strip())
    assert len(gold) > 700
    assert [i for i in sorted(gold) if kb.resolve_id(i) is None] == []
    assert kb.resolve_id("D008107") == "D008107" and kb.resolve_id("OMIM:215600") is not None


def test_obo_and_umls_sample_counts(shared_data):
    hpo = KnowledgeBase.from_concepts(read_obo(shared_data / "hpo" / "hp.obo"))
    doid = KnowledgeBase.from_concepts(read_obo(shared_data / "doid" / "doid_2016-09-01.obo"))
    assert (len(hpo), len(doid)) == (19034, 6971)  # live terms, as in shared/data/README.md
    umls = KnowledgeBase.from_concepts(read_umls(shared_data / "umls_sample"))
    assert len(umls) == 18222
    mapped = KnowledgeBase.from_concepts(read_obo(shared_data / "hpo" / "hp.obo", map_xrefs=["UMLS"], keep_unmapped=False))
    # the sample's CUIs come from these xrefs (including hp.obo's malformed "UMLS:0189573", kept as is)
    assert "0189573" in mapped and set(mapped.concept_ids) <= set(umls.concept_ids)
