"""Every warning (W001–W819); read them through :class:`spacy_sapbert.errors.Warnings`."""
from __future__ import annotations


class WarningTexts:
    # ---- W001–W099: general, knowledge bases and readers ----
    W001 = "{path}: line {line}: {what}; the line was skipped."

    # ---- W100–W199: encoder, index, linker ----

    # ---- W200–W299: training ----
    W200 = ("No abbreviation pairs from the raw text {paths}: {n} short/long forms were found, none whose long form "
            "is a name of exactly one concept and whose short form is not a KB name already. Training goes on without them.")

    # ---- W300–W399: evaluation ----
    W300 = ("{n} of {total} mentions have gold ids that are not in the KB (e.g. {examples}); they are counted as "
            "wrong and reported as 'gold_not_in_kb' in metrics.json.")
    W301 = ("{n} mentions have no gold id ('-1') and are left out of the evaluation; metrics.json reports the count "
            "(with calibration = true, the no-link section scores them as 'should not be linked').")

    # ---- W400–W499: project, assets, NER ----
    # UMLS download (W400–W439)
    W400 = ("The archive has no {name} (looked for it under any folder, also split or gzipped); it is skipped. "
            "Readers that need it will fail: download the full Metathesaurus release if you need it.")
    W401 = ("The server ignored the HTTP Range request; the download restarts from byte 0 "
            "({discarded} bytes of the partial file were discarded).")
    W402 = ("The remote file changed since the partial download began ({what}); the download restarts from byte 0.")
    # Project, NER (W440–W499)
    W440 = ("{path}: {n} of {total} mentions do not fall on token boundaries and were {action} ({kept} kept); "
            "e.g. {examples}. Pass --misaligned expand/contract to keep them, or use a finer tokenizer.")
    W441 = ("{path}: {n} overlapping mentions were dropped (a token can belong to one entity only; the longest "
            "span was kept).")
    W442 = ("{path}: mention types with no NER label were skipped: {found}. Known types: {known}; pass a label "
            "map (--label TYPE=LABEL) to keep them.")

    # ---- W500–W599: hardening (interruption, files, integrity, untrusted input) ----
    # Interruption, outputs, work folders, command-line input (W500–W549)
    W500 = ("'{path}' has no {marker} file but looks like a spacy-sapbert output ({evidence}); it is replaced. "
            "Folders written from now on carry the marker.")
    W501 = ("'{path}' was missing after an interrupted replace; the previous output was restored from '{old}'.")
    W502 = ("Work folder '{path}': {file} is unreadable ({reason}); the work folder is started afresh.")
    W503 = ("Work folder chunk '{path}' is damaged ({reason}); its names are encoded again.")
    W504 = ("Work folder '{path}' holds chunks of an earlier build with other settings ({reason}) and no process "
            "uses it; it is started afresh.")

    # ---- W550–W599: hardening ----
    W550 = ("'{path}' records no checksums of its files (written by an older version): they are not checked "
            "at load. Save the {what} again to add them.")
    W551 = ("'{name}' got docs with no entity annotation: no component before it sets doc.ents, so nothing is "
            "linked. Build the pipeline on a model with an NER (`spacy-sapbert create-pipeline ... --base "
            "en_core_sci_sm`), set doc.ents yourself, or link names directly (`spacy-sapbert link INDEX_FOLDER`, "
            "index mode).")
    W552 = ("Evaluation cache file '{path}' is skipped: {why}. Its vectors are computed again (delete the file "
            "to stop this warning).")
    W553 = ("Pipeline '{path}' links against another knowledge base than the one evaluated against (checksum "
            "{theirs} != {ours}): {missing} of {total} gold concepts are not in the pipeline's KB and cannot be "
            "found. Build the pipeline on the evaluation KB (`spacy-sapbert create-pipeline`) or evaluate with its KB.")
    W554 = ("The prototype store at '{path}' records no checksums of its files (built by an older version): they "
            "are not checked at load and `spacy-sapbert verify` cannot check them (its vectors' lengths still are). "
            "Rebuild it with `spacy-sapbert build-prototypes`, or save it again "
            "(`PrototypeStore.from_disk(path).to_disk(new_path)`) to add them.")
    W555 = ("--resources '{resources}' was not checked: {why}, so no load of '{path}' reads it. Drop --resources, or "
            "verify the pipeline saved with resources = 'outside' that uses it.")

    # ---- W585: the ivf index (E582–E589); retired with the compact index (2026-11-27), never reuse it ----
    W585 = ("(Retired: no longer raised since the compact index was removed on 2026-11-27; faiss is a core "
            "dependency.) kind 'auto' picked the compact index for a KB of {n:,} names where faiss was not "
            "installed ({reason}).")

    # ---- W600–W699: context (prototypes, re-ranking, type priors) ----
    W600 = ("{n} of {total} annotated mentions have ids that are not in the knowledge base (e.g. {examples}); they "
            "were skipped. Check that the documents and the KB use the same identifiers.")
    W601 = ("{n} composite mentions (ids joined by '|' or '+') were skipped: a prototype stands for one concept.")
    W602 = ("The prototypes at '{path}' hold no example names (built without a name encoder, or before example names "
            "existed), so example_names = true has no effect. Build them again with `spacy-sapbert "
            "build-prototypes --name-model <the linker's encoder>` (docs/context.md), or set example_names = false.")

    # ---- W615–W619: training the context encoder ----
    W615 = ("{n} of {total} documents have no text and give no self-supervised context pairs (only PubTator / "
            "JSONL / DocBin documents with their text can be searched for dictionary names).")

    # ---- W700–W709: scale-out (link-corpus, Ray) ----
    W700 = ("Ray is already started in this process ({current}); it is used as it is and --address '{address}' "
            "only had its reachability checked. Call ray.shutdown() first to join another cluster.")
    W701 = ("{path}: {n} {what} not read ({names}): {why}. Give them as inputs of their own (with --format when "
            "their extension does not tell it), or move them out of the folder.")
    W702 = ("{path}: the finished shard file does not match the record written with it ({why}): it was damaged "
            "after it was written, and its shard is linked again.")

    # ---- W735–W739: name languages, translations ----
    W735 = ("{path}: {n} translated names of {ids} ids that are not concepts of the ontology were skipped (e.g. "
            "{examples}). Check that the translation file belongs to the ontology release given with it.")

    # ---- W760–W769: research workflow ----
    W760 = ("'{path}' declares sentence-transformers pooling mode(s) {modes}, which the encoder does not have "
            "(only cls or mean): the {default} default is used. Pass the pooling explicitly (--pooling mean) to "
            "choose another one.")
    W761 = ("Config '{path}' is a version {version} config: {what}. Add [meta] version = {current} to the file once "
            "you have checked the setting (see configs/{task}.cfg).")

    # ---- W780–W784: sparse + hybrid scoring ----
    W780 = ("sparse_weight = {weight} but context re-ranking is on ({what}): the context ranker re-ranks dense "
            "candidates only, the sparse part is not used for these mentions. Set sparse_weight = 0, or drop "
            "the prototypes / type priors to link with hybrid scores.")
    W781 = ("candidates = 'interleave' or query_variants is set, but context re-ranking is on ({what}): the context "
            "ranker picks its own dense candidates, these keys are not used for these mentions. Drop them, or drop "
            "the prototypes / type priors.")

    # ---- W785–W789: calibrated confidence ----
    W785 = ("The calibration '{path}' was fitted with other linker settings ({diff}); its confidences describe "
            "those settings, not these. Fit it again with `spacy-sapbert calibrate` after changing the settings.")

    # ---- W812–W813: the int8 name encoder's recipe ----
    W812 = ("The int8 recipe {recipe!r} keeps the MatMul nodes of transformer layer(s) {layers} in float32, but "
            "'{path}' has no node named like '/layer.N/' (an architecture whose export names its layers otherwise): "
            "every MatMul was quantized, as in recipe 'dynamic'. The int8 file works; check its accuracy against "
            "the float32 export (benchmarks/int8_name.py) before relying on it.")

    # ---- W814–W815: encoding big KBs ----
    W814 = ("Precision 'bf16' on this CPU ({cpu}) has no bf16 instructions (avx512_bf16 / amx_bf16): torch emulates "
            "them, several times slower than fp32 (0.19x on an AVX2 CPU: benchmarks/results/encode_speed.json). Use "
            "--precision fp32 on this machine (with --runtime onnx: the same vectors, faster).")

