"""Errors E001–E499: general, knowledge bases and readers, encoder, index, linker, training, evaluation,
project, assets and NER; read them through :class:`spacy_sapbert.errors.Errors`."""
from __future__ import annotations


class CoreErrors:
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
    E131 = ("max_length = {value!r} is more word pieces than the model '{name}' reads at once ({limit}, from its "
            "max_position_embeddings): a longer name or mention would stop the encoder. Give max_length {limit} or "
            "less (--max-length, or max_length in the linker config).")

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

