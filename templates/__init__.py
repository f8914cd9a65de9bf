"""jinja2 templates for every rendered artefact (tables, LaTeX, generated code).

A package only so that it is installed next to ``spectral``; it holds no code.
"""
