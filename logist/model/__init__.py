"""The model: what the engine asks of one (:mod:`.base`: a request in, an
answer out), the client that asks an OpenAI-compatible endpoint
(:mod:`.client`), and the reader of what a model sends back (:mod:`.completions`).
"""
