"""The course machinery around the agent: run modes, recordings, scripted and reference
models, the local model, demo scenarios, the command line, notebook tooling, checkers.

The agent itself (loop, registry, tools, trace, context, naive, world) lives one level
up in `vibe_agent/` and never imports from here.
"""
