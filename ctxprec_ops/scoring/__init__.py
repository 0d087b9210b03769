"""The metric's maths and the judge's prompt: the contextual-precision formula, ranking
measures over labels, the prompt template and answer formats, verdict parsing, self-consistency votes.

Pure code: no I/O, no judge calls, nothing heavy imported."""
