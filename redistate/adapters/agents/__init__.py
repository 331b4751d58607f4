"""The OpenAI Agents SDK session (public as redistate.agents): see README.md here."""
