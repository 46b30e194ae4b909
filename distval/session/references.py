"""``distval run --references FILE --system NAME`` in the run stage: the file read and the system checked before
anything runs (distval/comparing/judges.py adds the ``references`` testcase)."""

from __future__ import annotations

from distval.comparing.judges import ReferencesOptions
from distval.config.references import load_references, system_problem
from distval.errors import BadInput


def references_options(path: str | None, system: str | None) -> ReferencesOptions:
    """--references and --system: the file read and the system checked, before anything runs; BadInput (a ConfigError
    for the file, one line per problem) otherwise."""
    if path is None:
        if system is not None:
            raise BadInput("--system names the machine for --references: give --references FILE too")
        return ReferencesOptions(None, "")
    if system is None:
        raise BadInput("--references FILE judges the run on one system's references: give --system NAME too")
    references = load_references(path)
    problem = system_problem(references, system)
    if problem is not None:
        raise BadInput(problem)
    return ReferencesOptions(references, system)
