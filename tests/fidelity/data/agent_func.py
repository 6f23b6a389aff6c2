"""A stand-in agent file for `--agent_func_path` (its content is read by the vLLM actors, not at start-up)."""


class AgentExecutor:
    pass
