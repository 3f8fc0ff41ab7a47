"""The ground floor every other package stands on: atomic writes and small helpers (:mod:`.util`), safe outputs
(:mod:`.outputs`), checksums of saved files (:mod:`.integrity`), UTF-8 line reading (:mod:`.lines`), the optional
extras (:mod:`.extras`), Ray sessions (:mod:`.ray_session`), forked worker processes (:mod:`.processes`) and the
package-wide defaults (:mod:`.defaults`). It imports nothing of the package but :mod:`spacy_sapbert.errors` and
:mod:`spacy_sapbert.about`."""
