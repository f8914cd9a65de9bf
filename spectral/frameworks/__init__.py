"""Training frameworks' own extension points, filled with a generated config's rules.

Each module imports its framework (it is the framework's users who import it): nothing
under :mod:`spectral.torch` imports these, so the vendored torch runtime needs none of them.
"""
