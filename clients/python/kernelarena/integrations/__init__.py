"""Trainer integrations of kernelarena (docs/trainers.md). `text` is the shared text
layer (reply parsing, prompt and feedback rendering, reward scaling); each trainer's
module imports its own ecosystem's package, so import only the one you use."""
