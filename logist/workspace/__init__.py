"""The job's workspace: the git repository and its commits (:mod:`.repository`),
git run safely (:mod:`.git`), file changes (:mod:`.changes`), diffs
(:mod:`.diffs`) and the sandbox a model's command runs in (:mod:`.sandbox`).
"""
