"""Errors E500–E699: interruption, outputs, untrusted bytes and integrity, context, documentation and
results files; read them through :class:`spacy_sapbert.errors.Errors`."""
from __future__ import annotations


class HardeningErrors:
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
    E582 = ("The ivf index and the float16 hnsw graph need faiss, a dependency of spacy-sapbert, which is not "
            "installed or broken ({reason}). Install it again: `pip install faiss-cpu` (requirements.txt pins the "
            "version), or build with --kind exact, or --kind hnsw --hnsw-vectors float32 (hnswlib).")
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

