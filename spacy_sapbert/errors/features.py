"""Errors E700–E839: scale-out, multilingual, research workflow, unseen mentions, the re-ranker and the
footprint; read them through :class:`spacy_sapbert.errors.Errors`."""
from __future__ import annotations


class FeatureErrors:
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

    # ---- E790–E797: calibrated confidence (knowing when not to link) ----
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

    # E798–E799: abbreviation tables (short forms the document does not define)
    E798 = ("'{path}' is not a readable abbreviation table ({why}). Mine it again with `spacy-sapbert "
            "mine-abbreviations`, or fix the line or entry named (a hand-written table is a TSV file: short "
            "form<TAB>long form a line).")
    E799 = ("Abbreviation mining option {what} is not allowed. Fix: {fix}.")

    # ---- E800–E819: the cross-encoder re-ranker ----
    E801 = ("'{path}' is not a re-ranker folder: it has no {file}. Give the model/ folder that "
            "`spacy-sapbert train-reranker` wrote (OUTPUT/model).")
    E802 = ("Re-ranker file '{path}' is damaged: {why}. Train the re-ranker again (`spacy-sapbert train-reranker`) "
            "or copy its folder again; `spacy-sapbert verify` checks every file.")
    E803 = ("Cannot start a re-ranker from '{path}': {why}. Give a local Hugging Face model folder of a BERT-like "
            "model (the name encoder's folder works) with --base.")
    E804 = ("Re-ranker folder '{path}' has no {precision} graph ({file} is not recorded), which runtime 'onnx' "
            "runs at reranker_precision '{precision}'. Use the other reranker_precision (int8, float32) or runtime "
            "'torch', or train it again without --no-onnx.")
    E805 = ("Unknown re-ranker runtime '{value}'. Choose from: auto, onnx, torch.")
    E806 = ("Run folder '{path}' was made with another {field} ({theirs!r}, now {ours!r}): --resume continues a run "
            "only with the settings it started with. Use those settings, or another --output folder.")
    E807 = ("Run folder '{path}' already holds a re-ranker run. Pass --resume to continue it, or choose another "
            "--output folder.")
    E808 = ("Re-ranker setting {name} = {value!r} cannot be used: it must be {allowed}.")
    E809 = ("No training group for the re-ranker: {what}. Give annotated documents whose ids the KB knows "
            "(or --pseudo-mentions N to use KB synonyms), and a KB with more than one concept.")
    E810 = ("Linker setting {name} = {value!r} cannot be used: it must be {allowed}.")
    E811 = ("The re-ranker '{path}' was trained for another {what} ({theirs}) than {owner} ({ours}). Train a "
            "re-ranker for this KB and name encoder (`spacy-sapbert train-reranker`), or use it with the ones it was "
            "made for.")
    E812 = ("Linker '{name}' has a re-ranker and context re-ranking (prototypes or type_priors) at once, which this "
            "version does not combine. Use one: leave out reranker_path, or the prototypes and type_priors.")
    E813 = ("Linker setting reranker_dense_weight = {value!r} cannot be used: it must be a finite number from 0 to "
            "{maximum} (the weight of the name encoder's score added to the re-ranker's logit; 0: the re-ranker "
            "alone). Use the weight tuned on a dev set (docs/reranker.md), or 0.")
    E814 = ("[evaluate.systems] {key} = {value!r} in {path} cannot be used: it must be {allowed}. Fix the key "
            "(configs/evaluate.cfg lists every key with its meaning; docs/evaluation.md, 'Levers together').")
    E815 = ("[evaluate.systems] {key} in {path} needs {what}. {fix}")
    E816 = ("Re-ranker distillation needs a teacher and a distill weight together: {what}. Give both (`train-reranker "
            "--teacher FOLDER --distill W`, W in (0, 1]: the teacher's share of the loss), or neither.")
    # ---- E820–E822: the lean runtime and its extras ----
    E820 = ("{what} needs {packages}, which the runtime install (no extras) leaves out ({reason}). Install the "
            "extra: `pip install \"spacy-sapbert[{extra}]\"`.")
    E821 = ("Linker '{name}' resolves abbreviations (resolve_abbreviations = true), which needs scispaCy ({reason}). "
            "Install the extra: `pip install \"spacy-sapbert[abbreviations]\"`, or turn it off, e.g. "
            "`spacy.load(path, config={{\"components.{name}.resolve_abbreviations\": False}})`.")
    E822 = ("The encoder at '{path}' would run with PyTorch ({why}), which the runtime install (no extras) leaves "
            "out ({reason}). Install the extra: `pip install \"spacy-sapbert[train]\"`, or, where it is installed, "
            "write the ONNX export once (`spacy-sapbert export-onnx {path}`) and link on the CPU with runtime 'auto' "
            "or 'onnx'.")
    # ---- E823–E824: the linker's settings ----
    E823 = ("Linker '{name}' has no setting {key!r}. Its settings: {known}. Fix the key (the config block "
            "[components.{name}] or the SapbertLinker(...) keyword); docs/linker.md describes each setting.")

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
    E828 = ("Unknown int8 recipe {value!r}. Choose one of: {choices} (spacy_sapbert.encoding.int8_recipes; "
            "docs/linker.md, \"int8 name encoder\", says what each does and costs), or leave it out for the default.")

    # E830–E831: encoding big KBs (build-index runtime and precision)
    E830 = ("build-index option {name} = {value!r} is not known. Choose one of: {allowed}.")
    E831 = ("build-index cannot run {what}. Fix: {fix}.")

    # ---- E832–E834: one large-KB index (the compact kind removed) and the index settings ----
    E832 = ("The index at '{path}' is a {kind!r} index, a kind this version no longer has (the usearch compact "
            "index was removed on 2026-11-27: the faiss ivf index builds faster, searches faster and finds more; "
            "docs/scale.md). Rebuild it: `spacy-sapbert build-index {kb} --model {model} --output NEW_INDEX "
            "--kind auto` (ivf from 500,000 names; `--kind ivf` to ask for it), and for a pipeline then "
            "`spacy-sapbert create-pipeline NEW_PIPELINE --kb {kb} --model {model} --index NEW_INDEX`.")
    E833 = ("Unknown index setting(s) {names} in {where}. The settings an index is built with are: {known} "
            "(spacy_sapbert.index.IndexSettings; docs/scale.md). Fix the name or leave it out.")
    E834 = ("Index setting {name} must be {expected}, got {value!r}. Fix the option or config value "
            "(spacy_sapbert.index.IndexSettings; docs/scale.md has each setting's default).")

    # ---- E835: compiling the bulk encoder (build-index --compile) ----
    E835 = ("torch.compile could not compile the encoder '{name}' on {device} ({reason}). On a CPU it needs a C++ "
            "compiler (g++ or clang++ on the PATH, or $CXX); on a GPU, Triton. Install one, or build without "
            "--compile (compile=False): the same vectors within rounding, at the eager speed.")

