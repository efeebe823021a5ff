"""vibe_agent: the small package behind the Vibe Agent workbook.

Import what a lesson has built; nothing here touches the network, the clock or
the disk at import time.
"""

from .loop import DEFAULT_SYSTEM_PROMPT, AgentResult, StopReason, run_agent
from .registry import ToolDefinitionError, ToolRegistry, ToolResult
from .scripted import ScriptedModel, misbehaving, reference_model
from .trace import Trace, TraceStep

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AgentResult",
    "ScriptedModel",
    "StopReason",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "Trace",
    "TraceStep",
    "misbehaving",
    "reference_model",
    "run_agent",
]
