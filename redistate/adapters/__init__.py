"""Agent-framework adapters, one folder per framework, each with a README."""
