#!/usr/bin/env python
"""Load an installed pipeline BY NAME and link a raw text: print every entity with its kb_ents.

``--site`` puts a ``pip install --target`` folder on the path first, so a project-local install is
found by name exactly like one in site-packages.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts folder, also when loaded by path
from with_site import add_site  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="installed package name, e.g. en_sapbert_demo")
    parser.add_argument("text", type=Path, help="a plain-text file")
    parser.add_argument("--site", type=Path, default=None, help="pip --target folder to put on sys.path")
    parser.add_argument("--output", type=Path, default=None, help="also write the result as JSON")
    args = parser.parse_args(argv)
    if args.site is not None and not add_site(args.site):
        return 1
    import spacy

    from spacy_sapbert.base.util import atomic_write

    if not spacy.util.is_package(args.name):
        print(f"No installed package '{args.name}': run the package and install steps first.", file=sys.stderr)
        return 1
    nlp = spacy.load(args.name)
    meta = nlp.meta
    print(f"Loaded '{args.name}' {meta.get('version')} by name from {Path(spacy.util.get_package_path(args.name))}")
    print(f"Pipeline: {nlp.pipe_names}")
    text = args.text.read_text(encoding="utf8").strip()
    doc = nlp(text)
    print(f"Text: {text}\n")
    rows = []
    for ent in doc.ents:
        kb_ents = [(cid, round(float(score), 4)) for cid, score in (ent._.kb_ents or [])]
        kb = nlp.get_pipe("sapbert_linker").kb
        best = kb.cui_to_entity[ent.kb_id_].canonical_name if ent.kb_id_ and ent.kb_id_ in kb.cui_to_entity else ""
        print(f"{ent.text!r:40} {ent.label_:9} kb_id_={ent.kb_id_ or '-':12} {best}")
        print(f"{'':40} kb_ents={kb_ents[:3]}")
        rows.append({"text": ent.text, "start": ent.start_char, "end": ent.end_char, "label": ent.label_,
                     "kb_id": ent.kb_id_, "canonical_name": best, "kb_ents": kb_ents})
    if args.output is not None:
        with atomic_write(args.output) as fh:
            json.dump({"package": args.name, "version": meta.get("version"), "text": text, "entities": rows},
                      fh, indent=2)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
