"""An example App for ToolLoop: text-processing tools, policies and an evidence hook.

Nothing in `app/` knows about it; `registries/example.yml` registers it.
"""
