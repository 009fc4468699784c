"""Steps that run ube-stream inside other data-processing frameworks.

:mod:`ube_stream.integrations.datatrove`: a datatrove pipeline step that
tokenizes documents with any ube-stream tokenizer and writes datatrove's
``.ds`` token files (``pip install datatrove``).  Each integration imports its
framework only when used.
"""
