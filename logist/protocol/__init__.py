"""The exchange with the model: the actions, one class each (:mod:`.actions`),
the answer protocol (:mod:`.answer`), the forms
answers arrive in (:mod:`.forms`), the paths an answer may name (:mod:`.paths`),
the text that teaches it (:mod:`.prompt_text`) and the constraint a decoder
applies (:mod:`.decoding`). Pure: no files, no git, no network.

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
