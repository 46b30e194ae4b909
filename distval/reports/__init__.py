"""The reports written at the end of a run, every one rendered from the one ``results.RunSummary`` (comparing a
run with others is distval/comparing/).

One module per format: ``junit`` (JUnit XML), ``json_report`` (the JSON report), ``markdown`` (Markdown,
also appended to ``$GITHUB_STEP_SUMMARY``), ``summary`` (the table on stdout). ``common`` holds what
several formats state alike (the run's and each testsuite's properties, the command that reproduces a
scenario, the pass count); ``files`` is the one atomic file writer every format writes through;
``distval/escape.py`` makes the image's text (names, messages, labels) safe for a Markdown cell, inline code
and a terminal line. Live progress while the run goes on is ``distval.run.progress``, not here.
"""
