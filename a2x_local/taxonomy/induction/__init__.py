"""The taxonomy build (the A2X algorithm), one module per step: `keywords`, `design` (with validation and
redesign), `refine`, `assign`, then `finalise` per level, `crossdomain` once the tree stands, and `resplit` of
over-full leaves. `steps.STEPS` is the one table of a level's steps, in order: the builder (`builder.py`) asks each
step for its requests, sends one engine round, and hands each answer back to the step. `state.py` is the
checkpointed state, `runner.py` runs a build against the database (lock, checkpoints, resume), `calls.py` and
`schemas.py` are the prompts' and answers' shared parts. Private to the taxonomy stage."""
