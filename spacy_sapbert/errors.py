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
- E780–E799 / W780–W789: unseen mentions (E780–E789 / W780–W784 sparse + hybrid, E790–E799 / W785–W789 calibration)
- E800–E819 / W800–W809: the cross-encoder re-ranker (its files, training, the linker's use of it)
- E820–E839 / W810–W819: footprint (E820–E824 / W810–W811 lean runtime and extras, E825–E829 / W812–W813 the int8
  name encoder, E830–E831 / W814–W815 encoding big KBs, E832–E834 one large-KB index and the index settings, E835–E839 /
  W816–W817 the load path)

Add new entries only at the end of your range; never renumber or reuse a code.
"""
from __future__ import annotations


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


class Warnings(metaclass=_CodedMessages):
    # ---- W001–W099: general, knowledge bases and readers ----
    W001 = "{path}: line {line}: {what}; the line was skipped."

    # ---- W100–W199: encoder, index, linker ----

    # ---- W200–W299: training ----
    W200 = ("No abbreviation pairs from the raw text {paths}: {n} short/long forms were found, none whose long form "
            "is a name of exactly one concept and whose short form is not a KB name already. Training goes on without them.")

    # ---- W300–W399: evaluation ----
    W300 = ("{n} of {total} mentions have gold ids that are not in the KB (e.g. {examples}); they are counted as "
            "wrong and reported as 'gold_not_in_kb' in metrics.json.")
    W301 = "{n} mentions have no gold id ('-1') and are left out of the evaluation; metrics.json reports the count."

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

    # ---- W814–W815: encoding big KBs ----
    W814 = ("Precision 'bf16' on this CPU ({cpu}) has no bf16 instructions (avx512_bf16 / amx_bf16): torch emulates "
            "them, several times slower than fp32 (0.19x on an AVX2 CPU: benchmarks/results/encode_speed.json). Use "
            "--precision fp32 on this machine (with --runtime onnx: the same vectors, faster).")


class Errors(metaclass=_CodedMessages):
    # ---- E001–E099: general, knowledge bases and readers ----
    E001 = "{what} not found: '{path}'. Check the path; {hint}"
    E002 = "Unknown {what} '{value}'. Choose one of: {choices}."
    E003 = "Output '{path}' already exists. Pass overwrite=True (--overwrite on the command line) to replace it."
    E004 = "'{path}' is not valid UTF-8 (line {line}). Re-encode the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`."
    E005 = "{path}: line {line}: expected {expected} '|'-separated columns, found {found}. {fix}"
    E006 = "{path}: line {line}: [Term] stanza without an 'id:' line. Add an 'id:' line to the stanza or remove it."
    E007 = "No concepts left from {what} after filters ({filters}). Loosen the filters or check the input files."
    E008 = "Unknown concept id '{concept_id}' (neither a concept id nor an alternate id of this KB). Use an id from kb.concept_ids."
    E009 = "Name {name!r} is empty after normalisation. Pass a name with at least one non-space character."
    E010 = "'{path}' is not a spacy_sapbert knowledge base ({why}). Build one with `spacy-sapbert build-kb` or KnowledgeBase.to_disk()."
    E011 = "{path}: line {line}: {what}. {fix}"
    E012 = "Option {option} has an invalid value {value!r}: {why}."
    E013 = "{path}: no column layout for {file} in MRFILES.RRF/MRCOLS.RRF ({why}). Fix or remove MRFILES.RRF/MRCOLS.RRF to use the standard layout."

    # ---- E100–E199: encoder, index, linker ----
    E100 = ("Model folder '{path}' has no tokenizer (none of: {files}). Save the tokenizer next to the "
            "weights, e.g. `AutoTokenizer.from_pretrained(base).save_pretrained('{path}')`.")
    E101 = ("Cannot load the model '{name}': {reason}. Give a local Hugging Face model folder (config.json, "
            "weights, tokenizer), or a hub id on a machine that can reach the hub.")
    E102 = ("Precision '{precision}' needs a CUDA GPU but the device is '{device}'. Use precision='auto', "
            "'fp32' or 'bf16' (CPU autocast) on CPU.")
    E103 = "max_length must be an integer >= 3 (word pieces incl. [CLS]/[SEP]), got {value!r}."
    E104 = ("'{path}' is not an encoder folder written by Encoder.to_disk ({file} is missing). Use "
            "Encoder.load(path) for a plain Hugging Face folder.")
    E105 = "batch_size must be >= 1, got {value!r}."
    E106 = ("The knowledge base is empty (0 names): there is nothing to index. Check the KB folder and the "
            "reader that built it.")
    E107 = ("Index file '{path}' is missing or corrupt ({reason}). Rebuild it with "
            "`spacy-sapbert build-index` or ConceptIndex.build(...).")
    E108 = ("The index at '{path}' was built with another encoder ({field}: index has {index_value!r}, "
            "encoder has {encoder_value!r}). Rebuild the index with this encoder, or load the encoder the "
            "index was built with.")
    E109 = ("The index at '{path}' was built for another knowledge base (checksum {index_value} != "
            "{kb_value}, {index_size} vs {kb_size} names). Rebuild the index for this KB.")
    E110 = ("Query vectors have shape {shape}, expected [n, {dim}] float32. Encode queries with the "
            "encoder the index was built with.")
    E111 = "{what} must be >= {minimum}, got {value!r}."
    E112 = ("Work folder '{path}' holds chunks of another build ({reason}). Delete it, or pass another "
            "work_dir, to start afresh.")
    E113 = ("Unknown semantic type(s) {unknown} for this knowledge base. Known types include: {known}. "
            "Fix `semantic_types` in the linker config.")
    E114 = ("The component '{name}' has no knowledge base / index yet. Call nlp.initialize() with "
            "[initialize.components.{name}] kb_path set, or load a saved pipeline.")
    E115 = ("'{name}' needs kb_path in [initialize.components.{name}] (a KB folder written by "
            "KnowledgeBase.to_disk / `spacy-sapbert build-kb`).")
    E116 = "threshold must be a number between -1 and 1, got {value!r}."
    E117 = ("'{path}' is neither a spaCy pipeline folder (config.cfg + meta.json) nor an index folder "
            "written by build-index (index_meta.json). Give one of those.")
    E118 = ("The index at '{path}' does not record {what}; pass {option} explicitly.")
    E119 = ("runtime='onnx' needs ONNX Runtime, which is not installed ({reason}). Install it "
            "(spacy-sapbert requires it): `pip install onnxruntime`; or use runtime='torch' (or 'auto', which falls "
            "back to PyTorch).")
    E120 = ("Exporting the encoder to ONNX needs the packages torch and onnx ({reason}). Install them "
            "(the [train] extra): `pip install \"spacy-sapbert[train]\"`; or save with runtime='torch' (no ONNX copy "
            "is written).")
    E121 = ("'{path}' holds an ONNX export of other weights (export fingerprint {onnx_fp}, encoder folder "
            "{settings_fp}). Export it again with `spacy-sapbert export-onnx {folder}`, or delete '{path}' to "
            "run the encoder with PyTorch.")
    E122 = ("runtime='onnx' runs the encoder on the CPU in float32, but device={device!r} and precision={precision!r} "
            "were asked for. Use device='cpu' (or 'auto') and precision='auto' or 'fp32' with ONNX Runtime, or "
            "runtime='torch' for a GPU or bf16.")
    E123 = ("'{path}' has no ONNX export of the encoder ({file} is missing). Write one with "
            "`spacy-sapbert export-onnx {folder}`, or use runtime='torch'.")
    E124 = "Unknown choice {value!r}; choose one of: {choices}."
    E125 = ("Name vectors have shape {shape}, expected [{n}, {dim}]: one row per KB name (kb.names order) "
            "of the encoder's dimension. Encode kb.names with the encoder you pass.")
    E126 = ("'{path}' has no int8 copy of its ONNX export ({file} is missing or not recorded in onnx_export.json). "
            "Build the prototypes again with `spacy-sapbert build-prototypes --quantize` (a context encoder), or "
            "write it with spacy_sapbert.encoding.onnx_encoder.quantize_export(folder).")
    E127 = ("The pipeline at '{path}' keeps its KB and index outside the package (resources '{name}'), and "
            "they were not found: {reason}. Put the resources folder (with kb/ and index/) at a path and set "
            "the environment variable SPACY_SAPBERT_RESOURCES to it (or to its parent folder), or pass "
            "config={{\"components\": {{\"{component}\": {{\"resources_path\": \"/path\"}}}}}} to spacy.load. "
            "Write the folder with `spacy-sapbert create-pipeline ... --resources-dir DIR`.")
    E128 = ("The resources at '{path}' are not the ones the pipeline was saved with ({field}: {found} != "
            "{expected}). Point SPACY_SAPBERT_RESOURCES / resources_path at the matching folder.")
    E129 = ("'{name}' cannot name a resources folder: use letters, digits, '.', '_' and '-' (at most 128), "
            "starting with a letter or digit.")
    E130 = ("resources='outside' needs a resources folder for the KB and index of '{component}'. Call "
            "linker.export_resources(DIR) (or `spacy-sapbert create-pipeline ... --resources-dir DIR`), or set resources_path to a folder written that way.")

    # ---- E200–E299: training ----
    E200 = "No training pairs: none of the {n} concepts of the knowledge base has two or more distinct names. Self-alignment needs synonyms; build the KB from a source with aliases (UMLS, MEDIC, OBO synonyms)."
    E201 = "No task-data pairs: no mention's gold id was found in the knowledge base ({unknown} unknown ids). Check that the mentions and the KB use the same identifiers (e.g. MeSH 'D001234' vs 'MESH:D001234')."
    E202 = "Pair set '{path}' is damaged ({what}). Delete the folder and write the pairs again."
    E203 = "Pair set '{path}' was written from another knowledge base (checksum {theirs}, this KB {ours}). Write the pairs again from this KB."
    E204 = ("Mixed precision '{amp}' is not available on '{device}': fp16 needs a CUDA device, bf16 runs on CUDA "
            "or as CPU autocast. Use --amp bf16 or --amp none on CPU, or train on a GPU.")
    E205 = "'{path}' is not a BERT-like encoder we can train ({what}). Pass a Hugging Face encoder folder or hub id (config.json with a BERT/RoBERTa-style model, a tokenizer, weights)."
    E206 = "Out of memory on the first batch ({batch_size} pairs = {names} names, max_length {max_length}) on {device}. Use a smaller batch, e.g. --training.batch_size {suggest}{amp_hint}."
    E207 = "Checkpoint '{path}' cannot be read ({what}). It is damaged or incomplete: delete the checkpoint folder to restart from the previous one (or from scratch), or start a new output folder."
    E208 = "Output folder '{path}' holds a different training run (its {field} is {theirs!r}, this run's is {ours!r}). Choose another --output folder, or delete that one."
    E209 = "Output folder '{path}' already holds this run. Pass --resume to continue it, or choose another --output folder."
    E210 = "Nothing to resume in '{path}': no checkpoint found. Start the run without --resume."
    E211 = "Batch size {batch_size} cannot be split evenly over {world_size} processes. Choose a multiple of {world_size}."
    E212 = "Config '{path}': {what}. Fix the file or the override (spaCy style: --section.key value)."
    E213 = "Distributed training was asked for, but {what}. Launch with `torchrun --nproc_per_node N -m spacy_sapbert ...` (it sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."
    E215 = ("training.adapter needs the optional package peft ({what}). Install it with "
            "`pip install \"spacy-sapbert[adapters]\"`, or train without adapters (training.adapter = \"none\").")
    E216 = ("Cannot add adapters to '{model}': {what}. Adapters are placed on BERT-style layers "
            "(layer.N.attention.self.query ...); train this model without adapters.")
    E217 = ("Hard negatives: {what}. They need a pair set written by write_kb_pairs or write_task_pairs for "
            "this KB, training.hard_negatives >= 0 and training.hard_negative_top_k >= 1.")
    E214 = "The loss became {value} at step {step}. Lower the learning rate, use --amp bf16 instead of fp16, or check the pairs."
    E218 = ("Pre-tokenised names '{path}' were made with another tokenizer or max_length ({what}). Write them again "
            "for this model: write_pair_tokens(pairs, kb, tokenizer, max_length, overwrite=True), or delete the folder.")
    E219 = ("Pre-tokenised names '{path}' do not belong to this pair set or KB ({what}). Write them again from the "
            "pairs and KB you train on: write_pair_tokens(..., overwrite=True), or delete the folder.")
    E220 = "Pre-tokenised names '{path}' are damaged ({what}). Delete the folder and write them again with write_pair_tokens."
    E221 = ("Config '{path}': pairs.mention_like.{what}. See the [pairs.mention_like] section of configs/pretrain.cfg "
            "and docs/training.md (mention-like pairs).")
    E222 = ("Raw text file '{path}' of pairs.mention_like.raw_text cannot be read ({what}). Give PubTator files "
            "(pmid|t|title and pmid|a|abstract lines) of training text only, never the text of a set you evaluate on.")

    # ---- E300–E399: evaluation ----
    E300 = ("{path}: line {line}: mention '{mention}' does not match the text at {start}-{end} (found '{found}'). "
            "Fix the offsets, or check that title and abstract are joined by one space as PubTator expects.")
    E301 = "{path}: line {line}: {what}. Fix the line or pass the right dataset format."
    E302 = ("The evaluation set is empty after {what} ({before} mentions before). Check the dataset path, the "
            "type filter and the KB, or drop the filter.")
    E303 = "Evaluation config '{path}': {what}. See configs/evaluate.cfg for a complete example."
    E304 = "Invalid k values {value}: give positive integers, e.g. 1,5,10."
    E305 = ("System '{system}' needs {what}. {hint}")
    E306 = ("None of the {n} mentions has a gold id in the KB (first ids: {examples}). Use the KB the dataset "
            "was annotated with, or check the id prefixes (e.g. 'OMIM:' / 'MESH:').")

    # ---- E400–E499: project, assets, NER ----
    # UMLS download (E400–E439)
    E400 = ("Invalid UMLS release '{release}'. Use the form YYYYAA or YYYYAB, e.g. 2024AB (see "
            "https://www.nlm.nih.gov/research/umls/licensedcontent/umlsknowledgesources.html).")
    E401 = ("No UMLS API key: the environment variable {env} is not set and there is no terminal to ask for it. "
            "Copy your key from https://uts.nlm.nih.gov/uts/edit-profile and run `export {env}=<your key>` "
            "(or run the command in a terminal to be prompted).")
    E402 = ("UTS rejected the UMLS API key (HTTP {status}{detail}). Check the key in {env} against "
            "https://uts.nlm.nih.gov/uts/edit-profile (copy it again; it is not your password) and rerun.")
    E403 = ("UTS refused the download: your UMLS licence is not active or has expired (HTTP {status}{detail}). "
            "Renew or request the licence at https://uts.nlm.nih.gov/uts/ (sign in, 'My Profile'), then rerun.")
    E404 = ("UTS answered with a page instead of the archive (HTTP {status}, content type '{content_type}'{detail}). "
            "Check --release / --url, and that the key and licence work by downloading the file once in a browser; "
            "then rerun.")
    E405 = ("Download of {name} failed: HTTP {status} from {host}{detail}. {hint}")
    E406 = ("Network failure while downloading {name} ({reason}) after {done} of {total} bytes. The partial file "
            "'{part}' is kept: rerun the same command to resume where it stopped.")
    E407 = ("Size mismatch for {name}: the server announced {expected} bytes but {got} arrived. The partial file "
            "was removed; rerun the command to download it again.")
    E408 = ("{algo} checksum mismatch for {name}: expected {expected}, got {got}. The archive was removed; rerun "
            "to download it again, and check the checksum you passed against the UMLS download page.")
    E409 = ("The archive '{path}' is truncated or corrupt ({reason}). It was removed (a complete-sized file cannot "
            "be repaired by resuming); rerun the command to download it again.")
    E410 = ("The archive '{path}' has no {names} (it has {n} members, e.g. {examples}). Download the Metathesaurus "
            "release (umls-<release>-metathesaurus-full.zip), not a subset or the MetamorphoSys bundle.")
    E411 = ("Not enough free disk space in '{path}': {what} needs {need} MB, {free} MB are free. Free some space "
            "or choose another --output, then rerun (a partial download resumes).")
    E412 = ("Invalid {algo} checksum '{value}': expected {n} hexadecimal characters.")
    E413 = ("Refusing to send the UMLS API key over plain HTTP to '{host}'. Use an https:// URL "
            "(plain http is only allowed for loopback test servers).")
    E414 = ("Invalid URL '{url}' for {what}: use an http(s):// URL with a host.")
    E415 = ("Output '{path}' exists and is not a folder. Choose another --output.")
    E416 = ("Invalid file name '{name}' to extract: give base names such as MRCONSO.RRF (letters, digits, '.', "
            "'_', '-').")
    E417 = ("{what} carries an API key in its query string; it would end up in logs and files. Pass the plain "
            "file URL (e.g. https://download.nlm.nih.gov/umls/kss/2024AB/umls-2024AB-metathesaurus-full.zip) and "
            "keep the key in the environment variable ({env}).")
    # Project, NER (E440–E499)
    E440 = "The NER label map is empty: give at least one TYPE=LABEL pair (e.g. Disease=Disease)."
    E441 = "No input files: give one or more PubTator files to convert."
    E442 = ("No entity left after converting {inputs}: none of their mention types is in the label map "
            "({known}). Check the files and the --label options.")
    E443 = "Invalid label mapping '{value}': use TYPE=LABEL, e.g. SpecificDisease=Disease."
    E444 = ("spaCy training failed: {reason}. Check the config '{config}' with "
            "`python -m spacy debug config {config}` and the corpus paths.")
    E445 = ("spaCy training wrote no '{path}'. Check the training log above; with very few steps the "
            "best model may not have been saved.")
    E446 = ("Data file '{file}' is not available: no shared copy at {shared}, and the download from {url} "
            "failed ({reason}). Pass --vars.shared_data /path/to/data (the folder with the shared copies), put "
            "the file at '{file}' yourself, or rerun with network access.")
    E447 = "'{path}' has MD5 {got}, but project.yml pins {expected}: {hint}"

    # ---- E500–E599: hardening (interruption, files, integrity, untrusted input) ----
    # Interruption, outputs, work folders, command-line input (E500–E549)
    E500 = "Interrupted by {signal}; {kept}."
    E501 = ("Refusing to replace '{path}': it is not empty and was not written by spacy-sapbert (no {marker} file). "
            "Choose another output, or move the folder away yourself.")
    E502 = ("Refusing to replace '{path}': it is {what}. Choose another output, or move it away "
            "yourself.")
    E503 = ("Output '{path}' would replace {what} '{input}' that this command reads. Choose an output folder that "
            "does not hold the command's inputs.")
    E504 = ("Another spacy-sapbert process is writing '{path}' (it holds the lock '{lock}'). Wait for it to finish, "
            "or choose another output.")
    E505 = ("Cannot write '{path}': '{parent}' is a file, not a folder. Choose an output path whose parents are "
            "folders, or move the file away.")
    E506 = ("{path}: line {line}: not valid UTF-8 ({reason}). Re-encode the input as UTF-8, e.g. "
            "`iconv -f latin1 -t utf-8 FILE > FILE.utf8`.")
    E507 = "Option {option} must be {what}, got {value!r}."
    E508 = ("Option(s) {options} apply to an index folder only: '{path}' is a spaCy pipeline folder, whose linker "
            "brings its own encoder and KB. Drop the option(s), or link an index folder.")
    E509 = ("Another spacy-sapbert process is using the work folder '{path}' (it holds the lock '{lock}'). Wait for "
            "it to finish, or pass another --work-dir.")
    E510 = ("Cannot write '{path}' ({reason}). Check the path and its folder's permissions, or choose another "
            "output.")
    E511 = ("{what} '{path}' is a folder, not a file (it holds: {files}). Give the file itself; {hint}")
    E512 = ("Model '{name}' is not a local folder, and {reason}. Pass the path of a local Hugging Face model folder "
            "(config.json, weights, tokenizer), or {fix}.")

    # ---- E550–E599: hardening: untrusted bytes, integrity, damaged files ----
    E550 = ("Refusing the sapbert_linker bytes: {what}. Only bytes written by SapbertLinker.to_bytes / "
            "nlp.to_bytes are accepted; get the pipeline again from a source you trust.")
    E551 = ("'{path}' of the {what} folder is damaged: {why}. Rebuild or re-download the {what}; "
            "`spacy-sapbert verify {folder}` checks every file in full.")
    E552 = ("'{path}' is damaged or not what {what} expects ({why}). {fix}")
    E553 = ("{what} produced non-finite vectors (NaN or infinity) for {n} of {total} inputs: the weights or "
            "model.onnx in '{path}' are damaged. Run `spacy-sapbert verify {path}`, then re-download or re-save "
            "the encoder.")
    E554 = ("Knowledge base strings are damaged: bytes {start}-{end} of {what} are not UTF-8. Run "
            "`spacy-sapbert verify KB_FOLDER` to find the file, then rebuild the KB (`spacy-sapbert build-kb`).")
    E555 = ("'{path}' is not a folder verify knows: none of kb.json (knowledge base), sapbert_encoder.json "
            "(encoder), index_meta.json (index), prototypes_meta.json (prototype store) or config.cfg (spaCy "
            "pipeline) is in it. Give one of those folders.")
    E556 = ("A score of {score!r} came out of {what} at '{path}': scores of unit vectors lie in [-1, 1], so its "
            "stored vectors are damaged; nothing was linked. Run `spacy-sapbert verify {path}`, then rebuild it "
            "({fix}) or copy the folder again.")
    E557 = ("'{path}': field '{field}' is {value!r}, expected {expected}. The index metadata was edited or is "
            "damaged: restore index_meta.json from the original folder, or rebuild the index "
            "(`spacy-sapbert build-index`).")
    E558 = ("The prototype store at '{path}' is damaged: {why}. Rebuild it with `spacy-sapbert build-prototypes` "
            "or copy the folder again; `spacy-sapbert verify {path}` checks every file.")
    E559 = "{what} must be a whole number between {minimum} and {maximum:,}, got {value!r}."
    E560 = ("Document {doc_id!r} has {n:,} characters, more than the pipeline accepts (nlp.max_length = "
            "{maximum:,}; spaCy's E088: a parser or NER needs about 1 GB of memory per 100,000 characters). Split "
            "it into smaller documents (paragraphs, pages) before linking, or raise nlp.max_length in your own "
            "code if the pipeline has no parser and you have the memory.")
    E561 = ("Out of memory ({detail}): the command was stopped (the files it writes appear only when complete). "
            "Free memory or raise the "
            "limit (`ulimit -v`), or make the command need less: a smaller --batch-size, fewer or shorter "
            "documents at once, or an index that memory-maps its vectors (build-index --kind ivf).")
    E562 = ("Query vector {i} has norm {norm:.6g}: the index scores inner products of L2-normalised vectors. "
            "Normalise the queries (x / ||x||), or encode them with the encoder the index was built with.")

    # ---- E580–E581 / W580–W584: compact index speed; retired with the compact index (2026-11-27), never reuse ----
    E580 = ("(Retired: no longer raised since the compact index was removed on 2026-11-27; see SB-E832.) The "
            "compact index's candidate projection '{path}' is missing or damaged ({why}).")
    E581 = ("(Retired: no longer raised since the compact index was removed on 2026-11-27.) candidate_dims must be "
            "0 (the full {dim} dimensions) or between {minimum} and {dim}, got {value!r}.")

    # ---- E582–E589: the ivf index (faiss inverted lists of fast-scan product codes) ----
    E582 = ("The ivf index needs faiss, a dependency of spacy-sapbert, which is not installed or broken ({reason}). "
            "Install it again: `pip install faiss-cpu` (requirements.txt pins the version), or use --kind exact "
            "or hnsw.")
    E583 = ("The ivf index needs at least {minimum} names (its cells and product codes are trained on them), the KB "
            "has {n}. Use --kind exact or hnsw for a KB this small.")
    E584 = ("{what} must be between {minimum} and {maximum} for the ivf index, got {value!r}.")
    E585 = ("{name} must be a whole number of MiB, 0 or more, got {value!r}. It caps the name-vector file pages a "
            "process keeps mapped while re-scoring (ivf indexes; default 2048, 0: no cap); unset it for "
            "the default.")

    # ---- E600–E699: context (prototypes, re-ranking, type priors) ----
    E600 = ("The context encoder needs a PyTorch encoder or a quantized ONNX Runtime one, got {what}. Load the "
            "model with ContextEncoder.load (PyTorch), or make the int8 one with ContextEncoder.quantize / "
            "`spacy-sapbert build-prototypes --quantize`.")
    E601 = ("context max_length must be an integer >= {minimum} (room for [CLS], [SEP], the two markers and one "
            "word piece), got {value!r}.")
    E602 = ("Mention offsets {start}-{end} do not lie inside the text (length {length}){where}. Give character "
            "offsets with 0 <= start < end <= len(text).")
    E603 = ("No annotated mention with a concept id in {what}: prototypes need documents whose mentions carry ids "
            "(PubTator ids column, DocBin ents with kb_id_, JSONL 'ids'). Check the files and --type.")
    E604 = ("None of the {n} annotated mentions has an id in the knowledge base (e.g. {examples}). Use the KB the "
            "documents were annotated with, or check the id prefixes (e.g. 'MESH:' / 'OMIM:').")
    E605 = ("The prototypes at '{path}' were built with another context encoder ({field}: prototypes have "
            "{store_value!r}, encoder has {encoder_value!r}). Build them again with this encoder "
            "(`spacy-sapbert build-prototypes`), or use the encoder saved with them.")
    E606 = ("The prototypes at '{path}' were built for another knowledge base (checksum {store_value} != "
            "{kb_value}). Build them again for this KB with `spacy-sapbert build-prototypes --kb ...`.")
    E607 = ("'{path}' is not a prototype store ({why}). Build one with `spacy-sapbert build-prototypes`.")
    E608 = ("Context weights must be numbers >= 0 with context_weight + definition_weight <= 1, got "
            "context_weight={context!r}, definition_weight={definition!r}.")
    E609 = ("context_fallback must be 'name' (a concept without prototypes counts its name score) or a number in "
            "[-1, 1], got {value!r}.")
    E610 = ("type_priors must map NER labels to lists of semantic types or id prefixes ending in '*' (e.g. "
            "{{\"Chemical\": [\"T109\", \"MESH:D*\"]}}); {what}.")
    E611 = ("type_priors for label '{label}' name semantic types this knowledge base does not have: {unknown}. "
            "Known types include: {known}. Fix the linker's type_priors, or use id prefixes ('D*').")
    E612 = ("Unknown document format '{value}' for {path}. Choose one of: {choices} (auto picks by extension: "
            ".spacy → docbin, .jsonl → jsonl, else pubtator).")
    E613 = ("{path}: not a spaCy DocBin ({reason}). Write one with DocBin(docs=...).to_disk(path), or pass a "
            "PubTator / JSONL file.")
    E614 = ("Cannot tune the context weights: {what}. Give a dev set whose mentions have ids in the KB and "
            "prototypes built for the same KB.")

    # ---- E615–E634: training the context encoder ----
    E615 = ("No unambiguous dictionary name of the knowledge base occurs in {what} ({docs} documents with text, "
            "names of >= {min_chars} characters): self-supervised context pairs need raw text that mentions KB "
            "names. Give documents with text (PubTator titles/abstracts), lower --min-chars, or use --source "
            "supervised.")
    E616 = ("Context training option {option} = {value!r} is not valid: {why}.")
    E617 = ("Context training cannot use {setting} = {value!r}: {why}. Remove the override (context pairs are "
            "contexts on one side and names on the other; the trainer's name-only paths do not apply).")
    E619 = ("context_margin must be null (re-rank every mention) or a number >= 0 (re-rank only mentions whose "
            "best name scores lie within it), got {value!r}.")
    E618 = ("'{path}' is not a context pair set ({why}). Write one with spacy_sapbert.context.train_pairs."
            "write_context_pairs, or let `spacy-sapbert train-context` make it.")

    # ---- E635: example names of prototypes ----
    E635 = ("The example names of the prototypes at '{path}' were made with another name encoder ({field}: "
            "prototypes have {store_value!r}, the linker's encoder has {encoder_value!r}). Build the prototypes "
            "again with `spacy-sapbert build-prototypes --name-model` set to the linker's encoder (and its "
            "--name-pooling / --name-max-length), or set example_names = false in the linker's config.")

    # ---- E636–E639: the quantized (int8) context encoder ----
    E636 = ("The context encoder folder '{path}' has a tokenizer without the <ENT>/</ENT> markers: it was not "
            "written by ContextEncoder.to_disk. Build the prototypes again with `spacy-sapbert build-prototypes`.")

    # ---- E650–E659: documentation, benchmark results files ----
    E650 = ("Benchmark results file '{path}' cannot be rendered: {what}. Rewrite it with "
            "benchmarks/results_io.write_results (rerun the benchmark that wrote it), or delete it.")
    E651 = ("'{path}' has no '{marker}' line: the generated benchmark tables go between the two marker lines "
            "'{begin}' and '{end}'. Put both lines back (on their own) and rerun scripts/render_benchmarks.py.")

    # ---- E700–E719: scale-out (link-corpus, Ray back-ends, build-index --ray) ----
    E700 = ("{what} needs Ray Data, which is not installed or broken ({reason}). Install the extra: "
            "`pip install \"spacy-sapbert[ray]\"` (ray[data]==2.60.0, pyarrow==25.0.1, pandas==2.3.3), or use "
            "the local back-end (--backend local).")
    E701 = ("Cannot reach the Ray cluster at '{address}': {reason}. Check that the cluster runs (`ray status` on its "
            "head node), that the address is HOST:PORT of the head (or ray://HOST:10001 for Ray Client, or 'auto' "
            "on a cluster node), or leave --address out to start a local Ray.")
    E702 = ("{path}: {where}: no field '{field}' ({option}); the document has: {found}. Pass {option} with the "
            "name of the field that holds the {what}.")
    E703 = ("{path}: {where}: field '{field}' is {found}, expected a string ({what}). Fix the input, or pass "
            "{option} with the field that holds the {what} as text.")
    E704 = ("The pipeline '{path}' has no sapbert_linker component (its components: {names}). link-corpus needs "
            "NER + sapbert_linker: build one with `spacy-sapbert create-pipeline OUT --kb KB --base NER_PIPELINE`.")
    E705 = ("Output folder '{path}' holds the output of another run (different {fields}). Resume it with the same "
            "pipeline, KB and inputs; pass --overwrite to replace it; or choose another --output folder.")
    E706 = ("No input documents found: {inputs} hold no {what}. Give files or folders of the chosen --format "
            "({choices}).")
    E707 = ("Input shard '{path}' is given twice (as '{first}' and '{second}'). Give each file or folder once.")
    E708 = ("Writing Parquet needs pyarrow, which is not installed ({reason}). Install the extra "
            "`pip install \"spacy-sapbert[ray]\"` (it pins pyarrow==25.0.1), or pass --output-format jsonl.")
    E709 = ("The Ray job failed while {what}: {reason}. Shards (or chunks) finished so far are kept; fix the cause "
            "and rerun the same command to resume.")
    E710 = ("Output '{path}' lies inside {what} '{input}' that this command reads. Choose an output folder outside "
            "the inputs and the pipeline.")
    E711 = ("'{path}' holds .txt files ({txt}) beside {others} files. A .txt file there may be a PubTator file or a "
            "plain-text document, so link-corpus does not guess. Give the .txt files (or the other files) as inputs "
            "of their own with --format pubtator or --format txt, or move them into separate folders.")
    E712 = ("Document id '{doc_id}' appears twice: {first} and {second}. The rows of the two could not be told "
            "apart (ids are compared as text, so 1 and \"1\" are the same id). Make the ids unique, or pass "
            "--id-field with a field that is unique.")
    E713 = ("{path}: {where}: the {what} (field '{field}') is not valid Unicode text: it holds a lone surrogate "
            "{char} (a JSON escape such as \\ud800 without its pair). Fix or remove that document.")
    E714 = ("Cannot write '{path}' ({reason}): {fix}. The shards finished before are kept; rerun the same command "
            "to resume.")
    E715 = ("Cannot read the input '{path}' ({reason}). Check that the file is there and readable, then rerun.")
    E716 = ("The inputs changed while they were linked: {expected} documents were read in the check before the run, "
            "{found} were linked. The rows written may not match the inputs: keep the inputs as they are while "
            "link-corpus runs, then rerun with --overwrite.")

    # ---- E720–E734: multilingual encoders and evaluation readers (brat, XL-BEL, CodiEsp) ----
    E720 = ("{path}: line {line}: {what}. A brat annotation file holds entity lines 'T1<TAB>TYPE START END<TAB>text' "
            "(discontinuous: 'START END;START END') and note lines '#1<TAB>AnnotatorNotes T1<TAB>ID'; fix the line.")
    E721 = ("{path}: line {line}: the text at {start}-{end} is '{found}', not the annotated '{mention}'. Check that "
            "{text} is the text the annotations were made on (same encoding and line endings) and fix the offsets.")
    E722 = ("{path}: the header lacks the column(s) {missing} that a {fmt} file needs (found: {found}). Name them "
            "in the header (any order; {aliases}) or remove the header to read the columns by position.")
    E723 = ("{path}: line {line}: {what}. {fix}")
    E724 = ("{path}: the text file '{text}' the annotations refer to is missing. A brat folder keeps each "
            "NAME.ann beside its NAME.txt; copy the .txt files next to the .ann files.")
    E725 = ("Unknown language code {value!r}. Give an ISO 639 code such as 'es', 'fr', 'de', 'nl', 'en' (or the "
            "three-letter 'spa', 'fre'), optionally with a region ('pt-br').")
    E726 = ("{path}: no {what} found. Give a .ann file or a folder holding .ann files (searched recursively), "
            "each with its .txt beside it.")

    # ---- E735–E759: name languages, translation files, language restriction, cross-lingual pairs ----
    E735 = ("Unknown language code '{value}'. Use an ISO 639-1 code ({iso}), a UMLS LAT code ({lat}) or 'und' "
            "(unknown).")
    E736 = ("'{path}': the KB's language table {found} is not one this version knows (expected a start of {known}). "
            "Rebuild the KB with this version (`spacy-sapbert build-kb`).")
    E737 = ("{path}: the translation file has no column '{missing}' (columns found: {found}). A Babelon TSV needs "
            "the columns {needed} (in any order), named in its first line.")
    E738 = ("{path}: line {line}: {what}. {fix}")
    E739 = ("No name of the KB is in the languages {languages}; the KB's names are in: {available}. Pick languages "
            "from that list (or null for all), or build the KB with languages (`build-kb --language`, "
            "`--obo-language`, translation files).")
    E740 = ("{path}: line {line}: UMLS language '{value}' has no ISO 639-1 code here (known LAT codes: {lat}). "
            "Restrict --language to known languages, or report the code so it can be added.")
    E741 = ("{path}: the translation file names no language (no '{column}' column and no '@xx' language tag in its "
            "second header row). Pass the language (language='fr' in Python, --translation-language on the "
            "command line).")
    E742 = ("Unknown translation status '{value}'. Choose from: OFFICIAL, CANDIDATE (translation_status column of "
            "Babelon files).")
    E743 = ("No cross-lingual pairs: no concept of the KB has names in two of the languages {languages} (languages "
            "in the KB: {available}). Add translations to the KB (`build-kb ... -f babelon`) or set "
            "pairs.cross_lingual = false.")

    # ---- E760–E779: research workflow ----
    E760 = ("Config '{path}': {what} must be a number of steps (e.g. 200) or of epochs (e.g. \"1 epoch\", "
            "\"0.5 epochs\"), not {value!r}. Fix the file or the override (--training.eval_every \"1 epoch\").")
    E761 = ("Config '{path}' is version {version}, newer than the config versions this package reads (up to "
            "{current}). Upgrade the spacy_sapbert package, or write the config for version {current} (see "
            "configs/{task}.cfg).")
    E762 = ("Config '{path}': {what}. Fix the file or the override (spaCy style: --section.key value).")

    # ---- E770–E779: multiprocess linking ----
    E770 = ("link-corpus worker process '{name}' ended without finishing its shards (exit status {code}; "
            "a negative status is the signal that killed it, e.g. -9 when the system ran out of memory). The "
            "shards finished so far are kept: rerun the same command to resume, with fewer --n-process if memory "
            "is short.")
    E771 = ("A link-corpus worker process failed: {error}. The shards finished so far are kept; fix the cause "
            "and rerun the same command to resume.")
    E772 = ("link-corpus --n-process above 1 needs the 'fork' start method, which this platform does not have "
            "(it has: {methods}). Use --n-process 1, or --backend ray.")

    # ---- E780–E789: sparse (char n-gram tf-idf) + hybrid scoring ----
    E780 = ("Sparse index setting {what} = {value!r} is not allowed ({allowed}). Fix the option (build-index "
            "--sparse-ngrams 2,3 / SparseIndex.build(ngram_range=(2, 3), analyzer='char_wb')).")
    E781 = ("'{path}': the sparse index there was built for another {what}: built for {built}, used with {given}. "
            "Rebuild it for this KB and index (`spacy-sapbert build-index ... --sparse`, or SparseIndex.from_kb(kb)"
            ".to_disk(index_folder)).")
    E782 = ("'{path}': the sparse index is damaged: {why}. Rebuild it (`spacy-sapbert build-index ... --sparse`) "
            "or restore the index folder from a good copy.")
    E783 = ("'{path}' holds no sparse index (sparse_meta.json), but the linker's sparse_weight is above 0. Build "
            "one with `spacy-sapbert build-index KB -m MODEL -o {path} --sparse` (or let initialize() build it: "
            "the linker's sparse_weight > 0 and no index_path, or an index_path that has none), or set "
            "sparse_weight = 0.")
    E784 = ("The linker's {what} = {value!r} is not allowed: {allowed}. Fix the config ([components.{name}] "
            "{what}); tune the weight with `spacy-sapbert tune-hybrid`.")
    E785 = ("tune-hybrid: {what}. {fix}")
    E786 = ("The candidate stage's {what} = {value!r} is not allowed: {allowed}. Fix the config (or the "
            "argument); see docs/linker.md, 'Candidate stage'.")
    E787 = ("Query variants: {n} variant text(s) but {rows} variant vector row(s). Give one vector per variant "
            "text, in the same order (flattened over the queries).")
    E788 = ("'{path}' holds no sparse index (sparse_meta.json), but the linker's {what} needs one (its candidate "
            "stage reads the sparse lists). Build it with `spacy-sapbert build-index KB -m MODEL -o {path} --sparse` "
            "(or let initialize() build it), or set candidates = \"score\" and query_variants = [].")

    # ---- E790–E799: calibrated confidence (knowing when not to link) ----
    E790 = ("The calibration '{path}' was fitted for {what} {fitted}, but this linker has {what} {found}. A "
            "calibration belongs to one KB and one encoder: fit it again with `spacy-sapbert calibrate DEV "
            "--pipeline <this pipeline>`.")
    E791 = ("'{path}' is not a readable calibration file ({why}). Fit it again with `spacy-sapbert calibrate`; "
            "never edit the file by hand (its sha256 is checked).")
    E792 = ("The calibration '{path}' needs the feature(s) {missing}, which this linker does not compute (it "
            "computes: {known}). Use a spacy_sapbert version with those features, or fit the calibration again.")
    E793 = ("{what} must be {expected}, got {value!r}. Fix the sapbert_linker config "
            "([components.sapbert_linker] {what}).")
    E794 = ("The component '{name}' has threshold_on = 'confidence' but no calibration. Fit one with `spacy-sapbert "
            "calibrate DEV --pipeline <pipeline>`, pass calibration_path to initialize, or set threshold_on = 'score'.")
    E795 = ("Cannot fit a calibration: {why}. Give a dev set with more gold mentions whose concepts are in the KB "
            "(both right and wrong top concepts are needed).")
    E796 = ("{what} must be {expected}, got {value!r}.")
    E797 = ("The pipeline '{path}' has no sapbert_linker component with its KB and index (its components: {names}). "
            "calibrate needs one: build it with `spacy-sapbert create-pipeline OUT --kb KB`.")

    # ---- E800–E819: the cross-encoder re-ranker ----
    E801 = ("'{path}' is not a re-ranker folder: it has no {file}. Give the model/ folder that "
            "`spacy-sapbert train-reranker` wrote (OUTPUT/model).")
    E802 = ("Re-ranker file '{path}' is damaged: {why}. Train the re-ranker again (`spacy-sapbert train-reranker`) "
            "or copy its folder again; `spacy-sapbert verify` checks every file.")
    E803 = ("Cannot start a re-ranker from '{path}': {why}. Give a local Hugging Face model folder of a BERT-like "
            "model (the name encoder's folder works) with --base.")
    E804 = ("Re-ranker folder '{path}' has no int8 graph ({file} is not recorded), which runtime 'onnx' runs. "
            "Use runtime 'torch', or train it again without --no-onnx.")
    E805 = ("Unknown re-ranker runtime '{value}'. Choose from: auto, onnx, torch.")
    E806 = ("Run folder '{path}' was made with another {field} ({theirs!r}, now {ours!r}): --resume continues a run "
            "only with the settings it started with. Use those settings, or another --output folder.")
    E807 = ("Run folder '{path}' already holds a re-ranker run. Pass --resume to continue it, or choose another "
            "--output folder.")
    E808 = ("Re-ranker setting {name} = {value!r} cannot be used: it must be {allowed}.")
    E809 = ("No training group for the re-ranker: {what}. Give annotated documents whose ids the KB knows "
            "(or --pseudo-mentions N to use KB synonyms), and a KB with more than one concept.")
    E810 = ("Linker setting {name} = {value!r} cannot be used: it must be {allowed}.")
    E811 = ("The re-ranker '{path}' was trained for another {what} ({theirs}) than the linker's ({ours}). Train a "
            "re-ranker for this KB and name encoder (`spacy-sapbert train-reranker`), or link with the ones it was "
            "made for.")
    E812 = ("Linker '{name}' has a re-ranker and context re-ranking (prototypes or type_priors) at once, which this "
            "version does not combine. Use one: leave out reranker_path, or the prototypes and type_priors.")
    E813 = ("Linker setting reranker_dense_weight = {value!r} cannot be used: it must be a finite number from 0 to "
            "{maximum} (the weight of the name encoder's score added to the re-ranker's logit; 0: the re-ranker "
            "alone). Use the weight tuned on a dev set (docs/reranker.md), or 0.")
    # ---- E820–E824: the lean runtime and its extras ----
    E820 = ("{what} needs {packages}, which the runtime install (no extras) leaves out ({reason}). Install the "
            "extra: `pip install \"spacy-sapbert[{extra}]\"`.")
    E821 = ("Linker '{name}' resolves abbreviations (resolve_abbreviations = true), which needs scispaCy ({reason}). "
            "Install the extra: `pip install \"spacy-sapbert[abbreviations]\"`, or turn it off, e.g. "
            "`spacy.load(path, config={{\"components.{name}.resolve_abbreviations\": False}})`.")
    E822 = ("The encoder at '{path}' would run with PyTorch ({why}), which the runtime install (no extras) leaves "
            "out ({reason}). Install the extra: `pip install \"spacy-sapbert[train]\"`, or, where it is installed, "
            "write the ONNX export once (`spacy-sapbert export-onnx {path}`) and link on the CPU with runtime 'auto' "
            "or 'onnx'.")

    # ---- E825–E829: the int8 name encoder (precision 'int8') ----
    E825 = ("Linker '{name}' has precision 'int8', which ONNX Runtime runs on the CPU, but {setting} was asked for. "
            "Use runtime 'auto' or 'onnx' and device 'auto' or 'cpu' with precision 'int8', or precision 'auto' / "
            "'fp32' (or 'fp16' / 'bf16' on a GPU) with PyTorch.")
    E826 = ("'{path}', the int8 copy of the name encoder that precision 'int8' runs, {why}. Write it again with "
            "`spacy-sapbert export-onnx --quantize {folder}` (the pipeline or encoder folder), or set the linker's "
            "precision to 'fp32' to run the float32 export instead.")
    E827 = ("Linker '{name}' has precision {precision!r} but was given an encoder of precision {encoder!r}: the "
            "pipeline saved from it would run another encoder than the one linking now. Give the int8 encoder "
            "(OnnxEncoder(folder, quantized=True)) with precision 'int8', and any other with another precision.")

    # E830–E831: encoding big KBs (build-index runtime and precision)
    E830 = ("build-index option {name} = {value!r} is not known. Choose one of: {allowed}.")
    E831 = ("build-index cannot run {what}. Fix: {fix}.")

    # ---- E832–E834: one large-KB index (the compact kind removed) and the index settings ----
    E832 = ("The index at '{path}' is a {kind!r} index, a kind this version no longer has (the usearch compact "
            "index was removed on 2026-11-27: the faiss ivf index builds faster, searches faster and finds more; "
            "docs/scale.md). Rebuild it: `spacy-sapbert build-index {kb} --model {model} --output NEW_INDEX "
            "--kind auto` (ivf from 500,000 names; `--kind ivf` to ask for it), and for a pipeline then "
            "`spacy-sapbert create-pipeline NEW_PIPELINE --kb {kb} --model {model} --index NEW_INDEX`.")


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
