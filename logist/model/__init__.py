"""The endpoint: the client that talks to the model (:mod:`.client`) and the
reader of what it sends back (:mod:`.completions`).
"""
