"""The LangGraph checkpointer (public as redistate.langgraph): see README.md here."""
