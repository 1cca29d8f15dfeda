"""The exchange with the model: the actions, one class each (:mod:`.actions`),
the answer protocol (:mod:`.answer`), the forms
answers arrive in (:mod:`.forms`), the paths an answer may name (:mod:`.paths`),
the text that teaches it (:mod:`.prompt_text`) and the constraint a decoder
applies (:mod:`.decoding`). Pure: no files, no git, no network.
"""
